// Roles for RPC: a server for "echo" and "xform" (or "hold", which never
// replies), and callers that keep several calls outstanding and check every
// response byte in the buffer they supplied.
#include <cstring>
#include <deque>
#include <vector>

#include "tests/integration/traffic.h"

namespace ferry::itest {

int run_rpc_server(const RpcServerSpec& spec, const Gate& ready, const Gate& stop, const Gate* held) {
  auto c = attach_retry(spec.socket, spec.name);
  if (!c) return fail(30, "server: attach");
  ServiceId echo = 0, xform = 0, hold = 0;
  if (spec.hold) {
    auto h = c->serve("hold");
    if (!h) return fail(31, "server: serve hold: %s", std::string(to_string(h.status)).c_str());
    hold = h.value;
  } else {
    auto e = c->serve("echo");
    auto x = c->serve("xform");
    if (!e || !x)
      return fail(31, "server: serve: %s/%s", std::string(to_string(e.status)).c_str(),
                  std::string(to_string(x.status)).c_str());
    echo = e.value;
    xform = x.value;
  }
  ready.signal();
  std::deque<Completion> pending;  // requests waiting for a response buffer or SQ room
  std::vector<Buffer> replies;     // indexed by user_data
  std::vector<std::uint64_t> free_ids;
  const auto deadline = Clock::now() + spec.give_up_after;
  Completion out[32];
  while (!stop.ready()) {
    if (Clock::now() > deadline) return fail(32, "server: never told to stop");
    while (!pending.empty()) {
      const Completion& r = pending.front();
      Buffer b = r.length ? c->alloc(r.length) : Buffer{};
      if (r.length && !b) break;
      for (std::uint32_t i = 0; i < r.length; ++i) b.data[i] = r.handle == xform ? r.data[i] ^ kXformKey : r.data[i];
      std::uint64_t id;
      if (free_ids.empty()) {
        id = replies.size();
        replies.push_back(b);
      } else {
        id = free_ids.back();
        free_ids.pop_back();
        replies[id] = b;
      }
      const Status s = c->reply(r.token, b, r.length, id);
      if (s == Status::Busy) {
        if (b) (void)c->free(b);  // our own arena buffer: cannot fail
        free_ids.push_back(id);
        break;
      }
      if (s != Status::Ok) return fail(33, "server: reply: %s", std::string(to_string(s)).c_str());
      c->release(r);
      pending.pop_front();
    }
    const std::size_t n = c->wait(out, 20ms);
    for (std::size_t i = 0; i < n; ++i) {
      const Completion& e = out[i];
      if (e.kind == Completion::Kind::Request) {
        if (e.handle != echo && e.handle != xform && e.handle != hold)
          return fail(34, "server: request for service %u", e.handle);
        std::uint32_t sender;
        std::uint64_t seq;
        if (e.length >= kHeaderBytes && !read_header(e.data, e.length, sender, seq))
          return fail(35, "server: corrupt request");
        if (e.handle == hold) {
          if (held) held->signal();
          continue;  // never replied, never released: the caller's calls stay in flight
        }
        pending.push_back(e);
      } else if (e.kind == Completion::Kind::OpDone && e.op == OpKind::Reply) {
        // A caller that died or gave a small buffer is the caller's problem;
        // so is a remote caller whose channel failed (PeerReset: fault tests).
        if (e.status != Status::Ok && e.status != Status::CallerGone && e.status != Status::ResponseTooLarge &&
            e.status != Status::PeerReset) {
          return fail(36, "server: reply completed %s", std::string(to_string(e.status)).c_str());
        }
        if (e.user_data >= replies.size()) return fail(37, "server: bogus reply user_data");
        if (replies[e.user_data]) (void)c->free(replies[e.user_data]);  // our own arena buffer: cannot fail
        replies[e.user_data] = Buffer{};
        free_ids.push_back(e.user_data);
      } else {
        return fail(38, "server: unexpected %s", std::string(to_string(e.kind)).c_str());
      }
    }
  }
  return 0;
}

int run_caller(const CallerSpec& spec) {
  auto c = attach_retry(spec.socket, "caller");
  if (!c) return fail(40, "caller: attach");
  auto ep = open_retry(*c, spec.target);
  if (!ep) return fail(41, "caller: open %s: %s", spec.target.c_str(), std::string(to_string(ep.status)).c_str());
  const auto max = static_cast<std::uint32_t>(spec.max_size ? spec.max_size : c->max_message_bytes());
  struct Slot {
    Buffer req, resp;
    std::uint64_t seq = 0;
    std::uint32_t len = 0;
    bool busy = false;
  };
  std::vector<Slot> slots(spec.concurrency);
  const bool echo = spec.target.ends_with("echo");
  std::uint64_t next = 0, verified = 0, limit = spec.stop ? UINT64_MAX : spec.count, inflight = 0;
  bool signalled = false;
  const auto deadline = Clock::now() + 40s;
  Completion out[32];
  while (verified < limit || inflight != 0) {
    if (Clock::now() > deadline) return fail(42, "caller %u: %llu verified", spec.caller, (unsigned long long)verified);
    if (spec.stop && limit == UINT64_MAX && spec.stop->ready()) limit = next + spec.count;
    for (std::uint32_t i = 0; i < spec.concurrency && next < limit; ++i) {
      Slot& s = slots[i];
      if (s.busy) continue;
      s.len = size_for(next, max);
      s.req = c->alloc(s.len);
      s.resp = c->alloc(s.len);
      if (!s.req || !s.resp) {
        if (s.req) (void)c->free(s.req);    // our own arena buffer: cannot fail
        if (s.resp) (void)c->free(s.resp);  // our own arena buffer: cannot fail
        break;
      }
      s.seq = next;
      fill_payload(s.req.data, s.len, spec.caller, s.seq);
      std::memset(s.resp.data, 0, s.resp.capacity);
      const Status st = c->call(ep.value, s.req, s.len, s.resp, i);
      if (st == Status::Busy) {
        (void)c->free(s.req);   // our own arena buffer: cannot fail
        (void)c->free(s.resp);  // our own arena buffer: cannot fail
        break;
      }
      if (st != Status::Ok) return fail(43, "caller: call: %s", std::string(to_string(st)).c_str());
      s.busy = true;
      ++next;
      ++inflight;
    }
    const std::size_t n = c->wait(out, 50ms);
    for (std::size_t k = 0; k < n; ++k) {
      const Completion& e = out[k];
      if (e.kind != Completion::Kind::OpDone || e.op != OpKind::Call) return fail(44, "caller: unexpected completion");
      if (e.user_data >= slots.size() || !slots[e.user_data].busy)
        return fail(45, "caller: bogus user_data %llu", (unsigned long long)e.user_data);
      Slot& s = slots[e.user_data];
      if (e.status != Status::Ok)
        return fail(46, "caller %u: call seq %llu: %s", spec.caller, (unsigned long long)s.seq,
                    std::string(to_string(e.status)).c_str());
      if (e.length != s.len || e.data != s.resp.data)
        return fail(47, "caller: response length %u, expected %u", e.length, s.len);
      const bool ok = echo ? check_payload(s.resp.data, s.len, spec.caller, s.seq)
                           : check_xformed(s.resp.data, s.len, spec.caller, s.seq);
      if (!ok)
        return fail(48, "caller %u: wrong response bytes seq %llu len %u", spec.caller, (unsigned long long)s.seq,
                    s.len);
      (void)c->free(s.req);   // our own arena buffer: cannot fail
      (void)c->free(s.resp);  // our own arena buffer: cannot fail
      s.busy = false;
      --inflight;
      ++verified;
      if (spec.progress && !signalled && verified >= spec.progress_after) {
        spec.progress->signal();
        signalled = true;
      }
    }
  }
  return 0;
}

}  // namespace ferry::itest
