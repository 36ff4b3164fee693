// What other engines hand this one (engines/cross_msg.h): shadows of their
// clients and the ops to run on them, and, for our own clients, the
// completions and redirects of ops we handed over, and freed shadows.
#include <spdlog/spdlog.h>

#include "daemon/datapath.h"
#include "daemon/session/segment_mr.h"

namespace ferry::daemon {

void Datapath::on_cross(std::uint32_t from, const CrossMsg& m) {
  switch (m.kind) {
    case CrossKind::Shadow: make_shadow(from, m); break;
    case CrossKind::Op: run_forwarded(from, m); break;
    case CrossKind::Gone: (void)detach(m.client); break;  // its shadow
    case CrossKind::Done: forwarder.on_done(from, m); break;
    case CrossKind::Redirect:
      if (ClientSession* c = sessions.find(m.client); c != nullptr && !c->is_shadow()) {
        router.redirected(*c, m.op, m.port, m.peer_engine, m.redirects);
      }
      break;
    case CrossKind::Freed: sessions.shadow_freed(m.client); break;
  }
}

void Datapath::make_shadow(std::uint32_t from, const CrossMsg& m) {
  std::unique_ptr<ClientSession> s = ClientSession::shadow_of(*m.origin, from);
  if (transports_.pd != nullptr) {
    // Our lanes post from (and peers reach) its memory with our PDs' keys.
    const auto& lay = s->view().layout;
    std::byte* base = static_cast<std::byte*>(s->view().base);
    const Error bad = SegmentMr::make(transports_.pds, base + lay.tx_offset, lay.tx_bytes, base + lay.rx_offset,
                                      lay.rx_bytes, transports_.keys.per_call(), &s->mr);
    if (bad.failed()) {
      // Its ops here fail (the remote sender refuses a segment without keys);
      // the client's other engines are unaffected.
      spdlog::warn("engine {}: cannot register client {}'s segment for its ops here ({})", index_, m.client,
                   bad.message());
    }
  }
  sessions.add_shadow(std::move(s));
}

void Datapath::run_forwarded(std::uint32_t from, const CrossMsg& m) {
  ClientSession* s = sessions.find(m.client);
  if (s == nullptr || !s->is_shadow() || s->origin_engine != from) {
    // Cannot happen (Shadow comes first, Gone last); still, one answer per op.
    CrossMsg done;
    done.kind = CrossKind::Done;
    done.client = m.client;
    done.cq.kind = static_cast<std::uint8_t>(shm::CqKind::OpDone);
    done.cq.status = static_cast<std::uint8_t>(Status::EndpointClosed);
    done.cq.op = static_cast<std::uint8_t>(m.op.op);
    done.cq.user_data = m.op.user_data;
    forwarder.link().send(from, done);
    return;
  }
  if (m.op.op == shm::Op::Open) {
    router.open(*s, m.op, m.port, m.redirects);
    return;
  }
  dispatcher.run_forwarded(*s, m.op);
}

}  // namespace ferry::daemon
