// One incast sender process. Keeps `concurrency` Sends outstanding to its
// service; a message's completion time is its first submission to its Ok
// OpDone. Statuses the flow-control design defines for a Send under
// back-pressure: Busy (the receiving side refused it: a main sender
// resubmits the same message after a short pause; a stalled-service sender
// counts it) and Timeout (the wait passed delivery-timeout-ms: a failure for
// a main sender, counted for a stalled-service sender). Anything else fails
// the run, and so does a second completion for one submission.
#include <poll.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <vector>

#include "ferry/client.h"
#include "ferry_session.h"
#include "scenario_incast.h"

namespace ferry::bench {

namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kNoProgressDeadline = std::chrono::seconds(20);
constexpr auto kAttachDeadline = std::chrono::seconds(60);
constexpr auto kBusyPause = std::chrono::microseconds(200);  // before a Busy message goes again

struct Slot {
  Buffer buffer;
  std::uint64_t seq = 0;
  Clock::time_point first_submit{};
  Clock::time_point retry_at{};
  bool inflight = false;
};

class Sender {
 public:
  Sender(const IncastPlan& plan, const IncastShared& shared, std::uint32_t stream)
      : plan_(plan),
        shared_(shared),
        stream_(stream),
        board_(shared.board().senders[stream]),
        stalled_(plan.stalled_stream(stream)) {}

  bool setup() {
    const std::string& socket = plan_.sender_sockets[stream_ % plan_.sender_sockets.size()];
    // Senders receive nothing: the smallest rx arena. A daemon that
    // registers each segment with the NIC may answer an attach burst slowly
    // (Soft-RoCE under emulation): Timeout is retried up to a deadline.
    const auto deadline = Clock::now() + kAttachDeadline;
    Error attached;
    for (;;) {
      attached = attach_bench_client(socket, "ferry-bench incast sender", plan_.size * plan_.concurrency, 1, &client_);
      if (attached.status() != Status::Timeout || Clock::now() > deadline) break;
    }
    if (attached.failed()) return fail(attached.message());
    if (const Error e = size_fits(*client_, plan_.size); e.failed()) return fail(e.message());
    const std::string target = plan_.target_prefix + (stalled_ ? kIncastStallService : kIncastService);
    const auto opened = client_->open(target);
    if (!opened) return fail("open " + target + ": " + std::string(to_string(opened.status)));
    endpoint_ = opened.value;
    for (std::uint32_t i = 0; i < plan_.concurrency; ++i) {
      Slot s;
      s.buffer = client_->alloc(plan_.size);
      if (!s.buffer) return fail("cannot allocate send buffers");
      // The body is fixed per slot (its checksum computed once); the header
      // is rewritten for every message.
      std::byte* body = s.buffer.data + sizeof(IncastHeader);
      const std::size_t body_len = plan_.size - sizeof(IncastHeader);
      for (std::size_t b = 0; b < body_len; ++b)
        body[b] = static_cast<std::byte>((b * 131u + stream_ * 7u + i * 13u + 0x5a) & 0xffu);
      body_sums_.push_back(incast_checksum(body, body_len));
      slots_.push_back(s);
      free_.push_back(i);
    }
    retry_.reserve(plan_.concurrency);
    return true;
  }

  // Sends `count` new messages, or (open_ended: a stalled-service sender
  // in the measured phase) until the parent says the main senders are
  // done; then drains.
  bool run(std::uint64_t count, bool measure, bool open_ended) {
    std::uint64_t started = 0;
    Clock::time_point progress = Clock::now();
    for (;;) {
      const bool stop_new = open_ended ? (shared_.board().main_done.load(std::memory_order_acquire) != 0 ||
                                          board_.issued >= plan_.max_seq)
                                       : started >= count;
      const auto now = Clock::now();
      // Resubmit Busy messages whose pause is over, then new ones.
      for (std::size_t i = 0; i < retry_.size();) {
        Slot& s = slots_[retry_[i]];
        if (s.retry_at > now) {
          ++i;
          continue;
        }
        const Status st = submit(retry_[i]);
        if (st == Status::Busy) break;  // SQ full: later
        if (st != Status::Ok) return fail_status("send rejected at submission", st);
        retry_[i] = retry_.back();
        retry_.pop_back();
      }
      while (!stop_new && !free_.empty()) {
        const std::uint32_t idx = free_.back();
        slots_[idx].seq = board_.issued;
        slots_[idx].first_submit = Clock::now();
        const Status st = submit(idx);
        if (st == Status::Busy) break;
        if (st != Status::Ok) return fail_status("send rejected at submission", st);
        free_.pop_back();
        ++board_.issued;
        ++started;
        if (open_ended ? board_.issued >= plan_.max_seq : started >= count) break;
      }
      const bool idle = free_.size() == slots_.size();
      const bool no_more = open_ended ? (shared_.board().main_done.load(std::memory_order_acquire) != 0 ||
                                         board_.issued >= plan_.max_seq)
                                      : started >= count;
      if (idle && no_more) return true;

      // Wait briefly when something waits for its retry time or the stop
      // flag must be watched; otherwise up to the deadline.
      const auto timeout =
          (!retry_.empty() || open_ended) ? std::chrono::milliseconds(1) : std::chrono::milliseconds(200);
      const std::size_t n = plan_.busy_poll ? client_->poll(batch_) : client_->wait(batch_, timeout);
      const auto done_at = Clock::now();
      if (n == 0) {
        if (client_->state() != Status::Ok) return fail("daemon gone");
        if (done_at - progress > kNoProgressDeadline) return fail("no Send completed for 20 s");
        continue;
      }
      progress = done_at;
      for (std::size_t i = 0; i < n; ++i)
        if (!on_completion(batch_[i], done_at, measure)) return false;
    }
  }

  // After the last completion: anything more is a double completion.
  bool check_quiet() {
    const std::size_t n = client_->wait(batch_, std::chrono::milliseconds(50));
    for (std::size_t i = 0; i < n; ++i)
      if (batch_[i].kind == Completion::Kind::OpDone && batch_[i].op == OpKind::Send) {
        ++board_.double_completions;
        return fail("a Send completed after every Send had completed");
      }
    return true;
  }

  bool fail(const std::string& why) {
    std::snprintf(board_.error, sizeof board_.error, "sender %u: %s", stream_, why.c_str());
    board_.failed = 1;
    return false;
  }

 private:
  Status submit(std::uint32_t idx) {
    Slot& s = slots_[idx];
    IncastHeader h{};
    h.magic = kIncastMagic;
    h.stream = static_cast<std::uint16_t>(stream_);
    h.seq = s.seq;
    h.length = static_cast<std::uint32_t>(plan_.size);
    h.body_sum = body_sums_[idx];
    h.header_sum = incast_header_sum(h);
    std::memcpy(s.buffer.data, &h, sizeof h);
    const Status st = client_->send(endpoint_, s.buffer, static_cast<std::uint32_t>(plan_.size), idx);
    if (st == Status::Ok) s.inflight = true;
    return st;
  }

  bool on_completion(const Completion& c, Clock::time_point now, bool measure) {
    if (c.kind != Completion::Kind::OpDone) return fail("a sender received a delivery");
    if (c.op == OpKind::ReleaseRx) return true;
    if (c.op != OpKind::Send || c.user_data >= slots_.size()) return fail("unexpected completion");
    Slot& s = slots_[c.user_data];
    if (!s.inflight) {
      ++board_.double_completions;
      return fail("a Send completed twice");
    }
    s.inflight = false;
    const auto idx = static_cast<std::uint32_t>(c.user_data);
    switch (c.status) {
      case Status::Ok:
        ++board_.ok;
        if (measure && !stalled_)
          shared_.samples(stream_)[board_.measured++] = static_cast<std::uint64_t>(
              std::chrono::duration_cast<std::chrono::nanoseconds>(now - s.first_submit).count());
        free_.push_back(idx);
        return true;
      case Status::Busy:
        ++board_.busy;
        if (stalled_) {
          free_.push_back(idx);
        } else {
          s.retry_at = now + kBusyPause;
          retry_.push_back(idx);
        }
        return true;
      case Status::Timeout:
        ++board_.timeouts;
        if (!stalled_) return fail_status("a Send to the measured service", c.status);
        free_.push_back(idx);
        return true;
      default: return fail_status("a Send completed", c.status);
    }
  }

  bool fail_status(const char* what, Status st) {
    board_.last_bad_status = static_cast<std::uint8_t>(st);
    return fail(std::string(what) + " with " + std::string(to_string(st)));
  }

  const IncastPlan& plan_;
  const IncastShared& shared_;
  std::uint32_t stream_;
  SenderBoard& board_;
  bool stalled_;
  std::unique_ptr<Client> client_;
  EndpointId endpoint_ = 0;
  std::vector<Slot> slots_;
  std::vector<std::uint64_t> body_sums_;
  std::vector<std::uint32_t> free_;
  std::vector<std::uint32_t> retry_;
  std::array<Completion, kCompletionBatch> batch_{};
};

// Blocks until the parent closes its end (EOF) or the pipe breaks.
void wait_eof(int fd) {
  char c;
  for (;;) {
    const ssize_t n = ::read(fd, &c, 1);
    if (n == 0 || (n < 0 && errno != EINTR)) return;
  }
}

void report(int fd, char c) { [[maybe_unused]] auto n = ::write(fd, &c, 1); }

}  // namespace

int run_incast_sender(const IncastPlan& plan, const IncastShared& shared, std::uint32_t stream, int report_fd,
                      int go_fd, int exit_fd) {
  Sender s(plan, shared, stream);
  if (!s.setup() || !s.run(plan.warmup, false, false)) {
    report(report_fd, 'f');
    return 1;
  }
  report(report_fd, 'r');
  wait_eof(go_fd);
  const std::uint64_t count = plan.stalled_stream(stream) ? 0 : plan.measured[stream];
  const bool ok = s.run(count, true, plan.stalled_stream(stream)) && s.check_quiet();
  if (ok) shared.board().senders[stream].done.store(1, std::memory_order_release);
  report(report_fd, ok ? 'd' : 'f');
  wait_eof(exit_fd);
  return ok ? 0 : 1;
}

}  // namespace ferry::bench
