// Message types between daemons (docs/protocol.md).
// Values are wire ABI: append only, never renumber. 0 is never valid so a
// zeroed buffer cannot pass for a message.
#pragma once

#include <cstdint>
#include <string_view>

namespace ferry::wire {

enum class MsgType : std::uint8_t {
  Hello = 1,           // bootstrap: first message of the connecting side; payload = Handshake
  HelloAck = 2,        // bootstrap: answer; payload = Handshake; status != Ok refuses the channel
  Heartbeat = 3,       // liveness on the bootstrap connection; token echoed by the peer
  Credit = 4,          // pure credit grant / cumulative ack when there is no data to piggyback on
  Open = 5,            // open an endpoint to a service; payload = service name; src_ep = opener
  OpenAck = 6,         // answer to Open (by token); src_ep = the service-side endpoint when Ok
  Close = 7,           // endpoint closed; dst_ep = the peer's endpoint id
  Send = 8,            // one-way message, eager (payload inline)
  Call = 9,            // request; token = call id; kFlagRespBuffer: payload starts with a RemoteBuffer
  Response = 10,       // response to a Call (by token), payload inline; ResponseTooLarge: aux = length needed
  Error = 11,          // a failure not tied to a Response (status != Ok); payload = short reason text
  RendezvousReq = 12,  // large Send/Call (aux = Send|Call): payload = source RemoteBuffer [+ response RemoteBuffer
                       // with kFlagRespBuffer]; the receiver RDMA-READs the source, then answers like the eager type
  ReadDone = 13,       // receiver finished the rendezvous READ (token); sender may free; aux = bytes read
  WriteDone = 14,      // response body was RDMA-WRITTEN into the caller's buffer; aux = bytes written
  Resync = 15,         // reserved: a lane rebuild resyncs in its rejoin Hello/HelloAck (kFlagRetransmit)
  Goodbye = 16,        // orderly channel shutdown (draining); status = reason
  Challenge = 17,      // auth only: an acceptor's first message on every accepted connection; payload = 16-byte
                       // nonce that the dialer's lane Hello proof must cover (daemon/peer/hello_proof.h)
  RailKeys = 18,       // several rails: a tx arena's range and its rkey on each of the sender's rails (aux = rail
                       // count); sent before the first request exposing it on a lane (transport/wire/rail_keys.h)
};
inline constexpr std::uint8_t kMaxMsgType = static_cast<std::uint8_t>(MsgType::RailKeys);

constexpr std::string_view to_string(MsgType t) noexcept {
  switch (t) {
    case MsgType::Hello: return "Hello";
    case MsgType::HelloAck: return "HelloAck";
    case MsgType::Heartbeat: return "Heartbeat";
    case MsgType::Credit: return "Credit";
    case MsgType::Open: return "Open";
    case MsgType::OpenAck: return "OpenAck";
    case MsgType::Close: return "Close";
    case MsgType::Send: return "Send";
    case MsgType::Call: return "Call";
    case MsgType::Response: return "Response";
    case MsgType::Error: return "Error";
    case MsgType::RendezvousReq: return "RendezvousReq";
    case MsgType::ReadDone: return "ReadDone";
    case MsgType::WriteDone: return "WriteDone";
    case MsgType::Resync: return "Resync";
    case MsgType::Goodbye: return "Goodbye";
    case MsgType::Challenge: return "Challenge";
    case MsgType::RailKeys: return "RailKeys";
  }
  return "Unknown";
}

// Header flags. Any other bit is rejected, and each type allows only some.
// kFlagRetransmit: on data, sent again (informational: lane_seq drops
// duplicates); on a lane's Hello/HelloAck, a rejoin: the connection replaces
// a broken lane of a channel that is Up, and `ack` carries the lane_seq last
// received there (daemon/peer/channel_lifecycle.cpp).
inline constexpr std::uint8_t kFlagRetransmit = 1u << 0;
inline constexpr std::uint8_t kFlagRespBuffer = 1u << 1;  // Call: payload starts with the response RemoteBuffer
// OpenAck: the service is served by another engine of the peer (daemon/engines/):
// status ServiceNotFound, aux = engine << 16 | that engine's bootstrap port.
inline constexpr std::uint8_t kFlagRedirect = 1u << 2;
inline constexpr std::uint8_t kFlagsKnown = kFlagRetransmit | kFlagRespBuffer | kFlagRedirect;
constexpr std::uint32_t redirect_aux(std::uint32_t engine, std::uint16_t port) noexcept { return engine << 16 | port; }
constexpr std::uint16_t redirect_port(std::uint32_t aux) noexcept { return static_cast<std::uint16_t>(aux & 0xFFFF); }
constexpr std::uint32_t redirect_engine(std::uint32_t aux) noexcept { return aux >> 16; }

}  // namespace ferry::wire
