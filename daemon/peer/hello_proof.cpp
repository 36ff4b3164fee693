// Lane handshake proofs (the protocol: hello_proof.h).
#include "daemon/peer/hello_proof.h"

#include <sys/random.h>

#include <array>
#include <cerrno>

#include "transport/wire/hmac_sha256.h"

namespace ferry::daemon::peer {
namespace {

// Same-size labels: one layout of the MAC input for both directions.
constexpr std::array<std::uint8_t, 24> label(HelloDir dir) noexcept {
  return wire::mac_label<24>(dir == HelloDir::Hello ? "ferry-lane-v2 hello" : "ferry-lane-v2 helloack");
}

template <std::size_t N>
void put_le(std::array<std::uint8_t, N>& out, std::size_t at, std::uint64_t v, int bytes) noexcept {
  for (int i = 0; i < bytes; ++i) out[at + static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(v >> (8 * i));
}

}  // namespace

wire::AuthProof make_lane_proof(std::span<const std::uint8_t> secret, HelloDir dir, const LaneTranscript& t) noexcept {
  const auto lbl = label(dir);
  // le64 Ei, le64 Ea, le32 lane, u8 rejoin, le64 ack, u8 status
  std::array<std::uint8_t, 8 + 8 + 4 + 1 + 8 + 1> tail{};
  put_le(tail, 0, t.initiator_epoch, 8);
  put_le(tail, 8, t.acceptor_epoch, 8);
  put_le(tail, 16, t.lane, 4);
  tail[20] = t.rejoin ? 1 : 0;
  put_le(tail, 21, t.ack, 8);
  tail[29] = static_cast<std::uint8_t>(t.status);
  const std::span<const std::uint8_t> parts[] = {lbl,         t.initiator_nonce, t.acceptor_nonce,
                                                 t.challenge, t.dialer_nonce,    tail};
  return wire::hmac_sha256(secret, parts);
}

bool verify_lane_proof(std::span<const std::uint8_t> secret, HelloDir dir, const LaneTranscript& t,
                       const wire::AuthProof& proof) noexcept {
  const wire::AuthProof want = make_lane_proof(secret, dir, t);
  return wire::constant_time_equal(want, proof);
}

bool fresh_nonce(wire::AuthNonce& out) noexcept {
  std::size_t got = 0;
  while (got < out.size()) {
    const ssize_t n = ::getrandom(out.data() + got, out.size() - got, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    got += static_cast<std::size_t>(n);
  }
  return true;
}

}  // namespace ferry::daemon::peer
