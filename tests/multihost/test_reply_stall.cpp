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
// backstop 20 s later. The third: a Close that finds that lane full is held
// the same way, so the peer drops its proxy (it used to be lost).
#include <signal.h>
#include <catch2/catch.hpp>

#include <cstring>
#include <deque>
#include <functional>
#include <string>
#include <thread>
#include <utility>
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
  StatusView s;
  return read_status(n.control(), &s).ok() ? s.counter(key) : 0;
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
        // The caller's daemon is stopped until a Reply is refused: one that
        // completes Ok before that was confirmed by a daemon still running.
        if (busy == 0)
          return fail(79, "holding-server: reply %llu completed Ok before any was refused Busy",
                      static_cast<unsigned long long>(e.user_data));
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

// Keeps kCalls calls (each with its own request payload and `timeout`) in
// flight to `target`; every one must complete `expect` exactly once, an Ok
// one with its own request echoed.
int run_calls(const std::string& socket, const std::string& target, std::chrono::milliseconds timeout, Status expect) {
  auto c = attach_retry(socket, "calls");
  if (!c) return fail(90, "calls: attach");
  auto ep = open_retry(*c, target);
  if (!ep) return fail(91, "calls: open: %s", std::string(to_string(ep.status)).c_str());
  std::vector<Buffer> req(kCalls), resp(kCalls);
  std::vector<bool> done(kCalls, false);
  for (std::uint32_t i = 0; i < kCalls; ++i) {
    req[i] = c->alloc(kSize);
    resp[i] = c->alloc(kSize);
    if (!req[i] || !resp[i]) return fail(92, "calls: alloc %u", i);
    fill_payload(req[i].data, kSize, 7, i);
  }
  Completion out[64];
  std::uint32_t next = 0, completed = 0;
  const auto deadline = Clock::now() + 50s;
  while (completed < kCalls) {
    if (Clock::now() > deadline) return fail(93, "calls: %u of %u calls completed", completed, kCalls);
    while (next < kCalls) {
      const Status s = c->call(ep.value, req[next], kSize, resp[next], next, timeout);
      if (s == Status::Busy) break;
      if (s != Status::Ok) return fail(94, "calls: call %u: %s", next, std::string(to_string(s)).c_str());
      ++next;
    }
    const std::size_t n = c->wait(out, 10ms);
    for (std::size_t k = 0; k < n; ++k) {
      const Completion& e = out[k];
      const auto i = static_cast<std::uint32_t>(e.user_data);
      if (e.kind != Completion::Kind::OpDone || e.op != OpKind::Call || i >= kCalls || done[i])
        return fail(95, "calls: unexpected or second completion (%llu)", static_cast<unsigned long long>(e.user_data));
      if (e.status != expect)
        return fail(96, "calls: call %u completed %s", i, std::string(to_string(e.status)).c_str());
      if (expect == Status::Ok && (e.length != kSize || !check_payload(resp[i].data, kSize, 7, i)))
        return fail(97, "calls: call %u: wrong echo", i);
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

DaemonFlags one_lane_no_windows() {
  DaemonFlags f;
  f.channel_conns = 1;
  // A is stopped until B stalls (up to 25 s on a loaded machine): never long
  // enough to be declared dead.
  f.peer_timeout_ms = 30000;
  f.extra_args = {"--channel-window-ops", "0", "--endpoint-window-ops", "0"};
  return f;
}

// A node's counters that moved, "name=value ...".
std::string moved_counters(const Node& n) {
  StatusView s;
  if (!read_status(n.control(), &s).ok()) return "(no status)";
  std::string out;
  for (const auto& [name, value] : s.counters)
    if (value != 0) out += name + "=" + std::to_string(value) + " ";
  return out;
}

// Waits until n's counter `name` moves, at most 20 s by the clock however
// slow each status read (the peer timeout is 30 s). Returns the value seen;
// when it stays 0, the report gets every counter of n that moved.
std::uint64_t wait_for_counter(const Node& n, const char* name) {
  const auto until = Clock::now() + 20s;
  std::uint64_t v = 0;
  while ((v = counter(n, name)) == 0 && Clock::now() < until) std::this_thread::sleep_for(50ms);
  if (v == 0) UNSCOPED_INFO("no " << name << " in 20 s; node's counters: " << moved_counters(n));
  return v;
}

// Stops node 0 (every thread: until its engine has stopped, it still
// receives and confirms what node 1 sends), waits until node 1's
// `stall_counter` moves, then 200 ms more, and resumes it. Returns the
// counter seen.
std::uint64_t stop_until_stalled(const Cluster& cl, const char* stall_counter, const Gate* go = nullptr) {
  REQUIRE(stop_process(cl.node(0).pid, 5s));
  if (go != nullptr) go->signal();
  const std::uint64_t stalls = wait_for_counter(cl.node(1), stall_counter);
  std::this_thread::sleep_for(200ms);
  ::kill(cl.node(0).pid, SIGCONT);
  return stalls;
}

// One run: node 1 serves (`server` signals `ready`, then `all_in` once every
// call arrived), node 0 calls; once all arrived, node 0's daemon is stopped
// until node 1's `stall_counter` moves (`go` is signalled right after the
// stop), then resumed; the caller must be done within `caller_within` of
// that; `stop` is signalled after it. Returns {caller's, server's exit code}.
struct StoppedRun {
  std::function<int()> server, caller;
  const Gate* ready = nullptr;
  const Gate* all_in = nullptr;
  const Gate* go = nullptr;
  const Gate* stop = nullptr;
  const char* stall_counter = "";
  std::chrono::milliseconds caller_within{60s};
};
std::pair<int, int> run_with_caller_daemon_stopped(const Cluster& cl, const StoppedRun& r) {
  const pid_t server = cl.spawn_on(1, r.server);
  REQUIRE(r.ready->wait(10s));
  const pid_t caller = cl.spawn_on(0, r.caller);
  const bool arrived = r.all_in->wait(40s);
  CHECK(arrived);
  if (arrived) CHECK(stop_until_stalled(cl, r.stall_counter, r.go) > 0);
  const int caller_rc = reap(caller, r.caller_within);
  if (r.stop != nullptr) r.stop->signal();
  return {caller_rc, reap(server, 30s)};
}

}  // namespace

TEST_CASE("a Reply with no room toward its caller completes Busy and keeps the call: replied again, every call Ok") {
  Cluster cl(2, net_mode_from_env(), one_lane_no_windows());
  const Node& a = cl.node(0);
  const Node& b = cl.node(1);
  INFO("mode " << to_string(cl.mode()) << ", A " << a.listen() << ", B " << b.listen());
  Gate ready, all_in, go;
  const std::string target = b.target("hold");
  const auto [caller_rc, server_rc] =
      run_with_caller_daemon_stopped(cl, {[&] { return run_holding_server(b.socket(), ready, all_in, go); },
                                          [&] { return run_calls(a.socket(), target, 45s, Status::Ok); }, &ready,
                                          &all_in, &go, nullptr, "reply_stalls", 60s});
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
  const std::string target = b.target("mute");
  // The calls time out at B 3 s after they arrived, while A is stopped:
  // B's Timeout answers fill the lane's ring and the rest are held. Held
  // answers go as soon as A acknowledges again; a lost one would wait for
  // A's backstop (3 s + 2 x 30 s + 1 s) and fail the channel: 8 s is the bound.
  const auto [caller_rc, server_rc] =
      run_with_caller_daemon_stopped(cl, {[&] { return run_mute_server(b.socket(), ready, all_in, stop); },
                                          [&] { return run_calls(a.socket(), target, 3s, Status::Timeout); }, &ready,
                                          &all_in, nullptr, &stop, "answer_stalls", 8s});
  INFO("A log:\n" << cl.log_tail(0) << "\nB log:\n" << cl.log_tail(1));
  CHECK(caller_rc == 0);
  CHECK(server_rc == 0);
  CHECK(counter(a, "peer_failures") == 0);  // no call was left to the answer backstop
  CHECK(cl.alive(0));
  CHECK(cl.alive(1));
}

namespace {

std::uint64_t endpoints_on(const Node& n) {
  StatusView s;
  std::uint64_t total = 0;
  if (read_status(n.control(), &s).ok()) {
    for (const PeerView& p : s.peers) total += p.endpoints;
  }
  return total;
}

// On B: opens A's "mute" (A then holds a proxy for it), signals `opened`,
// closes it once `do_close` comes (Close must complete Ok), signals
// `closed`, stays attached until `stop`.
int run_closer(const std::string& socket, const std::string& target, const Gate& opened, const Gate& do_close,
               const Gate& closed, const Gate& stop) {
  auto c = attach_retry(socket, "closer");
  if (!c) return fail(110, "closer: attach");
  auto ep = open_retry(*c, target);
  if (!ep) return fail(111, "closer: open: %s", std::string(to_string(ep.status)).c_str());
  opened.signal();
  if (!do_close.wait(40s)) return fail(112, "closer: never told to close");
  if (const Status s = c->close(ep.value, 5s); s != Status::Ok)
    return fail(113, "closer: close: %s", std::string(to_string(s)).c_str());
  closed.signal();
  if (!stop.wait(40s)) return fail(114, "closer: never told to stop");
  return 0;
}

}  // namespace

TEST_CASE("a Close with no room in its lane is held and sent as it drains: the peer drops its proxy") {
  Cluster cl(2, net_mode_from_env(), one_lane_no_windows());
  const Node& a = cl.node(0);
  const Node& b = cl.node(1);
  INFO("mode " << to_string(cl.mode()) << ", A " << a.listen() << ", B " << b.listen());
  // B's lane toward A fills with the Timeout answers of A's calls while A's
  // daemon is stopped (as above). Meanwhile a client on B closes an
  // endpoint it had opened to A: its Close finds the same lane full. Before,
  // its PostResult was dropped, so A kept the proxy for the channel's life.
  Gate a_ready, a_all_in, a_stop, b_ready, b_all_in, b_stop, opened, do_close, closed;
  const pid_t a_server = cl.spawn_on(0, [&] { return run_mute_server(a.socket(), a_ready, a_all_in, a_stop); });
  const pid_t b_server = cl.spawn_on(1, [&] { return run_mute_server(b.socket(), b_ready, b_all_in, b_stop); });
  REQUIRE(a_ready.wait(10s));
  REQUIRE(b_ready.wait(10s));
  // The closer opens first: once B has every call, the 3 s until B's
  // timeouts answer them must hold nothing but stopping A.
  const pid_t closer =
      cl.spawn_on(1, [&] { return run_closer(b.socket(), a.target("mute"), opened, do_close, closed, b_stop); });
  REQUIRE(opened.wait(10s));
  CHECK(endpoints_on(a) == 1);  // the closer's proxy
  const pid_t caller = cl.spawn_on(0, [&] { return run_calls(a.socket(), b.target("mute"), 3s, Status::Timeout); });
  REQUIRE(b_all_in.wait(40s));
  REQUIRE(stop_process(a.pid, 5s));
  CHECK(wait_for_counter(b, "answer_stalls") > 0);  // B's ring toward A is full: answers are held
  do_close.signal();
  const bool close_done = closed.wait(10s);
  std::this_thread::sleep_for(200ms);
  ::kill(a.pid, SIGCONT);
  CHECK(close_done);
  CHECK(reap(caller, 8s) == 0);
  // The caller is done (its endpoint closes as it exits); the closer's
  // Close has reached A by now unless it was lost.
  std::uint64_t left = ~std::uint64_t{0};
  for (int i = 0; i < 100 && (left = endpoints_on(a)) != 0; ++i) std::this_thread::sleep_for(50ms);
  INFO("A log:\n" << cl.log_tail(0) << "\nB log:\n" << cl.log_tail(1));
  CHECK(left == 0);
  a_stop.signal();
  b_stop.signal();  // one byte each for B's two waiters (the closer takes one, the server looks)
  b_stop.signal();
  CHECK(reap(closer, 10s) == 0);
  CHECK(reap(a_server, 10s) == 0);
  CHECK(reap(b_server, 10s) == 0);
  CHECK(cl.alive(0));
  CHECK(cl.alive(1));
}
