// A Transport for protocol-logic tests: it records every
// WR it is asked to send (header and a copy of the payload) and returns the
// completions a test scripts for it. Protocol code under test sees a normal
// Transport; the test inspects what was sent instead of private members.
//
// Test-only: allocates freely, so it is header-only and never linked into
// the daemon.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "transport/transport.h"

namespace ferry::transport::testing {

struct RecordedSend {
  ConnId conn = kInvalidConn;
  WrOp op = WrOp::Send;
  wire::Header header{};  // payload_len set from the WR, as a real backend does
  std::vector<std::byte> payload;
  std::uint64_t user_data = 0;
  bool signaled = true;
  wire::RemoteBuffer remote{};    // RDMA ops
  std::vector<std::byte> prefix;  // Send: the bytes copied in front of the payload
};

class RecordingTransport final : public Transport {
 public:
  explicit RecordingTransport(TransportCaps caps = default_caps()) : caps_(caps) {}

  static TransportCaps default_caps() {
    TransportCaps c;
    c.kind = TransportKind::Tcp;
    c.max_message_bytes = 1u << 20;
    c.send_queue_depth = 256;
    c.recv_depth = 128;
    c.max_connections = 64;
    return c;
  }

  // ---- scripting ----
  // How many more WRs post_send() accepts before answering `refuse_status`
  // (e.g. Busy to test back-pressure handling). Unlimited by default.
  void limit_accepts(std::size_t n, Status refuse_status = Status::Busy) {
    accept_budget_ = n;
    refuse_status_ = refuse_status;
  }
  // post_send() also queues a SendDone (Ok) for every signaled WR.
  void auto_complete_sends(bool on) { auto_complete_ = on; }
  // Queues a completion for poll().
  void inject(const Completion& c) { pending_.push_back(c); }
  // Queues a Recv of a message; the payload is kept alive by the transport.
  void inject_recv(ConnId conn, wire::Header h, std::vector<std::byte> payload = {}) {
    h.payload_len = static_cast<std::uint32_t>(payload.size());
    payloads_.push_back(std::move(payload));
    Completion c;
    c.kind = CompletionKind::Recv;
    c.conn = conn;
    c.header = h;
    c.payload = payloads_.back().data();
    pending_.push_back(c);
  }
  // Result of the next connect()/listen() calls.
  void set_connect_result(Result<ConnId> r) { connect_result_ = r; }
  void set_listen_result(Result<std::uint16_t> r) { listen_result_ = r; }

  // ---- inspection ----
  const std::vector<RecordedSend>& sent() const { return sent_; }
  void clear_sent() { sent_.clear(); }
  const std::vector<ConnId>& closed() const { return closed_; }
  std::size_t post_calls() const { return post_calls_; }

  // ---- Transport ----
  TransportCaps caps() const noexcept override { return caps_; }
  int event_fd() const noexcept override { return -1; }
  [[nodiscard]] Result<std::uint16_t> listen(std::string_view, std::uint16_t) override { return listen_result_; }
  [[nodiscard]] Result<ConnId> connect(std::string_view, std::uint16_t) override { return connect_result_; }
  // The scripted connect result; a good one is Connected on the next poll().
  [[nodiscard]] Result<ConnId> connect_async(std::string_view, std::uint16_t) override {
    if (connect_result_) {
      Completion c;
      c.kind = CompletionKind::Connected;
      c.conn = connect_result_.value;
      pending_.push_back(c);
    }
    return connect_result_;
  }
  [[nodiscard]] Status close(ConnId conn) override {
    closed_.push_back(conn);
    Completion c;
    c.kind = CompletionKind::Closed;
    c.conn = conn;
    pending_.push_back(c);
    return Status::Ok;
  }
  [[nodiscard]] Result<MemoryHandle> register_memory(void*, std::size_t) override {
    return Result<MemoryHandle>::fail(Status::NotSupported);
  }
  [[nodiscard]] Status deregister_memory(MemoryHandle) override { return Status::NotSupported; }

  [[nodiscard]] PostResult post_send(std::span<const SendWr> wrs) noexcept override {
    ++post_calls_;
    PostResult r;
    for (const SendWr& wr : wrs) {
      if (accept_budget_ == 0) {
        r.status = refuse_status_;
        break;
      }
      if (accept_budget_ != kUnlimited) --accept_budget_;
      RecordedSend s;
      s.conn = wr.conn;
      s.op = wr.op;
      s.header = wr.header;
      s.header.payload_len = wr.payload_len;
      if (wr.payload_len != 0) s.payload.assign(wr.payload, wr.payload + wr.payload_len);
      s.user_data = wr.user_data;
      s.signaled = wr.signaled;
      s.remote = wr.remote;
      s.prefix.assign(wr.prefix.begin(), wr.prefix.begin() + wr.prefix_len);
      sent_.push_back(std::move(s));
      if (auto_complete_ && wr.signaled) {
        Completion c;
        c.kind = CompletionKind::SendDone;
        c.conn = wr.conn;
        c.user_data = wr.user_data;
        pending_.push_back(c);
      }
      ++r.accepted;
    }
    return r;
  }

  std::size_t poll(std::span<Completion> out) noexcept override {
    std::size_t n = 0;
    while (n < out.size() && !pending_.empty()) {
      out[n++] = pending_.front();
      pending_.pop_front();
    }
    return n;
  }

 private:
  static constexpr std::size_t kUnlimited = ~std::size_t{0};
  TransportCaps caps_;
  std::vector<RecordedSend> sent_;
  std::deque<Completion> pending_;
  std::deque<std::vector<std::byte>> payloads_;  // deque: pointers stay valid as it grows
  std::vector<ConnId> closed_;
  std::size_t accept_budget_ = kUnlimited;
  Status refuse_status_ = Status::Busy;
  bool auto_complete_ = false;
  std::size_t post_calls_ = 0;
  Result<ConnId> connect_result_ = Result<ConnId>::ok(1);
  Result<std::uint16_t> listen_result_ = Result<std::uint16_t>::ok(0);
};

}  // namespace ferry::transport::testing
