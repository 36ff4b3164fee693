// A Reply with no room toward its caller keeps the call open. One lane
// (channel-conns 1) and no send windows, so caller A may keep more calls in
// flight to B than a lane's ring holds (ChannelManager::kBacklogCapacity).
// B's server holds every request until all have arrived; then A's daemon is
// SIGSTOPped (it acknowledges nothing) and the server replies to them all:
// the ring toward A fills with unconfirmed answers, and the Replies beyond
// it complete Busy. The server replies again to those (same token) until Ok;
// A is resumed. Asserted: some Replies really were refused (B's
// reply_stalls), every call completes Ok exactly once with its own echo,
// and no Reply completed anything but Ok or Busy. Before, a Busy Reply used
// up its token and its caller waited for the answer backstop (call timeout
// plus twice peer-timeout-ms), which then failed the whole channel.
// The second case does the same for zero-length answers (here: calls timing
// out at the serving daemon while the caller's daemon is stopped): the ones
// the lane has no room for are held and sent as it drains, so every call
// completes Timeout soon after the caller's daemon resumes, not at the
// backstop 20 s later.
#include <signal.h>
#include <catch2/catch.hpp>

#include <cstring>
#include <deque>
#include <string>
#include <thread>
#include <vector>

#include "tests/integration/traffic.h"
#include "tests/multihost/cluster.h"
#include "tests/multihost/peer_status.h"

using namespace ferry;
using namespace ferry::itest;
using namespace ferry::mhtest;

namespace {

constexpr std::uint32_t kCalls = 1400;  // > kBacklogCapacity (1024): the lane's ring must fill
constexpr std::uint32_t kSize = 64;

std::uint64_t counter(const Node& n, const char* key) {
  std::string err;
  const auto s = read_status(n.control(), &err);
  return s ? s->counter(key) : 0;
}

// Serves "hold": collects kCalls requests (signals `all_in`), waits for `go`,
// then answers each with its request's bytes, replying again to every Reply
// that completes Busy. Exit 0 when every Reply completed Ok.
int run_holding_server(const std::string& socket, const Gate& ready, const Gate& all_in, const Gate& go) {
  auto c = attach_retry(socket, "holding-server");
  if (!c) return fail(80, "holding-server: attach");
  if (auto r = c->serve("hold"); !r)
    return fail(81, "holding-server: serve: %s", std::string(to_string(r.status)).c_str());
  ready.signal();
  struct Held {
    std::uint64_t token = 0;
    Buffer reply;
  };
  std::vector<Held> held;
  held.reserve(kCalls);
  Completion out[64];
  const auto deadline = Clock::now() + 40s;
  while (held.size() < kCalls) {
    if (Clock::now() > deadline) return fail(82, "holding-server: %zu of %u requests", held.size(), kCalls);
    const std::size_t n = c->wait(out, 20ms);
    for (std::size_t i = 0; i < n; ++i) {
      const Completion& e = out[i];
      if (e.kind != Completion::Kind::Request || e.length != kSize)
        return fail(83, "holding-server: unexpected %s (%u bytes)", std::string(to_string(e.kind)).c_str(), e.length);
      Buffer b = c->alloc(kSize);
      if (!b) return fail(84, "holding-server: alloc");
      std::memcpy(b.data, e.data, kSize);
      held.push_back(Held{e.token, b});
      c->release(e);
    }
  }
  all_in.signal();
  if (!go.wait(20s)) return fail(85, "holding-server: no go");
  std::deque<std::uint32_t> to_send;
  for (std::uint32_t i = 0; i < kCalls; ++i) to_send.push_back(i);
  std::uint32_t ok = 0, busy = 0;
  while (ok < kCalls) {
    if (Clock::now() > deadline) return fail(86, "holding-server: %u of %u replies Ok (%u Busy)", ok, kCalls, busy);
    while (!to_send.empty()) {
      const std::uint32_t i = to_send.front();
      const Status s = c->reply(held[i].token, held[i].reply, kSize, i);
      if (s == Status::Busy) break;  // submission ring full: poll first
      if (s != Status::Ok) return fail(87, "holding-server: reply: %s", std::string(to_string(s)).c_str());
      to_send.pop_front();
    }
    const std::size_t n = c->wait(out, 5ms);
    const std::uint32_t busy_before = busy;
    for (std::size_t k = 0; k < n; ++k) {
      const Completion& e = out[k];
      if (e.kind != Completion::Kind::OpDone || e.op != OpKind::Reply || e.user_data >= kCalls)
        return fail(88, "holding-server: unexpected completion %s", std::string(to_string(e.kind)).c_str());
      if (e.status == Status::Busy) {  // no room toward the caller: the call is still open, reply again
        ++busy;
        to_send.push_back(static_cast<std::uint32_t>(e.user_data));
      } else if (e.status == Status::Ok) {
        ++ok;
      } else {
        return fail(89, "holding-server: reply %llu completed %s", static_cast<unsigned long long>(e.user_data),
                    std::string(to_string(e.status)).c_str());
      }
    }
    if (busy != busy_before) std::this_thread::sleep_for(1ms);  // back off while the lane drains
  }
  std::fprintf(stderr, "holding-server: %u replies Ok, %u refused Busy first\n", ok, busy);
  return 0;
}

// Keeps kCalls calls in flight to `target`; every one must complete Ok once
// with its own request echoed.
int run_many_calls(const std::string& socket, const std::string& target) {
  auto c = attach_retry(socket, "many-calls");
  if (!c) return fail(90, "many-calls: attach");
  auto ep = open_retry(*c, target);
  if (!ep) return fail(91, "many-calls: open: %s", std::string(to_string(ep.status)).c_str());
  std::vector<Buffer> req(kCalls), resp(kCalls);
  std::vector<bool> done(kCalls, false);
  for (std::uint32_t i = 0; i < kCalls; ++i) {
    req[i] = c->alloc(kSize);
    resp[i] = c->alloc(kSize);
    if (!req[i] || !resp[i]) return fail(92, "many-calls: alloc %u", i);
    fill_payload(req[i].data, kSize, 7, i);
  }
  Completion out[64];
  std::uint32_t next = 0, completed = 0;
  const auto deadline = Clock::now() + 50s;
  while (completed < kCalls) {
    if (Clock::now() > deadline) return fail(93, "many-calls: %u of %u calls completed", completed, kCalls);
    while (next < kCalls) {
      const Status s = c->call(ep.value, req[next], kSize, resp[next], next, std::chrono::seconds(45));
      if (s == Status::Busy) break;
      if (s != Status::Ok) return fail(94, "many-calls: call %u: %s", next, std::string(to_string(s)).c_str());
      ++next;
    }
    const std::size_t n = c->wait(out, 10ms);
    for (std::size_t k = 0; k < n; ++k) {
      const Completion& e = out[k];
      const auto i = static_cast<std::uint32_t>(e.user_data);
      if (e.kind != Completion::Kind::OpDone || e.op != OpKind::Call || i >= kCalls || done[i])
        return fail(95, "many-calls: unexpected or second completion (%llu)",
                    static_cast<unsigned long long>(e.user_data));
      if (e.status != Status::Ok)
        return fail(96, "many-calls: call %u completed %s", i, std::string(to_string(e.status)).c_str());
      if (e.length != kSize || !check_payload(resp[i].data, kSize, 7, i))
        return fail(97, "many-calls: call %u: wrong echo", i);
      done[i] = true;
      ++completed;
    }
  }
  return 0;
}

// Serves "mute": takes kCalls requests, answers none (signals `all_in`),
// stays attached until `stop`.
int run_mute_server(const std::string& socket, const Gate& ready, const Gate& all_in, const Gate& stop) {
  auto c = attach_retry(socket, "mute-server");
  if (!c) return fail(100, "mute-server: attach");
  if (auto r = c->serve("mute"); !r)
    return fail(101, "mute-server: serve: %s", std::string(to_string(r.status)).c_str());
  ready.signal();
  Completion out[64];
  std::uint32_t got = 0;
  const auto deadline = Clock::now() + 60s;
  while (!stop.ready()) {
    if (Clock::now() > deadline) return fail(102, "mute-server: never told to stop");
    const std::size_t n = c->wait(out, 20ms);
    for (std::size_t i = 0; i < n; ++i) {
      if (out[i].kind != Completion::Kind::Request) return fail(103, "mute-server: unexpected completion");
      c->release(out[i]);
      if (++got == kCalls) all_in.signal();
    }
  }
  return 0;
}

// kCalls calls with a 3 s timeout to `target`: every one must complete
// Timeout, exactly once.
int run_timed_out_calls(const std::string& socket, const std::string& target) {
  auto c = attach_retry(socket, "timed-out-calls");
  if (!c) return fail(110, "timed-out-calls: attach");
  auto ep = open_retry(*c, target);
  if (!ep) return fail(111, "timed-out-calls: open: %s", std::string(to_string(ep.status)).c_str());
  Buffer req = c->alloc(kSize);
  std::vector<Buffer> resp(kCalls);
  for (auto& r : resp) {
    r = c->alloc(kSize);
    if (!r) return fail(112, "timed-out-calls: alloc");
  }
  if (!req) return fail(112, "timed-out-calls: alloc");
  std::vector<bool> done(kCalls, false);
  Completion out[64];
  std::uint32_t next = 0, completed = 0;
  const auto deadline = Clock::now() + 50s;
  while (completed < kCalls) {
    if (Clock::now() > deadline) return fail(113, "timed-out-calls: %u of %u calls completed", completed, kCalls);
    while (next < kCalls) {
      const Status s = c->call(ep.value, req, kSize, resp[next], next, std::chrono::milliseconds(3000));
      if (s == Status::Busy) break;
      if (s != Status::Ok) return fail(114, "timed-out-calls: call %u: %s", next, std::string(to_string(s)).c_str());
      ++next;
    }
    const std::size_t n = c->wait(out, 10ms);
    for (std::size_t k = 0; k < n; ++k) {
      const auto i = static_cast<std::uint32_t>(out[k].user_data);
      if (out[k].kind != Completion::Kind::OpDone || out[k].op != OpKind::Call || i >= kCalls || done[i])
        return fail(115, "timed-out-calls: unexpected or second completion");
      if (out[k].status != Status::Timeout)
        return fail(116, "timed-out-calls: call %u completed %s", i, std::string(to_string(out[k].status)).c_str());
      done[i] = true;
      ++completed;
    }
  }
  return 0;
}

DaemonFlags one_lane_no_windows() {
  DaemonFlags f;
  f.channel_conns = 1;
  f.peer_timeout_ms = 10000;  // A is stopped for a while: not long enough to be declared dead
  f.extra_args = {"--channel-window-ops", "0", "--endpoint-window-ops", "0"};
  return f;
}

// SIGSTOPs node 0, waits (at most 10 s) until node 1's `stall_counter` moves,
// then 200 ms more, and resumes it. Returns the counter seen.
std::uint64_t stop_until_stalled(const Cluster& cl, const char* stall_counter, const Gate* go = nullptr) {
  REQUIRE(::kill(cl.node(0).pid, SIGSTOP) == 0);
  if (go != nullptr) go->signal();
  std::uint64_t stalls = 0;
  for (int i = 0; i < 200 && (stalls = counter(cl.node(1), stall_counter)) == 0; ++i) std::this_thread::sleep_for(50ms);
  std::this_thread::sleep_for(200ms);
  ::kill(cl.node(0).pid, SIGCONT);
  return stalls;
}

}  // namespace

TEST_CASE("a Reply with no room toward its caller completes Busy and keeps the call: replied again, every call Ok") {
  Cluster cl(2, net_mode_from_env(), one_lane_no_windows());
  const Node& a = cl.node(0);
  const Node& b = cl.node(1);
  INFO("mode " << to_string(cl.mode()) << ", A " << a.listen() << ", B " << b.listen());

  Gate ready, all_in, go;
  const pid_t server = cl.spawn_on(1, [&] { return run_holding_server(b.socket(), ready, all_in, go); });
  REQUIRE(ready.wait(10s));
  const std::string target = b.target("hold");
  const pid_t caller = cl.spawn_on(0, [&] { return run_many_calls(a.socket(), target); });
  const bool arrived = all_in.wait(40s);
  CHECK(arrived);
  if (arrived) CHECK(stop_until_stalled(cl, "reply_stalls", &go) > 0);
  const int caller_rc = reap(caller, 60s);
  const int server_rc = reap(server, 30s);
  INFO("A log:\n" << cl.log_tail(0) << "\nB log:\n" << cl.log_tail(1));
  CHECK(caller_rc == 0);
  CHECK(server_rc == 0);
  CHECK(counter(b, "reply_stalls") > 0);
  CHECK(cl.alive(0));
  CHECK(cl.alive(1));
}

TEST_CASE("answers with no room in their lane are held and sent as it drains: every call Timeout, soon") {
  Cluster cl(2, net_mode_from_env(), one_lane_no_windows());
  const Node& a = cl.node(0);
  const Node& b = cl.node(1);
  INFO("mode " << to_string(cl.mode()) << ", A " << a.listen() << ", B " << b.listen());

  Gate ready, all_in, stop;
  const pid_t server = cl.spawn_on(1, [&] { return run_mute_server(b.socket(), ready, all_in, stop); });
  REQUIRE(ready.wait(10s));
  const std::string target = b.target("mute");
  const pid_t caller = cl.spawn_on(0, [&] { return run_timed_out_calls(a.socket(), target); });
  const bool arrived = all_in.wait(40s);
  CHECK(arrived);
  // The calls time out at B 3 s after they arrived, while A is stopped:
  // B's Timeout answers fill the lane's ring and the rest are held.
  if (arrived) CHECK(stop_until_stalled(cl, "answer_stalls") > 0);
  // Held answers go as soon as A acknowledges again; a lost one would wait
  // for A's backstop (3 s + 2 x 10 s + 1 s) and fail the channel.
  const int caller_rc = reap(caller, 8s);
  stop.signal();
  const int server_rc = reap(server, 10s);
  INFO("A log:\n" << cl.log_tail(0) << "\nB log:\n" << cl.log_tail(1));
  CHECK(caller_rc == 0);
  CHECK(server_rc == 0);
  CHECK(counter(a, "peer_failures") == 0);  // no call was left to the answer backstop
  CHECK(cl.alive(0));
  CHECK(cl.alive(1));
}
