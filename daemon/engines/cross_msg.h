// What engines hand each other (cross_link.h). Only the engine of a
// client's own session touches its rings; an op on an endpoint that another
// engine serves (a service it owns, or a channel to a peer engine it owns)
// runs there on the client's shadow (ClientSession::shadow_of), and its
// completion comes back:
//
//   origin  -> executor   Shadow   make a shadow of `origin` (once per pair)
//                         Op       run `op` (Open, Close, Send, Call) on it;
//                                  `port`: an Open's peer-engine port
//                         Gone     the client detached: end the shadow
//   executor -> origin    Done     `cq`, the completion the client gets
//                         Redirect the peer says another of its engines
//                                  serves the Open of `cq.user_data`: it is
//                                  at `port`, peer engine `peer_engine`
//                         Freed    the shadow is gone: nothing there names
//                                  the client's memory any more
//
// Every op handed over gets exactly one Done (or one Redirect, then a Done
// from where it went): the executor completes it as it completes any op.
#pragma once

#include <cstdint>
#include <string_view>
#include <type_traits>

#include "daemon/session/operation.h"
#include "shm/ring_entries.h"

namespace ferry::daemon {

class ClientSession;

enum class CrossKind : std::uint8_t { Shadow, Op, Gone, Done, Redirect, Freed };

constexpr std::string_view to_string(CrossKind k) noexcept {
  switch (k) {
    case CrossKind::Shadow: return "Shadow";
    case CrossKind::Op: return "Op";
    case CrossKind::Gone: return "Gone";
    case CrossKind::Done: return "Done";
    case CrossKind::Redirect: return "Redirect";
    case CrossKind::Freed: return "Freed";
  }
  return "Unknown";
}

struct CrossMsg {
  CrossKind kind = CrossKind::Op;
  std::uint8_t redirects = 0;  // Op (Open), Redirect: how often the peer redirected it
  std::uint16_t port = 0;      // Op (Open), Redirect: the peer engine's bootstrap port (0: the target's)
  std::uint32_t client = 0;
  std::uint32_t peer_engine = 0;          // Redirect
  const ClientSession* origin = nullptr;  // Shadow
  Operation op{};                         // Op; Redirect: the Open
  shm::CqEntry cq{};                      // Done
};
static_assert(std::is_trivially_copyable_v<CrossMsg>);
static_assert(sizeof(CrossMsg) <= 192, "ring slots stay small");

}  // namespace ferry::daemon
