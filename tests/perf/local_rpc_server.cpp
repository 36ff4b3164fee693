#include "local_rpc_server.h"

#include <poll.h>
#include <sched.h>
#include <time.h>

#include <array>
#include <cstdio>
#include <deque>
#include <vector>

#include "ferry_session.h"
#include "payload.h"

namespace ferry::bench {

namespace {

std::uint64_t now_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1'000'000'000u + static_cast<std::uint64_t>(ts.tv_nsec);
}

class EchoServer {
 public:
  EchoServer(Client& client, ServiceId service, std::size_t size, std::uint32_t delay_us)
      : client_(client), service_(service), size_(size), delay_ns_(std::uint64_t{delay_us} * 1000) {}

  // Preallocates the response buffers: a reply's buffer is busy until its
  // OpDone, so keep twice the callers' concurrency.
  bool allocate(std::uint32_t count) {
    for (std::uint32_t i = 0; i < count; ++i) {
      const Buffer b = client_.alloc(size_);
      if (!b) return false;
      fill_pattern(b.data, size_, kResponseSeed);
      buffers_.push_back(b);
      free_.push_back(i);
    }
    pending_.reserve(count * 2);
    return true;
  }

  // Handles one batch; false on a fatal error (message in error()).
  bool handle(std::span<const Completion> batch) {
    for (const Completion& c : batch) {
      if (c.kind == Completion::Kind::Request) {
        if (c.handle != service_) return fail("request for another service");
        pending_.push_back(c);
        if (delay_ns_ != 0) due_.push_back(now_ns() + delay_ns_);
      } else if (c.kind == Completion::Kind::OpDone && c.op == OpKind::Reply) {
        // CallerGone is what the last replies get when the caller left.
        if (c.status != Status::Ok && c.status != Status::CallerGone) return fail("reply failed");
        if (c.user_data >= buffers_.size()) return fail("reply completion with a foreign user_data");
        free_.push_back(static_cast<std::uint32_t>(c.user_data));
      } else if (c.kind == Completion::Kind::OpDone && c.op == OpKind::ReleaseRx) {
        if (c.status != Status::Ok) return fail("release failed");
      } else {
        return fail("unexpected completion");
      }
    }
    return answer_pending();
  }

  const Error& error() const { return error_; }
  bool has_pending() const { return !pending_.empty(); }

  // Nanoseconds until the oldest queued request is due (0: due now, or none).
  std::uint64_t wait_ns() const {
    if (due_.empty()) return 0;
    const std::uint64_t now = now_ns();
    return due_.front() > now ? due_.front() - now : 0;
  }

  // Replies to queued requests that are due while response buffers and SQ
  // room last.
  bool answer_pending() {
    std::size_t done = 0;
    const std::uint64_t now = delay_ns_ != 0 ? now_ns() : 0;
    for (; done < pending_.size() && !free_.empty(); ++done) {
      if (delay_ns_ != 0 && due_[done] > now) break;
      const Completion& req = pending_[done];
      const std::uint32_t index = free_.back();
      const Buffer& out = buffers_[index];
      const std::uint32_t len = req.length <= size_ ? req.length : static_cast<std::uint32_t>(size_);
      stamp(out.data, len, read_stamp(req.data, req.length));
      const Status s = client_.reply(req.token, out, len, index);
      // SQ full: keep the rest queued; the caller polls completions first
      // (the daemon may be waiting for our CQ to drain before our SQ).
      if (s == Status::Busy) break;
      if (s != Status::Ok) return fail("reply rejected");
      free_.pop_back();
      client_.release(req);
    }
    pending_.erase(pending_.begin(), pending_.begin() + static_cast<std::ptrdiff_t>(done));
    if (delay_ns_ != 0) due_.erase(due_.begin(), due_.begin() + static_cast<std::ptrdiff_t>(done));
    return true;
  }

 private:
  bool fail(const char* why) {
    error_ = Error(Status::ProtocolError, why);
    return false;
  }

  Client& client_;
  ServiceId service_;
  std::size_t size_;
  std::vector<Buffer> buffers_;
  std::vector<std::uint32_t> free_;
  std::uint64_t delay_ns_;
  std::vector<Completion> pending_;
  std::deque<std::uint64_t> due_;  // with a delay: when each pending_ request is due
  Error error_;
};

}  // namespace

int serve_bench_echo(const std::string& socket, std::size_t size, std::uint32_t concurrency, bool busy_poll,
                     std::uint32_t delay_us, ReadyNotifier& ready) {
  const std::uint32_t buffers = 2 * concurrency;
  std::unique_ptr<Client> client;
  if (const Error e = attach_bench_client(socket, "ferry-bench local-rpc server", size * buffers, size * concurrency,
                                          &client, busy_poll);
      e.failed()) {
    ready.failed(e.message());
    return 1;
  }
  const auto served = client->serve(bench_echo_service());
  if (!served) {
    ready.failed("serve bench-echo: " + std::string(to_string(served.status)));
    return 1;
  }
  EchoServer server(*client, served.value, size, delay_us);
  if (!server.allocate(buffers)) {
    ready.failed("cannot allocate response buffers");
    return 1;
  }
  ready.ready();

  std::array<Completion, kCompletionBatch> batch{};
  std::uint32_t idle_spins = 0;
  for (;;) {
    const std::size_t n = client->poll(batch);
    if (n > 0) {
      if (!server.handle(std::span(batch.data(), n))) {
        std::fprintf(stderr, "ferry-bench bench-echo server: %s\n", server.error().message().c_str());
        return 1;
      }
      continue;
    }
    if (client->state() != Status::Ok) return 1;
    const std::uint64_t wait = server.wait_ns();
    if (server.has_pending() && wait == 0) {
      if (!server.answer_pending()) return 1;
      continue;  // still queued: retry without sleeping
    }
    // Nothing ready: sleep on the completion fd and the parent's stop pipe
    // (busy polling only glances at the stop pipe), until the next delayed
    // request is due at the latest.
    pollfd fds[2] = {{client->event_fd(), POLLIN, 0}, {ready.stop_fd(), POLLIN, 0}};
    if (busy_poll) {
      if (++idle_spins % 4096 != 0) {
        ::sched_yield();
        continue;
      }
      fds[0].events = 0;
    }
    timespec timeout{1, 0};
    if (busy_poll) timeout = {0, 0};
    if (wait != 0 && !busy_poll)
      timeout = {static_cast<time_t>(wait / 1'000'000'000u), static_cast<long>(wait % 1'000'000'000u)};
    if (::ppoll(fds, 2, &timeout, nullptr) < 0) continue;
    if (fds[1].revents != 0) break;
  }
  (void)client->unserve(served.value);
  return 0;
}

}  // namespace ferry::bench
