// The incast receiver process: serves one service, checks every delivered
// message (length, magic, stream, header checksum, body checksum, not seen
// before), marks it in its stream's bitmap and releases it at once. The
// stalled-service receiver runs the same code; the parent SIGSTOPs it for
// the measured phase (a consumer that stops reading) and SIGCONTs it after.
#include <poll.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>

#include "ferry/client.h"
#include "ferry_session.h"
#include "forked_server.h"
#include "scenario_incast.h"

namespace ferry::bench {

namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kDrainDeadline = std::chrono::seconds(15);
constexpr std::uint64_t kMiB = 1ull << 20;

class Receiver {
 public:
  Receiver(const IncastPlan& plan, const IncastShared& shared, bool stalled)
      : plan_(plan),
        shared_(shared),
        stalled_(stalled),
        index_(stalled ? 1 : 0),
        board_(shared.board().receivers[index_]) {}

  Error setup() {
    // The measured receiver gets room for everything its senders can have
    // outstanding (capped); the stalled one a small arena, so it fills.
    const std::uint64_t want = std::uint64_t{plan_.senders} * plan_.concurrency * plan_.size;
    const std::uint64_t rx =
        stalled_ ? 2 * kMiB : std::min<std::uint64_t>(std::max<std::uint64_t>(want, 32 * kMiB), 256 * kMiB);
    if (Error e = attach_bench_client(plan_.receiver_socket,
                                      stalled_ ? "ferry-bench incast stalled receiver" : "ferry-bench incast receiver",
                                      0, rx, &client_);
        e.failed())
      return e;
    const auto served = client_->serve(stalled_ ? kIncastStallService : kIncastService);
    if (!served) return Error(served.status, std::string("serve: ") + std::string(to_string(served.status)));
    service_ = served.value;
    return {};
  }

  // Until board.stop_receivers is set and then until board.expected[index]
  // messages arrived (or the drain deadline passes).
  bool run() {
    bool stopping = false;
    Clock::time_point drain_deadline{};
    for (;;) {
      const std::size_t n = client_->poll(batch_);
      for (std::size_t i = 0; i < n; ++i)
        if (!on_completion(batch_[i])) return false;
      if (!stopping && shared_.board().stop_receivers.load(std::memory_order_acquire) != 0) {
        stopping = true;
        drain_deadline = Clock::now() + kDrainDeadline;
      }
      if (stopping && board_.delivered >= shared_.board().expected[index_].load(std::memory_order_acquire)) return true;
      if (stopping && Clock::now() > drain_deadline) return fail("drain: fewer messages arrived than were sent Ok");
      if (client_->state() != Status::Ok) return fail("daemon gone");
      if (n != 0) continue;
      pollfd p{client_->event_fd(), POLLIN, 0};
      ::poll(&p, 1, 50);  // wakes for completions; the timeout is for the stop flag
    }
  }

  bool fail(const std::string& why) {
    std::snprintf(board_.error, sizeof board_.error, "%s receiver: %s", stalled_ ? "stalled" : "measured", why.c_str());
    board_.failed = 1;
    return false;
  }

 private:
  bool on_completion(const Completion& c) {
    if (c.kind == Completion::Kind::OpDone) {
      if (c.op == OpKind::ReleaseRx && c.status == Status::Ok) return true;
      return fail("unexpected OpDone " + std::string(to_string(c.op)) + " " + std::string(to_string(c.status)));
    }
    if (c.kind != Completion::Kind::Message || c.handle != service_) return fail("unexpected delivery");
    const bool good = check(c);
    client_->release(c);
    return good;
  }

  bool check(const Completion& c) {
    IncastHeader h{};
    if (c.length != plan_.size || c.length < sizeof h) return corrupt("length");
    std::memcpy(&h, c.data, sizeof h);
    if (h.magic != kIncastMagic || h.length != c.length) {
      // Say what arrived instead: zeros, another message's bytes, a shifted copy...
      char what[160];
      std::snprintf(what, sizeof what, "magic %#x length %u (want %#x, %u), stream %u seq %llu, rx offset %llu",
                    h.magic, h.length, kIncastMagic, c.length, h.stream, static_cast<unsigned long long>(h.seq),
                    static_cast<unsigned long long>(c.rx_offset));
      return corrupt(what);
    }
    if (h.header_sum != incast_header_sum(h)) return corrupt("header checksum");
    if (h.stream >= plan_.streams() || plan_.stalled_stream(h.stream) != stalled_) return corrupt("stream");
    if (h.seq >= plan_.max_seq) return corrupt("sequence number out of range");
    if (incast_checksum(c.data + sizeof h, c.length - sizeof h) != h.body_sum) return corrupt("body checksum");
    std::uint64_t& word = shared_.bitmap(h.stream)[h.seq / 64];
    const std::uint64_t bit = std::uint64_t{1} << (h.seq % 64);
    if (word & bit) {
      ++board_.duplicates;
      return fail("stream " + std::to_string(h.stream) + " seq " + std::to_string(h.seq) + " delivered twice");
    }
    word |= bit;
    ++board_.delivered;
    board_.bytes += c.length;
    return true;
  }

  bool corrupt(const char* what) {
    ++board_.corrupt;
    return fail(std::string("corrupt message: ") + what);
  }

  const IncastPlan& plan_;
  const IncastShared& shared_;
  bool stalled_;
  std::uint32_t index_;
  ReceiverBoard& board_;
  std::unique_ptr<Client> client_;
  ServiceId service_ = 0;
  std::array<Completion, kCompletionBatch> batch_{};
};

}  // namespace

int run_incast_receiver(const IncastPlan& plan, const IncastShared& shared, bool stalled, ReadyNotifier& ready) {
  Receiver r(plan, shared, stalled);
  if (const Error e = r.setup(); e.failed()) {
    r.fail(e.message());
    ready.failed(e.message());
    return 1;
  }
  ready.ready();
  return r.run() ? 0 : 1;
}

}  // namespace ferry::bench
