// Roles for call timeouts: a server that holds a request past the caller's
// timeout and replies late, and the caller that must see Timeout, an
// untouched response buffer, and then a prompt call that still works.
#include <cstdio>
#include <cstring>
#include <vector>

#include "tests/integration/traffic.h"

namespace ferry::itest {

namespace {
constexpr std::byte kLateByte{0xAB};
}

int run_late_server(const LateServerSpec& spec, const Gate& ready, const Gate& release, const Gate& late_done,
                    const Gate& stop) {
  auto c = attach_retry(spec.socket, "late-server");
  if (!c) return fail(60, "late server: attach");
  auto s = c->serve(spec.service);
  if (!s) return fail(61, "late server: serve: %s", std::string(to_string(s.status)).c_str());
  ready.signal();
  std::vector<Completion> held;
  Buffer late{};
  bool released = false, late_replied = false;
  const auto deadline = Clock::now() + 120s;
  Completion out[16];
  while (!(late_replied && stop.ready())) {
    if (Clock::now() > deadline) return fail(62, "late server: gave up (late reply done: %d)", late_replied);
    if (!released && !held.empty() && release.ready()) {
      released = true;
      late = c->alloc(held.front().length);
      if (!late) return fail(63, "late server: alloc");
      std::memset(late.data, static_cast<int>(kLateByte), late.capacity);
      const Status st = c->reply(held.front().token, late, held.front().length, 2);
      if (st != Status::Ok) return fail(64, "late server: late reply: %s", std::string(to_string(st)).c_str());
      c->release(held.front());
    }
    const std::size_t n = c->wait(out, 20ms);
    for (std::size_t i = 0; i < n; ++i) {
      const Completion& e = out[i];
      if (e.kind == Completion::Kind::Request) {
        if (e.length == 0 || e.data[0] == std::byte{0}) {  // the one to hold
          if (!held.empty()) return fail(65, "late server: a second request to hold");
          held.push_back(e);
          continue;
        }
        Buffer b = c->alloc(e.length);
        if (!b) return fail(66, "late server: alloc");
        std::memcpy(b.data, e.data, e.length);
        const Status st = c->reply(e.token, b, e.length, 1);
        if (st != Status::Ok) return fail(67, "late server: reply: %s", std::string(to_string(st)).c_str());
        c->release(e);
      } else if (e.kind == Completion::Kind::OpDone && e.op == OpKind::Reply) {
        if (e.user_data == 1 && e.status != Status::Ok)
          return fail(68, "late server: prompt reply completed %s", std::string(to_string(e.status)).c_str());
        if (e.user_data == 2) {
          // The caller timed out long ago: its daemon must refuse the reply.
          if (e.status != Status::CallerGone)
            return fail(69, "late server: late reply completed %s, want CallerGone",
                        std::string(to_string(e.status)).c_str());
          late_replied = true;
          late_done.signal();
        }
      }
    }
  }
  return 0;
}

int run_timeout_caller(const TimeoutCallerSpec& spec, const Gate& timed_out, const Gate& late_done) {
  auto c = attach_retry(spec.socket, "timeout-caller");
  if (!c) return fail(70, "timeout caller: attach");
  auto ep = open_retry(*c, spec.target, 60s);
  if (!ep) return fail(71, "timeout caller: open: %s", std::string(to_string(ep.status)).c_str());
  Buffer req = c->alloc(spec.request_bytes), resp = c->alloc(spec.response_bytes);
  if (!req || !resp) return fail(72, "timeout caller: alloc");
  auto await = [&](std::uint64_t user_data, std::chrono::seconds within, Completion* got) {
    const auto until = Clock::now() + within;
    Completion out[8];
    while (Clock::now() < until) {
      for (std::size_t i = 0, n = c->wait(out, 50ms); i < n; ++i) {
        if (out[i].kind == Completion::Kind::OpDone && out[i].user_data == user_data) {
          *got = out[i];
          return true;
        }
      }
    }
    return false;
  };
  // 1. Held: Timeout, not before the timeout, nothing written.
  std::memset(req.data, 0, spec.request_bytes);
  std::memset(resp.data, 0, resp.capacity);
  const auto t0 = Clock::now();
  if (c->call(ep.value, req, spec.request_bytes, resp, 1, spec.timeout) != Status::Ok)
    return fail(73, "timeout caller: call");
  Completion got{};
  if (!await(1, 60s, &got)) return fail(74, "timeout caller: the held call never completed");
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
  std::printf("timeout-caller: held call completed %s after %lld ms (timeout %lld ms)\n",
              std::string(to_string(got.status)).c_str(), static_cast<long long>(ms),
              static_cast<long long>(spec.expect_ms.count()));
  std::fflush(stdout);
  if (got.status != Status::Timeout)
    return fail(75, "timeout caller: held call completed %s, want Timeout", std::string(to_string(got.status)).c_str());
  if (ms < spec.expect_ms.count()) return fail(76, "timeout caller: Timeout after %lld ms, too early", (long long)ms);
  timed_out.signal();
  // 2. The server replies late; its daemon refuses it, nothing lands here.
  if (!late_done.wait(60s)) return fail(84, "timeout caller: the server never replied late");
  for (std::uint32_t i = 0; i < resp.capacity; ++i) {
    if (resp.data[i] != std::byte{0}) return fail(78, "timeout caller: the late reply wrote byte %u", i);
  }
  Completion stray[8];
  for (std::size_t i = 0, n = c->wait(stray, 200ms); i < n; ++i) {
    if (stray[i].kind == Completion::Kind::OpDone && stray[i].user_data == 1)
      return fail(79, "timeout caller: the held call completed twice");
  }
  // 3. The endpoint still works: a prompt call is answered (within 10 s:
  // spec.timeout is the held call's few hundred ms, which a loaded machine's
  // scheduling alone can outlast on a path through another process).
  std::memset(req.data, 0x5A, spec.request_bytes);
  if (c->call(ep.value, req, spec.request_bytes, resp, 3, 10s) != Status::Ok)
    return fail(80, "timeout caller: second call");
  if (!await(3, 60s, &got)) return fail(81, "timeout caller: the prompt call never completed");
  if (got.status != Status::Ok || got.length != spec.request_bytes)
    return fail(82, "timeout caller: prompt call %s, %u bytes", std::string(to_string(got.status)).c_str(), got.length);
  for (std::uint32_t i = 0; i < spec.request_bytes; ++i) {
    if (resp.data[i] != std::byte{0x5A}) return fail(83, "timeout caller: prompt response corrupt at %u", i);
  }
  return 0;
}

}  // namespace ferry::itest
