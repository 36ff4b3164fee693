// A minimal valid header for every message type, shared by the wire tests.
#pragma once

#include "transport/wire/handshake.h"
#include "transport/wire/header.h"
#include "transport/wire/rail_keys.h"
#include "transport/wire/remote_buffer.h"

namespace ferry::wire::testing {

inline Header valid_header(MsgType t) {
  Header h;
  h.type = t;
  h.seq = 0x0102030405060708ull;
  h.lane_seq = 0x11121314u;
  h.ack = 0x15161718u;
  h.credit = 7;
  switch (t) {
    case MsgType::Hello:
    case MsgType::HelloAck: h.payload_len = kHandshakeBaseBytes; break;
    case MsgType::Heartbeat: h.token = 99; break;
    case MsgType::Credit: h.credit = 32; break;
    case MsgType::Open:
      h.payload_len = 5;
      h.src_ep = 3;
      h.token = 11;
      break;
    case MsgType::OpenAck:
      h.src_ep = 9;
      h.dst_ep = 3;
      h.token = 11;
      break;
    case MsgType::Close: h.dst_ep = 9; break;
    case MsgType::Send:
      h.payload_len = 100;
      h.src_ep = 3;
      h.dst_ep = 9;
      break;
    case MsgType::Call:
      h.payload_len = 100;
      h.src_ep = 3;
      h.dst_ep = 9;
      h.token = 12;
      break;
    case MsgType::Response:
      h.payload_len = 100;
      h.dst_ep = 3;
      h.token = 12;
      h.status = Status::Ok;
      break;
    case MsgType::Error:
      h.status = Status::ServiceGone;
      h.payload_len = 10;
      break;
    case MsgType::RendezvousReq:
      h.payload_len = kRemoteBufferBytes;
      h.src_ep = 3;
      h.dst_ep = 9;
      h.token = 13;
      h.aux = static_cast<std::uint8_t>(MsgType::Send);
      break;
    case MsgType::ReadDone:
      h.token = 13;
      h.aux = 4096;
      break;
    case MsgType::WriteDone:
      h.dst_ep = 3;
      h.token = 12;
      h.aux = 512;
      break;
    case MsgType::Resync: break;
    case MsgType::Goodbye: h.status = Status::Cancelled; break;
    case MsgType::Challenge: h.payload_len = kAuthNonceBytes; break;
    case MsgType::RailKeys:
      h.aux = 2;
      h.payload_len = rail_keys_bytes(2);
      break;
  }
  return h;
}

inline Handshake valid_handshake() {
  Handshake hs;
  hs.protocol_version = kProtocolVersion;
  hs.qp_count = 4;
  hs.daemon_epoch = 0xABCDEF0012345678ull;
  hs.capabilities = kCapTcp | kCapRdma | kCapZeroCopyWrite;
  hs.initial_credits = 256;
  hs.max_message_bytes = 1u << 20;
  return hs;
}

}  // namespace ferry::wire::testing
