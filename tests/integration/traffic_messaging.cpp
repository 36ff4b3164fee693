// Roles for one-way messaging: a sink that verifies everything, and senders
// that keep a window of sends in flight.
#include <map>
#include <vector>

#include "tests/integration/traffic.h"

namespace ferry::itest {

int run_sink(const SinkSpec& spec, const Gate& ready) {
  auto c = attach_retry(spec.socket, "sink");
  if (!c) return fail(10, "sink: attach");
  auto sid = c->serve(spec.service);
  if (!sid) return fail(11, "sink: serve: %s", std::string(to_string(sid.status)).c_str());
  ready.signal();
  std::map<std::uint64_t, std::uint32_t> sender_of;  // source -> sender id
  std::vector<std::uint64_t> next(spec.senders, 0);  // per-sender expected seq
  const std::uint64_t total = std::uint64_t{spec.senders} * spec.per_sender;
  std::uint64_t got = 0;
  const auto deadline = Clock::now() + 25s;
  Completion out[32];
  while (got < total) {
    if (Clock::now() > deadline)
      return fail(12, "sink: only %llu of %llu messages", (unsigned long long)got, (unsigned long long)total);
    const std::size_t n = c->wait(out, 100ms);
    for (std::size_t i = 0; i < n; ++i) {
      const Completion& m = out[i];
      if (m.kind != Completion::Kind::Message)
        return fail(13, "sink: unexpected %s", std::string(to_string(m.kind)).c_str());
      if (m.handle != sid.value) return fail(14, "sink: message for service %u", m.handle);
      std::uint32_t sender;
      std::uint64_t seq;
      if (read_header(m.data, m.length, sender, seq)) {
        if (sender >= spec.senders) return fail(15, "sink: sender %u out of range", sender);
        auto [it, fresh] = sender_of.emplace(m.source, sender);
        if (!fresh && it->second != sender)
          return fail(16, "sink: source %llu changed sender", (unsigned long long)m.source);
      } else {
        auto it = sender_of.find(m.source);
        if (it == sender_of.end()) return fail(17, "sink: headerless message (len %u) from unknown source", m.length);
        sender = it->second;
        seq = next[sender];
      }
      if (seq != next[sender])
        return fail(18, "sink: sender %u seq %llu, expected %llu", sender, (unsigned long long)seq,
                    (unsigned long long)next[sender]);
      if (!check_payload(m.data, m.length, sender, seq))
        return fail(19, "sink: corrupt payload sender %u seq %llu len %u", sender, (unsigned long long)seq, m.length);
      ++next[sender];
      ++got;
      c->release(m);
    }
  }
  return 0;
}

int run_sender(const SenderSpec& spec) {
  auto c = attach_retry(spec.socket, "sender");
  if (!c) return fail(20, "sender: attach");
  auto ep = open_retry(*c, spec.target);
  if (!ep) return fail(21, "sender: open: %s", std::string(to_string(ep.status)).c_str());
  const auto max = static_cast<std::uint32_t>(c->max_message_bytes());
  std::vector<Buffer> bufs(spec.count);
  std::uint64_t next = 0, done = 0, inflight = 0;
  const auto deadline = Clock::now() + 25s;
  Completion out[32];
  while (done < spec.count) {
    if (Clock::now() > deadline)
      return fail(22, "sender %u: %llu of %llu done", spec.sender, (unsigned long long)done,
                  (unsigned long long)spec.count);
    while (next < spec.count && inflight < spec.window) {
      const std::uint32_t len = size_for(next, max);
      if (!bufs[next]) bufs[next] = c->alloc(len);
      if (!bufs[next]) break;  // arena full: wait for completions
      fill_payload(bufs[next].data, len, spec.sender, next);
      const Status s = c->send(ep.value, bufs[next], len, next);
      if (s == Status::Busy) break;
      if (s != Status::Ok) return fail(23, "sender: send: %s", std::string(to_string(s)).c_str());
      ++next;
      ++inflight;
    }
    const std::size_t n = c->wait(out, 100ms);
    for (std::size_t i = 0; i < n; ++i) {
      if (out[i].kind != Completion::Kind::OpDone || out[i].op != OpKind::Send)
        return fail(24, "sender: unexpected completion");
      if (out[i].status != Status::Ok)
        return fail(25, "sender: send %llu: %s", (unsigned long long)out[i].user_data,
                    std::string(to_string(out[i].status)).c_str());
      if (out[i].user_data >= next || !bufs[out[i].user_data]) return fail(26, "sender: bogus user_data");
      (void)c->free(bufs[out[i].user_data]);  // our own arena buffer: cannot fail
      bufs[out[i].user_data] = Buffer{};
      ++done;
      --inflight;
    }
  }
  return 0;
}

}  // namespace ferry::itest
