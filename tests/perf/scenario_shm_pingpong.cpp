// shm-pingpong: the floor under ipc-echo. Two processes (ferry-bench and a
// child it forks) share one mapping and spin: the parent writes a message
// of --size bytes and publishes its sequence number, the child sees it,
// copies the message into the other direction's buffer and publishes the
// number back, the parent sees that. Up to kInlineBytes the message shares
// the number's cache line, so one op is one cache line each way: what an
// engine that only moved two cache lines per forwarded message would cost.
// Latency: publish to seeing the echo. Every echo's number is checked, and
// every kVerifyEvery-th echo byte for byte (outside the timed region).
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <new>
#include <vector>

#include "forked_server.h"
#include "payload.h"
#include "scenarios.h"

namespace ferry::bench {

namespace {

constexpr std::size_t kLine = 64;
constexpr std::size_t kInlineBytes = kLine - sizeof(std::atomic<std::uint64_t>);

// One direction: the sequence number, then the message (inline when small).
struct alignas(kLine) Slot {
  std::atomic<std::uint64_t> seq;
  std::byte inline_bytes[kInlineBytes];
};
static_assert(sizeof(Slot) == kLine);
static_assert(std::atomic<std::uint64_t>::is_always_lock_free, "shared across processes");

struct Shared {
  Slot ping;  // parent -> child
  Slot pong;  // child -> parent
  alignas(kLine) std::atomic<std::uint32_t> stop;
};

struct Layout {
  Shared* shared = nullptr;
  std::byte* ping_body = nullptr;  // the message when it does not fit inline
  std::byte* pong_body = nullptr;
  std::size_t bytes = 0;
};

std::byte* body(Slot& s, std::byte* outline, std::size_t size) {
  return size <= kInlineBytes ? s.inline_bytes : outline;
}

// Child: echoes until told to stop. Spins like the parent (no syscalls).
int echo(Layout l, std::size_t size, ReadyNotifier& ready) {
  ready.ready();
  std::uint64_t seen = 0;
  for (;;) {
    std::uint64_t s;
    while ((s = l.shared->ping.seq.load(std::memory_order_acquire)) == seen) {
      if (l.shared->stop.load(std::memory_order_relaxed) != 0) return 0;
    }
    seen = s;
    std::memcpy(body(l.shared->pong, l.pong_body, size), body(l.shared->ping, l.ping_body, size), size);
    l.shared->pong.seq.store(s, std::memory_order_release);
  }
}

}  // namespace

Outcome run_shm_pingpong(ScenarioContext& ctx) {
  const std::size_t size = ctx.size();
  if (ctx.options().concurrency != 1)
    return ctx.fail(Outcome::BadUsage, "shm-pingpong is one message at a time: --concurrency must be 1");
  Layout l;
  const std::size_t outline = size <= kInlineBytes ? 0 : (size + kLine - 1) / kLine * kLine;
  l.bytes = sizeof(Shared) + 2 * outline;
  void* m = ::mmap(nullptr, l.bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return ctx.fail(Outcome::Failed, std::string("mmap: ") + std::strerror(errno));
  l.shared = new (m) Shared{};
  l.ping_body = static_cast<std::byte*>(m) + sizeof(Shared);
  l.pong_body = l.ping_body + outline;

  ForkedServer child;
  Error error = child.start([&](ReadyNotifier& ready) { return echo(l, size, ready); });
  if (error.ok()) error = child.wait_ready(std::chrono::seconds(10), nullptr);
  if (error.failed()) {
    ::munmap(m, l.bytes);
    return ctx.fail(Outcome::Failed, "shm-pingpong child: " + error.message());
  }
  ctx.cpu().add_process(child.pid());

  std::vector<std::byte> expected(size);
  fill_pattern(expected.data(), size, kRequestSeed);
  std::byte* out = body(l.shared->ping, l.ping_body, size);
  const std::byte* in = body(l.shared->pong, l.pong_body, size);
  std::memcpy(out, expected.data(), size);
  const char* failure = nullptr;
  std::uint64_t seq = 0;
  auto one = [&](bool check) {
    ++seq;
    stamp(out, size, seq);
    const auto t0 = SteadyClock::now();
    l.shared->ping.seq.store(seq, std::memory_order_release);
    while (l.shared->pong.seq.load(std::memory_order_acquire) != seq) {
    }
    const auto latency = SteadyClock::now() - t0;
    if (!stamp_matches(in, size, seq)) failure = "echo differs from the message sent";
    if (check && !payload_matches(in, expected.data(), size, seq)) failure = "echo differs from the message sent";
    return latency;
  };
  for (std::uint64_t i = 0; i < ctx.warmup_ops() && failure == nullptr; ++i) (void)one(true);
  ctx.begin_measured();
  for (std::uint64_t i = 0; ctx.more(i) && failure == nullptr; ++i) {
    const bool full = (i % kVerifyEvery) == 0;
    ctx.record(one(full));
    if (full) ctx.count_verified();
  }
  ctx.end_measured();
  l.shared->stop.store(1, std::memory_order_relaxed);
  const int rc = child.stop(std::chrono::seconds(5));
  ::munmap(m, l.bytes);
  if (failure != nullptr) return ctx.fail(Outcome::Failed, failure);
  if (rc != 0) return ctx.fail(Outcome::Failed, "shm-pingpong child exited with " + std::to_string(rc));
  return Outcome::Ok;
}

}  // namespace ferry::bench
