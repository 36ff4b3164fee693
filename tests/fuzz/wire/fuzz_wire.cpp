// libFuzzer target for the wire decoders: header, handshake, remote buffer,
// rail keys.
// Beyond "no crash, no sanitizer report" it checks that whatever the decoder
// accepts re-encodes to the same bytes (header) or the same value
// (handshake, descriptor), so decode and encode cannot drift apart.
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>

#include "transport/wire/handshake.h"
#include "transport/wire/header.h"
#include "transport/wire/rail_keys.h"
#include "transport/wire/remote_buffer.h"

using namespace ferry::wire;

namespace {

void check(bool ok) {
  if (!ok) std::abort();
}

void fuzz_handshake(std::span<const std::byte> in) {
  Handshake hs;
  if (decode_handshake(in, hs) != WireError::None) return;
  check(hs.protocol_version != 0 && hs.qp_count >= 1 && hs.qp_count <= kMaxQpsPerChannel);
  check(hs.daemon_epoch != 0 && (hs.capabilities & ~kCapsKnown) == 0);
  std::array<std::byte, kHandshakeMaxWithRails> out{};
  const std::size_t n = encode_handshake(hs, out);
  check(n == in.size());
  Handshake again;
  check(decode_handshake(std::span<const std::byte>(out.data(), n), again) == WireError::None);
  check(again == hs);
  Handshake local;
  local.qp_count = 2;
  local.daemon_epoch = 1;
  local.capabilities = kCapsKnown;
  local.initial_credits = 64;
  local.max_message_bytes = kMinMessageBytes;
  Negotiated neg;
  if (negotiate(local, hs, neg) == WireError::None) {
    check(neg.qp_count >= 1 && neg.qp_count <= 2 && neg.max_message_bytes >= kMinMessageBytes);
  }
}

void fuzz_remote_buffer(std::span<const std::byte> in) {
  RemoteBuffer rb;
  if (decode_remote_buffer(in, rb) != WireError::None) return;
  check(rb.length != 0 && rb.addr + rb.length >= rb.addr);
  std::array<std::byte, kRemoteBufferBytes> out{};
  encode_remote_buffer(rb, out);
  check(std::memcmp(out.data(), in.data(), kRemoteBufferBytes) == 0);
}

void fuzz_rail_keys(std::span<const std::byte> in, std::uint32_t rails) {
  RailKeys rk;
  if (decode_rail_keys(in, rails, rk) != WireError::None) return;
  check(rk.rails == rails && rails >= 1 && rails <= kMaxRailKeys && in.size() == rail_keys_bytes(rails));
  check(rk.length != 0 && rk.addr + rk.length > rk.addr);
  std::array<std::byte, kRailKeysMaxBytes> out{};
  check(encode_rail_keys(rk, out) == in.size());
  check(std::memcmp(out.data(), in.data(), in.size()) == 0);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::byte> in(reinterpret_cast<const std::byte*>(data), size);
  // The first byte picks the channel limit so length checks see varied caps.
  const std::uint32_t max_payload = size > 0 && (data[0] & 1) ? kMinMessageBytes : (1u << 20);

  // A stream of frames, as the tcp receive path sees it.
  std::size_t off = 0;
  while (off < in.size()) {
    Header h;
    const WireError e = decode_header(in.subspan(off), max_payload, h);
    if (e != WireError::None) {
      check(e != WireError::Truncated || in.size() - off < kHeaderBytes);
      break;
    }
    check(validate_header(h, max_payload) == WireError::None);
    check(h.payload_len <= max_payload);
    std::array<std::byte, kHeaderBytes> re{};
    encode_header(h, re);
    check(std::memcmp(re.data(), in.data() + off, kHeaderBytes) == 0);
    off += kHeaderBytes;
    const std::size_t avail = in.size() - off;
    const auto payload = in.subspan(off, h.payload_len < avail ? h.payload_len : avail);
    if (h.type == MsgType::Hello || h.type == MsgType::HelloAck) fuzz_handshake(payload);
    if (h.type == MsgType::RendezvousReq || (h.flags & kFlagRespBuffer) != 0) fuzz_remote_buffer(payload);
    if (h.type == MsgType::RailKeys) fuzz_rail_keys(payload, h.aux);
    off += payload.size();
  }
  // The payload decoders also see raw input directly.
  fuzz_handshake(in.first(in.size() < kHandshakeMaxWithRails ? in.size() : kHandshakeMaxWithRails));
  fuzz_handshake(in.first(in.size() < kHandshakeBaseBytes ? in.size() : kHandshakeBaseBytes));
  fuzz_remote_buffer(in);
  // Rail keys of every count the header allows, and some it does not.
  fuzz_rail_keys(in, size > 0 ? data[0] & 7u : 0);
  return 0;
}
