// Shared-secret authentication in the channel handshake, through the
// recording transport: what each side sends, and that the acceptor joins no
// lane (so nothing flows) until the initiator's proof checks out.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "daemon/peer/channel_manager.h"
#include "transport/testing/recording_transport.h"
#include "transport/wire/auth_proof.h"

using namespace ferry;
using namespace ferry::daemon;
using namespace ferry::daemon::peer;
using transport::testing::RecordingTransport;

namespace {

constexpr std::uint64_t kMs = 1'000'000;
constexpr std::uint64_t kOurEpoch = 100;
constexpr std::uint64_t kPeerEpoch = 50;
const std::string kSecret = "correct horse battery staple";
const std::string kOther = "correct horse battery stapler";

std::span<const std::uint8_t> bytes(const std::string& s) {
  return {reinterpret_cast<const std::uint8_t*>(s.data()), s.size()};
}

struct Listener final : ChannelEvents {
  std::vector<std::uint32_t> up;
  std::vector<std::pair<std::uint32_t, Status>> down;
  void on_channel_up(Channel& ch) override { up.push_back(ch.id); }
  void on_channel_down(Channel& ch, Status why) override { down.emplace_back(ch.id, why); }
  void on_message(Channel&, std::uint32_t, const wire::Header&, const std::byte*) override {}
  void on_send_done(std::uint64_t, Status) override {}
};

wire::Handshake base_handshake(std::uint64_t epoch, bool auth) {
  wire::Handshake hs;
  hs.qp_count = 1;
  hs.daemon_epoch = epoch;
  hs.capabilities = wire::kCapTcp | (auth ? wire::kCapAuth : 0);
  hs.initial_credits = 16;
  hs.max_message_bytes = 1u << 20;
  return hs;
}

std::vector<std::byte> encode(const wire::Handshake& hs) {
  std::vector<std::byte> out(wire::handshake_bytes(hs));
  REQUIRE(wire::encode_handshake(hs, out) == out.size());
  return out;
}

wire::Header header(wire::MsgType type, std::uint64_t token, Status status = Status::Ok) {
  wire::Header h;
  h.type = type;
  h.token = token;
  h.status = status;
  return h;
}

wire::AuthNonce nonce(std::uint8_t seed) {
  wire::AuthNonce n{};
  for (std::size_t i = 0; i < n.size(); ++i) n[i] = static_cast<std::uint8_t>(seed + i);
  return n;
}

struct Rig {
  RecordingTransport t;
  Listener ev;
  Counters counters;
  std::unique_ptr<ChannelManager> mgr;
  std::uint64_t now = 1000 * kMs;

  explicit Rig(const std::string& secret) {
    ChannelConfig cfg;
    cfg.epoch = kOurEpoch;
    cfg.connect_timeout_ms = 500;
    cfg.lanes = 1;
    cfg.auth_secret = secret;
    mgr = std::make_unique<ChannelManager>(t, ev, cfg, counters);
  }
  // As after a wake by the transport: a manager with no channel looks at
  // its transport only every few polls otherwise.
  void pump() {
    mgr->woke(true);
    (void)mgr->poll(now);
  }
  void accept(transport::ConnId c) {
    transport::Completion a;
    a.kind = transport::CompletionKind::Accepted;
    a.conn = c;
    t.inject(a);
  }
  // The last message of `type` sent on `conn`; fails the test when none.
  const transport::testing::RecordedSend& last(wire::MsgType type, transport::ConnId conn) const {
    for (auto it = t.sent().rbegin(); it != t.sent().rend(); ++it) {
      if (it->header.type == type && it->conn == conn) return *it;
    }
    FAIL("no " << to_string(type) << " sent on conn " << conn);
    return t.sent().front();
  }
  std::size_t count(wire::MsgType type) const {
    std::size_t n = 0;
    for (const auto& s : t.sent()) n += s.header.type == type ? 1 : 0;
    return n;
  }
};

wire::Handshake decoded(const transport::testing::RecordedSend& s) {
  wire::Handshake hs;
  REQUIRE(wire::decode_handshake(s.payload, hs) == wire::WireError::None);
  return hs;
}

// Acceptor side: a peer's bootstrap Hello with nonce Ni; returns our HelloAck.
wire::Handshake accept_bootstrap(Rig& rig, const wire::AuthNonce& ni) {
  rig.accept(1);
  rig.accept(2);
  wire::Handshake hello = base_handshake(kPeerEpoch, true);
  hello.has_nonce = true;
  hello.auth_nonce = ni;
  rig.t.inject_recv(1, header(wire::MsgType::Hello, 0), encode(hello));
  rig.pump();
  const auto& ack = rig.last(wire::MsgType::HelloAck, 1);
  REQUIRE(ack.header.status == Status::Ok);
  return decoded(ack);
}

std::vector<std::byte> lane_hello(const wire::AuthNonce& ni, const wire::AuthProof& proof) {
  wire::Handshake hs = base_handshake(kPeerEpoch, true);
  hs.has_nonce = hs.has_proof = true;
  hs.auth_nonce = ni;
  hs.auth_proof = proof;
  return encode(hs);
}

}  // namespace

TEST_CASE("auth acceptor: HelloAck proves the secret over both nonces", "[channel][auth]") {
  Rig rig(kSecret);
  const wire::AuthNonce ni = nonce(1);
  const wire::Handshake ack = accept_bootstrap(rig, ni);
  CHECK((ack.capabilities & wire::kCapAuth) != 0);
  REQUIRE(ack.has_nonce);
  REQUIRE(ack.has_proof);
  CHECK(ack.auth_nonce != ni);
  const wire::AuthTranscript t{ni, ack.auth_nonce, kPeerEpoch, kOurEpoch};
  CHECK(wire::verify_auth_proof(bytes(kSecret), wire::AuthRole::Acceptor, t, ack.auth_proof));
  CHECK_FALSE(wire::verify_auth_proof(bytes(kOther), wire::AuthRole::Acceptor, t, ack.auth_proof));
  CHECK(rig.ev.up.empty());  // no lane yet

  SECTION("a lane with the initiator's valid proof joins: Up") {
    const auto pi = wire::make_auth_proof(bytes(kSecret), wire::AuthRole::Initiator, t);
    rig.t.inject_recv(2, header(wire::MsgType::Hello, 1), lane_hello(ni, pi));
    rig.pump();
    CHECK(rig.last(wire::MsgType::HelloAck, 2).header.status == Status::Ok);
    CHECK(rig.ev.up.size() == 1);
    CHECK(rig.ev.down.empty());
  }
  SECTION("a lane proven with another secret is refused and fails the channel") {
    const auto bad = wire::make_auth_proof(bytes(kOther), wire::AuthRole::Initiator, t);
    rig.t.inject_recv(2, header(wire::MsgType::Hello, 1), lane_hello(ni, bad));
    rig.pump();
    CHECK(rig.last(wire::MsgType::HelloAck, 2).header.status == Status::PermissionDenied);
    CHECK(rig.last(wire::MsgType::Goodbye, 1).header.status == Status::PermissionDenied);
    CHECK(rig.ev.up.empty());
    REQUIRE(rig.ev.down.size() == 1);
    CHECK(rig.ev.down[0].second == Status::PermissionDenied);
    CHECK(read(rig.counters.peer_auth_failures) == 1);
  }
  SECTION("our own proof reflected back does not join a lane") {
    rig.t.inject_recv(2, header(wire::MsgType::Hello, 1), lane_hello(ni, ack.auth_proof));
    rig.pump();
    CHECK(rig.last(wire::MsgType::HelloAck, 2).header.status == Status::PermissionDenied);
    CHECK(rig.ev.up.empty());
  }
  SECTION("a lane without a proof joins nothing") {
    wire::Handshake hs = base_handshake(kPeerEpoch, true);
    hs.has_nonce = true;
    hs.auth_nonce = ni;
    rig.t.inject_recv(2, header(wire::MsgType::Hello, 1), encode(hs));
    rig.pump();
    CHECK(rig.last(wire::MsgType::HelloAck, 2).header.status != Status::Ok);
    CHECK(rig.ev.up.empty());
  }
  SECTION("a lane naming another channel's nonce joins nothing") {
    const wire::AuthTranscript other{nonce(9), ack.auth_nonce, kPeerEpoch, kOurEpoch};
    const auto pi = wire::make_auth_proof(bytes(kSecret), wire::AuthRole::Initiator, other);
    rig.t.inject_recv(2, header(wire::MsgType::Hello, 1), lane_hello(nonce(9), pi));
    rig.pump();
    CHECK(rig.last(wire::MsgType::HelloAck, 2).header.status != Status::Ok);
    CHECK(rig.ev.up.empty());
  }
  SECTION("data before a lane joined is not served") {
    wire::Header open = header(wire::MsgType::Open, 7);
    open.src_ep = 1;
    rig.t.inject_recv(2, open, std::vector<std::byte>(4, std::byte{'e'}));
    rig.pump();
    CHECK(rig.ev.up.empty());
    const auto& closed = rig.t.closed();
    CHECK(std::find(closed.begin(), closed.end(), transport::ConnId{2}) != closed.end());
  }
}

TEST_CASE("auth acceptor: a peer without a secret is refused before any channel exists", "[channel][auth]") {
  Rig rig(kSecret);
  rig.accept(1);
  rig.t.inject_recv(1, header(wire::MsgType::Hello, 0), encode(base_handshake(kPeerEpoch, false)));
  rig.pump();
  CHECK(rig.last(wire::MsgType::HelloAck, 1).header.status == Status::PermissionDenied);
  CHECK(rig.mgr->channel_count() == 0);
  CHECK(read(rig.counters.peer_auth_failures) == 1);
}

TEST_CASE("auth acceptor without a secret refuses a peer that authenticates", "[channel][auth]") {
  Rig rig("");
  rig.accept(1);
  wire::Handshake hello = base_handshake(kPeerEpoch, true);
  hello.has_nonce = true;
  hello.auth_nonce = nonce(3);
  rig.t.inject_recv(1, header(wire::MsgType::Hello, 0), encode(hello));
  rig.pump();
  CHECK(rig.last(wire::MsgType::HelloAck, 1).header.status == Status::PermissionDenied);
  CHECK(rig.mgr->channel_count() == 0);
}

TEST_CASE("auth initiator: checks the acceptor's proof before any lane", "[channel][auth]") {
  Rig rig(kSecret);
  rig.t.set_connect_result(Result<transport::ConnId>::ok(1));
  auto r = rig.mgr->connect("198.18.0.2:7000", "198.18.0.2", 7000, rig.now);
  REQUIRE(r);
  rig.pump();  // the connection comes up (connect_async): the Hello goes
  const wire::Handshake hello = decoded(rig.last(wire::MsgType::Hello, 1));
  REQUIRE(hello.has_nonce);
  CHECK_FALSE(hello.has_proof);  // nothing to prove over yet
  CHECK((hello.capabilities & wire::kCapAuth) != 0);
  const wire::AuthNonce na = nonce(40);
  const wire::AuthTranscript t{hello.auth_nonce, na, kOurEpoch, kPeerEpoch};
  rig.t.set_connect_result(Result<transport::ConnId>::ok(2));

  auto ack_with = [&](const std::string& secret, wire::AuthRole role) {
    wire::Handshake ack = base_handshake(kPeerEpoch, true);
    ack.has_nonce = ack.has_proof = true;
    ack.auth_nonce = na;
    ack.auth_proof = wire::make_auth_proof(bytes(secret), role, t);
    rig.t.inject_recv(1, header(wire::MsgType::HelloAck, 0), encode(ack));
    rig.pump();
  };
  SECTION("valid proof: lane Hello carries ours, then Up") {
    ack_with(kSecret, wire::AuthRole::Acceptor);
    rig.pump();  // the lane's connection comes up (connect_async): its Hello goes
    const wire::Handshake lane = decoded(rig.last(wire::MsgType::Hello, 2));
    REQUIRE(lane.has_proof);
    CHECK(lane.auth_nonce == hello.auth_nonce);
    CHECK(wire::verify_auth_proof(bytes(kSecret), wire::AuthRole::Initiator, t, lane.auth_proof));
    wire::Handshake lane_ack = base_handshake(kPeerEpoch, true);
    rig.t.inject_recv(2, header(wire::MsgType::HelloAck, 1), encode(lane_ack));
    rig.pump();
    CHECK(rig.ev.up.size() == 1);
  }
  SECTION("wrong secret: PermissionDenied, Goodbye says why, no lane dialled") {
    ack_with(kOther, wire::AuthRole::Acceptor);
    REQUIRE(rig.ev.down.size() == 1);
    CHECK(rig.ev.down[0].second == Status::PermissionDenied);
    CHECK(rig.last(wire::MsgType::Goodbye, 1).header.status == Status::PermissionDenied);
    CHECK(rig.count(wire::MsgType::Hello) == 1);
  }
  SECTION("an initiator-role proof reflected as the acceptor's is refused") {
    ack_with(kSecret, wire::AuthRole::Initiator);
    REQUIRE(rig.ev.down.size() == 1);
    CHECK(rig.ev.down[0].second == Status::PermissionDenied);
  }
  SECTION("an acceptor that does not authenticate is refused") {
    rig.t.inject_recv(1, header(wire::MsgType::HelloAck, 0), encode(base_handshake(kPeerEpoch, false)));
    rig.pump();
    REQUIRE(rig.ev.down.size() == 1);
    CHECK(rig.ev.down[0].second == Status::PermissionDenied);
    CHECK(rig.count(wire::MsgType::Hello) == 1);
  }
  SECTION("a PermissionDenied HelloAck fails the channel with that status") {
    rig.t.inject_recv(1, header(wire::MsgType::HelloAck, 0, Status::PermissionDenied),
                      encode(base_handshake(kPeerEpoch, false)));
    rig.pump();
    REQUIRE(rig.ev.down.size() == 1);
    CHECK(rig.ev.down[0].second == Status::PermissionDenied);
  }
}
