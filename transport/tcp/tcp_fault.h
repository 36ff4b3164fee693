// Test-only fault injection for the tcp backend, compiled in only with
// -Dfault_injection=true (transport/fault_spec.h) and off unless ferryd's
// environment sets FERRY_FAULT_TCP (the fault tests in tests/fault/ do):
//
//   FERRY_FAULT_TCP=drop-after=N     silently drop one data frame
//   FERRY_FAULT_TCP=corrupt-after=N  send one data frame with a bad header
//
// "Data frame": a frame whose type is Send, Call or Response, the messages
// that carry client payloads on a channel's lanes. Handshake (Hello,
// HelloAck), heartbeats, Open/OpenAck/Close, Goodbye and the rest are never
// counted nor touched, so the channel always comes up and the fault lands on
// traffic. Frames are counted from 1 over every connection of the transport
// (one TcpTransport per ferryd: bootstrap and tcp lanes), in post_send order.
// With rdma lanes only the bootstrap is tcp: no data frame, so it never fires.
//
// drop: the Nth data frame, or the first later one that finds its
//   connection's send queue fully written (a frame queued behind bytes not
//   yet written cannot leave the byte stream without splitting it), is
//   reported SendDone Ok to the owner and never written. TCP itself loses
//   nothing afterwards: the peer sees a well-formed stream that lacks one
//   message (what a buggy sender or a lost datagram would look like).
// corrupt: the Nth data frame is written with the magic/version byte (header
//   offset 0) XOR 0xFF, so the peer's decoder rejects it (BadMagic ->
//   ProtocolError) and closes that connection.
//
// Each fault fires once. N: 1..10^12. Anything else (unknown kind, N
// missing, zero, not decimal, trailing text) makes TcpTransport::create()
// fail with BadRequest and an error log naming the variable and the syntax.
// When set, create() logs a warning that the switch is armed.
#pragma once

#include <cstdint>
#include <string_view>

#include "ferry/result.h"
#include "transport/fault_spec.h"
#include "transport/wire/msg_type.h"

namespace ferry::transport::tcp {

enum class TcpFaultKind : std::uint8_t { None, Drop, Corrupt };

constexpr std::string_view to_string(TcpFaultKind k) noexcept {
  switch (k) {
    case TcpFaultKind::None: return "none";
    case TcpFaultKind::Drop: return "drop";
    case TcpFaultKind::Corrupt: return "corrupt";
  }
  return "unknown";
}

inline constexpr const char* kTcpFaultEnv = "FERRY_FAULT_TCP";

struct TcpFault {
  TcpFaultKind kind = TcpFaultKind::None;
  std::uint64_t after = 0;  // 1-based index of the data frame to hit
  std::uint64_t seen = 0;   // data frames counted so far
  bool fired = false;

  bool armed() const noexcept {
    if constexpr (!kFaultInjection) return false;
    return kind != TcpFaultKind::None && !fired;
  }
};

// The frame types the fault counts (see above).
constexpr bool is_data_frame(wire::MsgType t) noexcept {
  return t == wire::MsgType::Send || t == wire::MsgType::Call || t == wire::MsgType::Response;
}

// Parses a FERRY_FAULT_TCP value; BadRequest when malformed.
[[nodiscard]] Result<TcpFault> parse_tcp_fault(std::string_view spec) noexcept;

// Reads FERRY_FAULT_TCP: kind None when unset or empty (and always in a
// build without fault injection); BadRequest (logged as an error) when
// malformed; a warning is logged when armed.
[[nodiscard]] Result<TcpFault> tcp_fault_from_env();

}  // namespace ferry::transport::tcp
