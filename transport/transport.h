// The transport interface: a small abstract class with batch-shaped calls
// (post a batch, poll a batch), so one virtual call covers a burst. Backends are
// `final` and live in their own folders (tcp/, rdma/). An operation a backend
// cannot do returns Status::NotSupported; there are no optional hooks.
//
// Threading: a Transport has one owner thread (no locks on the datapath).
// Every method except the constructor and the const accessors must be
// called on it; debug builds assert this.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "ferry/result.h"
#include "ferry/status.h"
#include "transport/wire/header.h"
#include "transport/wire/remote_buffer.h"

namespace ferry::transport {

enum class TransportKind : std::uint8_t { Tcp = 0, Rdma = 1 };

constexpr std::string_view to_string(TransportKind k) noexcept {
  switch (k) {
    case TransportKind::Tcp: return "tcp";
    case TransportKind::Rdma: return "rdma";
  }
  return "unknown";
}

// A connection handle: slot and generation, so a stale id never names a new
// connection. 0 is never valid.
using ConnId = std::uint32_t;
inline constexpr ConnId kInvalidConn = 0;

// Batch sizes callers should use for post/poll arrays; sized so one batch is
// one syscall (tcp) or one doorbell (rdma) without being a latency hazard.
inline constexpr std::size_t kPostBatch = 32;
inline constexpr std::size_t kPollBatch = 64;
static_assert(kPostBatch > 0 && (kPostBatch & (kPostBatch - 1)) == 0);
static_assert(kPollBatch > 0 && (kPollBatch & (kPollBatch - 1)) == 0);

enum class WrOp : std::uint8_t {
  Send = 0,          // header + inline payload, delivered as a Recv completion
  RdmaWrite = 1,     // payload -> remote buffer (rdma only)
  RdmaWriteImm = 2,  // as RdmaWrite, plus a notification at the peer (rdma only)
  RdmaRead = 3,      // remote buffer -> local payload buffer (rdma only)
};

constexpr std::string_view to_string(WrOp op) noexcept {
  switch (op) {
    case WrOp::Send: return "Send";
    case WrOp::RdmaWrite: return "RdmaWrite";
    case WrOp::RdmaWriteImm: return "RdmaWriteImm";
    case WrOp::RdmaRead: return "RdmaRead";
  }
  return "Unknown";
}

// Rails (NICs) one daemon's lanes may spread over (daemon/rails/).
inline constexpr std::uint32_t kMaxRails = 4;

// A registered memory region. TCP needs none; rdma fills lkey/rkey.
// rail_lkey: the same memory's lkey on each rail of a multi-rail lane
// transport (0: not registered there); the rail set posts a WR with the
// key of the rail its connection is on.
struct MemoryHandle {
  std::uint64_t id = 0;
  std::uint32_t lkey = 0;
  std::uint32_t rkey = 0;
  std::array<std::uint32_t, kMaxRails> rail_lkey{};
};

// One work request. The payload is not copied: it must stay valid and
// unchanged until this WR's SendDone completion (as with verbs).
struct SendWr {
  ConnId conn = kInvalidConn;
  WrOp op = WrOp::Send;
  bool signaled = true;   // false: no SendDone on success (failures always complete)
  wire::Header header{};  // header.payload_len is set from payload_len by the transport
  const std::byte* payload = nullptr;
  std::uint32_t payload_len = 0;
  std::uint64_t user_data = 0;  // echoed in the completion
  wire::RemoteBuffer remote{};  // RDMA ops only
  // RDMA ops, several rails: the remote buffer's key on each rail of the
  // peer that exposed it (its RailKeys table, transport/wire/rail_keys.h).
  // The lane posting the WR puts the entry of the peer rail at the far end
  // of its connection into remote.rkey, again at each replay; 0: keep
  // remote.rkey (the key the request carried).
  std::array<std::uint32_t, kMaxRails> remote_rail_rkey{};
  MemoryHandle local{};  // RDMA ops only: region holding `payload`
  // Send only: up to kMaxPrefixBytes copied at post time in front of the
  // payload (one message: header, prefix, payload; header.payload_len covers
  // both). Carries the RemoteBuffer descriptors of zero-copy Calls and
  // rendezvous requests without a third SGE or a daemon-side buffer that
  // would have to outlive the WR. Backends without it return NotSupported.
  std::array<std::byte, 32> prefix{};
  std::uint8_t prefix_len = 0;
};
inline constexpr std::size_t kMaxPrefixBytes = sizeof(SendWr::prefix);

enum class CompletionKind : std::uint8_t {
  SendDone = 0,   // a posted WR finished (status Ok) or failed (status says why)
  Recv = 1,       // a message arrived: header + payload
  Accepted = 2,   // a listener accepted a new connection `conn`
  Closed = 3,     // `conn` is gone; every WR posted on it has completed before this
  Connected = 4,  // `conn` from connect_async() is established (a failed one reports Closed instead)
};

constexpr std::string_view to_string(CompletionKind k) noexcept {
  switch (k) {
    case CompletionKind::SendDone: return "SendDone";
    case CompletionKind::Recv: return "Recv";
    case CompletionKind::Accepted: return "Accepted";
    case CompletionKind::Closed: return "Closed";
    case CompletionKind::Connected: return "Connected";
  }
  return "Unknown";
}

struct Completion {
  CompletionKind kind = CompletionKind::SendDone;
  // Closed: Ok (local close), PeerReset, ProtocolError; for a connect_async
  // that failed, PeerUnreachable, or Busy when the peer turned it away for
  // want of a free connection slot (a backend that can tell: rdma).
  Status status = Status::Ok;
  ConnId conn = kInvalidConn;
  std::uint64_t user_data = 0;  // SendDone: the WR's user_data
  wire::Header header{};        // Recv
  // Recv: the payload, header.payload_len bytes inside the transport's receive
  // buffer. Valid until the next poll() call on this transport.
  const std::byte* payload = nullptr;
};

// post_send() accepts a prefix of the batch. `status` says why the rest was
// not accepted: Busy (send queue full: poll and retry), BadRequest (payload
// too large or inconsistent WR), EndpointClosed (unknown or closing conn),
// NotSupported (op the backend lacks). Ok when all were accepted.
struct [[nodiscard]] PostResult {
  std::uint32_t accepted = 0;
  Status status = Status::Ok;
};

struct TransportCaps {
  TransportKind kind = TransportKind::Tcp;
  bool memory_registration = false;  // register_memory() does something
  bool rdma_write = false;
  bool rdma_write_imm = false;
  bool rdma_read = false;
  std::uint32_t max_message_bytes = 0;  // largest payload per WR
  std::uint32_t send_queue_depth = 0;   // WRs outstanding per connection
  // Receives posted per connection: the peer may have this many messages
  // that consume a receive (Send, RdmaWriteImm) in flight to us. Sent as the
  // handshake's initial_credits (daemon/peer/lane.h).
  std::uint32_t recv_depth = 0;
  // Receives of one pool every connection shares (rdma: the SRQ), 0 when
  // each connection has recv_depth of its own (tcp). With a pool, the
  // owner's grants must keep the messages in flight to it within the pool.
  std::uint32_t recv_pool = 0;
  std::uint32_t max_connections = 0;
};

class Transport {
 public:
  virtual ~Transport() = default;
  Transport(const Transport&) = delete;
  Transport& operator=(const Transport&) = delete;

  virtual TransportCaps caps() const noexcept = 0;
  TransportKind kind() const noexcept { return caps().kind; }

  // An fd that becomes readable when poll() may have work (epoll/asio
  // friendly): the owner may sleep on it instead of busy polling.
  virtual int event_fd() const noexcept = 0;

  // ---- control path (may allocate, may block for a bounded time) ----
  // Listens on a numeric host; port 0 picks one. Returns the bound port.
  [[nodiscard]] virtual Result<std::uint16_t> listen(std::string_view host, std::uint16_t port) = 0;
  // Connects within the backend's configured timeout; PeerUnreachable after
  // it; Busy when no slot is free here, or (rdma) the peer says it has none.
  [[nodiscard]] virtual Result<ConnId> connect(std::string_view host, std::uint16_t port) = 0;
  // Starts a connect without waiting for it: the id comes back at once, a
  // Connected completion says it is usable, a Closed one (PeerUnreachable)
  // that it failed or timed out; close() abandons it. NotSupported where a
  // backend has no such path (use connect()).
  [[nodiscard]] virtual Result<ConnId> connect_async(std::string_view host, std::uint16_t port) {
    (void)host;
    (void)port;
    return Result<ConnId>::fail(Status::NotSupported);
  }
  // The numeric host address of a connection's peer, "" when the backend
  // cannot tell (a daemon names an accepted peer by it).
  virtual std::string peer_address(ConnId conn) const {
    (void)conn;
    return {};
  }
  // Starts closing: pending WRs complete with Cancelled, then a Closed
  // completion (status Ok) ends the connection. EndpointClosed when unknown.
  [[nodiscard]] virtual Status close(ConnId conn) = 0;
  [[nodiscard]] virtual Result<MemoryHandle> register_memory(void* addr, std::size_t len) = 0;
  [[nodiscard]] virtual Status deregister_memory(MemoryHandle mr) = 0;

  // ---- datapath (no allocation, no locks, no exceptions) ----
  [[nodiscard]] virtual PostResult post_send(std::span<const SendWr> wrs) noexcept = 0;
  // Fills up to out.size() completions; returns how many. Never blocks.
  virtual std::size_t poll(std::span<Completion> out) noexcept = 0;
  // The owner found nothing to do and is about to sleep on event_fd(): turn
  // on whatever notification the backend needs for that (an RDMA CQ is armed
  // only here, not while the owner spins). False when work may have arrived
  // meanwhile: poll again before sleeping. The next poll() also looks at the
  // backend's slow sources (connection events, device events).
  virtual bool prepare_to_sleep() noexcept { return true; }

  // ---- facts the owner reports (any thread may read them when quiet) ----
  // Sends that failed because the peer had no receive posted (rdma: RNR
  // retries exceeded; rnr_retry is 0, so each is one RNR NAK, i.e. the
  // caller posted beyond the peer's credits). 0 where there is no such thing.
  virtual std::uint64_t rnr_naks() const noexcept { return 0; }

  // The owner trusts an accepted connection (a channel took it): the
  // backend's limits on unauthenticated connections stop applying to it.
  virtual void vouch(ConnId conn) noexcept { (void)conn; }
  // Accepted connections the backend closed to protect its slots: refused at
  // accept, evicted for a newer one, silent past the first-message deadline.
  struct AcceptCounts {
    std::uint64_t refused = 0;
    std::uint64_t evicted = 0;
    std::uint64_t timed_out = 0;
  };
  virtual AcceptCounts accept_counts() const noexcept { return {}; }
  // Connection slots taken now (open, connecting, or closing and not yet
  // reported), of the backend's limit; 0 where it keeps no such table.
  virtual std::uint32_t connections_in_use() const noexcept { return 0; }

  // Hands the transport to another thread: the one that calls it from now
  // on (it was built and set up on this one). No-op where nothing checks.
  virtual void release_owner() noexcept {}

 protected:
  Transport() = default;
};

}  // namespace ferry::transport
