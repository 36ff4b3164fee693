#include "tests/multihost/roles.h"

#include <cstring>
#include <deque>
#include <vector>

#include "tests/multihost/cluster.h"

namespace ferry::mhtest {

using namespace std::chrono_literals;
using itest::Clock;
using itest::fail;

int open_and_echo(const std::string& socket, const std::string& name, const std::string& target,
                  std::chrono::milliseconds open_within, std::uint32_t len, std::uint32_t sender) {
  auto c = itest::attach_retry(socket, name);
  if (!c) return fail(1, "%s: attach", name.c_str());
  auto ep = c->open(target, open_within);
  if (!ep) return fail(2, "%s: open %s: %s", name.c_str(), target.c_str(), to_string(ep.status).data());
  if (const Status st = itest::echo_checked(*c, ep.value, len, sender, 1); st != Status::Ok)
    return fail(3, "%s: echo over %s: %s", name.c_str(), target.c_str(), to_string(st).data());
  return 0;
}

int hold_then_echo(const std::string& socket, const std::string& name, const std::string& target,
                   const itest::Gate& holding, const itest::Gate& done, std::uint32_t sender) {
  auto c = itest::attach_retry(socket, name);
  if (!c) return fail(1, "%s: attach", name.c_str());
  auto ep = c->open(target, 10s);
  if (!ep) return fail(2, "%s: open %s: %s", name.c_str(), target.c_str(), to_string(ep.status).data());
  holding.signal();
  if (!done.wait(60s)) return fail(3, "%s: never told the others were done", name.c_str());
  if (const Status st = itest::echo_checked(*c, ep.value, 1500, sender, 1); st != Status::Ok)
    return fail(4, "%s: echo over %s: %s", name.c_str(), target.c_str(), to_string(st).data());
  return 0;
}

int open_expect_busy(const std::string& socket, const std::string& name, const std::string& target,
                     std::chrono::milliseconds open_within, std::chrono::milliseconds at_least) {
  auto c = itest::attach_retry(socket, name);
  if (!c) return fail(1, "%s: attach", name.c_str());
  const auto t0 = Clock::now();
  auto ep = c->open(target, open_within);
  const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0);
  if (ep || ep.status != Status::Busy)
    return fail(2, "%s: open %s: %s after %lld ms, expected Busy", name.c_str(), target.c_str(),
                to_string(ep.status).data(), static_cast<long long>(took.count()));
  if (took < at_least)
    return fail(3, "%s: Busy after %lld ms: the Open did not wait", name.c_str(), static_cast<long long>(took.count()));
  return 0;
}

int run_echo_services(const std::string& socket, const std::vector<std::string>& services, const itest::Gate& ready,
                      const itest::Gate& stop) {
  auto c = itest::attach_retry(socket, "echo-services");
  if (!c) return fail(60, "echo-services: attach");
  std::vector<ServiceId> ids;
  for (const auto& s : services) {
    auto r = c->serve(s);
    if (!r) return fail(61, "echo-services: serve %s: %s", s.c_str(), std::string(to_string(r.status)).c_str());
    ids.push_back(r.value);
  }
  ready.signal();
  std::deque<Completion> pending;  // requests waiting for a buffer or SQ room
  std::vector<Buffer> replies;     // by user_data
  std::vector<std::uint64_t> free_ids;
  const auto deadline = Clock::now() + 50s;
  Completion out[32];
  while (!stop.ready()) {
    if (Clock::now() > deadline) return fail(62, "echo-services: never told to stop");
    while (!pending.empty()) {
      const Completion& r = pending.front();
      Buffer b = c->alloc(r.length);
      if (!b) break;
      std::memcpy(b.data, r.data, r.length);
      std::uint64_t id = replies.size();
      if (!free_ids.empty()) {
        id = free_ids.back();
        free_ids.pop_back();
        replies[id] = b;
      } else {
        replies.push_back(b);
      }
      const Status s = c->reply(r.token, b, r.length, id);
      if (s == Status::Busy) {
        (void)c->free(b);  // our own arena buffer: cannot fail
        free_ids.push_back(id);
        break;
      }
      if (s != Status::Ok) return fail(63, "echo-services: reply: %s", std::string(to_string(s)).c_str());
      c->release(r);
      pending.pop_front();
    }
    const std::size_t n = c->wait(out, 20ms);
    for (std::size_t i = 0; i < n; ++i) {
      const Completion& e = out[i];
      if (e.kind == Completion::Kind::Request) {
        bool ours = false;
        for (ServiceId id : ids) ours |= id == e.handle;
        if (!ours) return fail(64, "echo-services: request for service %u", e.handle);
        pending.push_back(e);
      } else if (e.kind == Completion::Kind::OpDone && e.op == OpKind::Reply) {
        if (e.status != Status::Ok && e.status != Status::CallerGone)
          return fail(65, "echo-services: reply completed %s", std::string(to_string(e.status)).c_str());
        if (e.user_data >= replies.size() || !replies[e.user_data]) return fail(66, "echo-services: bogus user_data");
        (void)c->free(replies[e.user_data]);  // our own arena buffer: cannot fail
        replies[e.user_data] = Buffer{};
        free_ids.push_back(e.user_data);
      } else {
        return fail(67, "echo-services: unexpected %s", std::string(to_string(e.kind)).c_str());
      }
    }
  }
  return 0;
}

int run_until_reset(const UntilResetSpec& spec) {
  auto c = itest::attach_retry(spec.socket, "until-reset");
  if (!c) return fail(70, "until-reset: attach");
  auto ep = itest::open_retry(*c, spec.target);
  if (!ep) return fail(71, "until-reset: open %s: %s", spec.target.c_str(), std::string(to_string(ep.status)).c_str());
  struct Slot {
    Buffer req, resp;
    std::uint64_t seq = 0;
    std::uint32_t len = 0;
    bool busy = false;
  };
  std::vector<Slot> slots(spec.concurrency);
  for (auto& s : slots) {
    s.req = c->alloc(spec.max_size);
    s.resp = c->alloc(spec.max_size);
    if (!s.req || !s.resp) return fail(72, "until-reset: alloc");
  }
  std::uint64_t next = 0, verified = 0, inflight = 0, resets = 0;
  bool failing = false, signalled = false;
  Clock::time_point killed_at{};
  const auto deadline = Clock::now() + 40s;
  Completion out[32];
  while (!failing || inflight != 0) {
    const auto now = Clock::now();
    if (now > deadline) return fail(73, "until-reset: %llu calls still in flight", (unsigned long long)inflight);
    if (killed_at == Clock::time_point{} && spec.killed && spec.killed->ready()) killed_at = now;
    if (killed_at != Clock::time_point{} && now > killed_at + spec.bound)
      return fail(74, "until-reset: %llu calls still in flight %lld ms after the peer was killed",
                  (unsigned long long)inflight, (long long)spec.bound.count());
    for (std::uint32_t i = 0; i < slots.size() && !failing; ++i) {
      Slot& s = slots[i];
      if (s.busy) continue;
      s.len = itest::size_for(next, spec.max_size);
      s.seq = next;
      itest::fill_payload(s.req.data, s.len, spec.caller, s.seq);
      const Status st = c->call(ep.value, s.req, s.len, s.resp, i);
      if (st == Status::Busy) break;
      if (st != Status::Ok) {
        // Refused at submission after the reset: nothing is in flight for it.
        if (killed_at == Clock::time_point{} && !(spec.killed && spec.killed->ready()))
          return fail(75, "until-reset: call refused before the kill: %s", std::string(to_string(st)).c_str());
        failing = true;
        break;
      }
      s.busy = true;
      ++next;
      ++inflight;
    }
    const std::size_t n = c->wait(out, 20ms);
    for (std::size_t k = 0; k < n; ++k) {
      const Completion& e = out[k];
      if (e.kind != Completion::Kind::OpDone || e.op != OpKind::Call)
        return fail(76, "until-reset: unexpected completion");
      if (e.user_data >= slots.size() || !slots[e.user_data].busy)
        return fail(83, "until-reset: completion for call slot %llu that is not in flight (duplicate?)",
                    (unsigned long long)e.user_data);
      Slot& s = slots[e.user_data];
      s.busy = false;
      --inflight;
      if (e.status == Status::Ok) {
        if (e.length != s.len || !itest::check_payload(s.resp.data, s.len, spec.caller, s.seq))
          return fail(78, "until-reset: wrong echo for seq %llu", (unsigned long long)s.seq);
        ++verified;
        if (spec.progress && !signalled && verified >= spec.progress_after) {
          spec.progress->signal();
          signalled = true;
        }
        continue;
      }
      if (e.status != Status::PeerReset)
        return fail(79, "until-reset: call seq %llu completed %s, expected PeerReset", (unsigned long long)s.seq,
                    std::string(to_string(e.status)).c_str());
      if (!(spec.killed && spec.killed->ready()) && killed_at == Clock::time_point{})
        return fail(80, "until-reset: PeerReset before the peer was killed");
      failing = true;
      ++resets;
    }
  }
  if (resets == 0) return fail(81, "until-reset: the kill failed no call in flight (expected PeerReset)");
  if (c->wait(out, 300ms) != 0) return fail(82, "until-reset: a completion after every call had completed");
  std::fprintf(stderr, "until-reset: %llu verified, %llu PeerReset\n", (unsigned long long)verified,
               (unsigned long long)resets);
  return 0;
}

std::string remote_call_times_out(const Cluster& cl, itest::TimeoutCallerSpec spec) {
  using namespace itest;
  Gate ready, release, late_done, stop, timed_out;
  const std::string server_socket = cl.node(1).socket();
  const pid_t server =
      cl.spawn_on(1, [&] { return run_late_server(LateServerSpec{server_socket}, ready, release, late_done, stop); });
  if (!ready.wait(20s)) {
    stop.signal();
    reap(server, 10s);
    return "late server never served";
  }
  spec.socket = cl.node(0).socket();
  spec.target = cl.node(1).target("late");
  const pid_t caller = cl.spawn_on(0, [&] { return run_timeout_caller(spec, timed_out, late_done); });
  std::string why;
  if (!timed_out.wait(90s)) why = "the held call did not time out; ";
  release.signal();  // only now does the server reply
  const int caller_rc = reap(caller, 90s);
  stop.signal();
  const int server_rc = reap(server, 20s);
  if (caller_rc != 0) why += "caller exit " + std::to_string(caller_rc) + "; ";
  if (server_rc != 0) why += "server exit " + std::to_string(server_rc);
  return why;
}

}  // namespace ferry::mhtest
