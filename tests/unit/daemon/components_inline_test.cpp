// Inline deliveries (shm::kCqFlagInline) of one engine's datapath, driven
// directly (datapath_rig.h): a payload of at most kInlineMaxBytes travels in
// the server's CQ with its entry (no rx block), larger ones in blocks, in
// the order sent; the window of unreleased inline deliveries falls back to
// blocks when full and opens again when the client counts releases; a
// client that lies about its count only loses the inlining.
#include <catch2/catch.hpp>

#include "tests/unit/daemon/datapath_rig.h"

using namespace ferry;
using namespace ferry::daemon;
using namespace ferry::daemon::testing;

namespace {

bool is_inline(const shm::CqEntry& e) { return (e.flags & shm::kCqFlagInline) != 0; }

// A server that takes inline deliveries, a client with an endpoint to it.
struct InlineRig {
  Rig rig{100};
  TestClient& server = rig.attach(4u << 20, true);
  TestClient& client = rig.attach();
  const std::uint32_t ep = rig.connect(server, client);
};

}  // namespace

TEST_CASE_METHOD(InlineRig, "inline: small payloads ride in the CQ, larger ones in rx blocks, in order",
                 "[components]") {
  const std::string sizes[] = {std::string(1, 'a'), std::string(64, 'b'), std::string(shm::kInlineMaxBytes, 'c'),
                               std::string(shm::kInlineMaxBytes + 1, 'd'), std::string(100, 'e')};
  std::uint64_t ud = 10;
  for (const std::string& p : sizes) rig.send(client, ep, p, ud++);
  for (std::uint64_t u = 10; u < ud; ++u) REQUIRE(client.done(u).size() == 1);
  server.drain();
  std::vector<std::size_t> at;  // the Messages' places in what the server got
  for (std::size_t i = 0; i < server.got.size(); ++i)
    if (server.got[i].kind == static_cast<std::uint8_t>(shm::CqKind::Message)) at.push_back(i);
  REQUIRE(at.size() == 5);
  for (std::size_t k = 0; k < at.size(); ++k) {
    const shm::CqEntry& e = server.got[at[k]];
    INFO("message " << k << " of " << sizes[k].size() << " bytes");
    CHECK(e.length == sizes[k].size());
    CHECK(e.caller_flags == shm::kCallerLocal);
    if (sizes[k].size() <= shm::kInlineMaxBytes) {
      CHECK(is_inline(e));
      CHECK(e.offset == 0);
      CHECK(e.capacity == 0);
      CHECK(server.payloads[at[k]] == sizes[k]);
    } else {
      CHECK_FALSE(is_inline(e));
      CHECK(server.text(e.offset, e.length) == sizes[k]);
    }
  }
  CHECK(read(rig.counters.inline_deliveries) == 4);
  CHECK(read(rig.counters.messages) == 5);
}

TEST_CASE_METHOD(InlineRig, "inline: a Request rides inline too and its reply reaches the caller", "[components]") {
  const std::uint64_t resp = rig.call(client, ep, "ping", 64, 20);
  const auto reqs = server.inline_deliveries(shm::CqKind::Request);
  REQUIRE(reqs.size() == 1);
  CHECK(reqs[0].second == "ping");
  rig.reply(server, reqs[0].first.token, "pong!", 21);
  const auto d = client.done(20);
  REQUIRE(d.size() == 1);
  CHECK(static_cast<Status>(d[0].status) == Status::Ok);
  CHECK(client.text(resp, 5) == "pong!");
}

TEST_CASE_METHOD(InlineRig, "inline: past the window deliveries use blocks; counted releases open it again",
                 "[components]") {
  const std::uint32_t window = shm::inline_window(server.session->cq.capacity());
  REQUIRE(window >= 8);
  std::uint64_t ud = 1;
  for (std::uint32_t i = 0; i < window + 5; ++i) rig.send(client, ep, "m" + std::to_string(i), ud++);
  const auto msgs = server.deliveries(shm::CqKind::Message);
  REQUIRE(msgs.size() == window + 5);
  for (std::uint32_t i = 0; i < msgs.size(); ++i) {
    INFO("message " << i);
    CHECK(is_inline(msgs[i]) == (i < window));
    if (i >= window) CHECK(server.text(msgs[i].offset, msgs[i].length) == "m" + std::to_string(i));
  }
  // Three released: three more go inline, then blocks again.
  server.release_inline(3);
  for (std::uint32_t i = 0; i < 5; ++i) rig.send(client, ep, "n" + std::to_string(i), ud++);
  const auto more = server.deliveries(shm::CqKind::Message);
  REQUIRE(more.size() == window + 10);
  for (std::uint32_t i = 0; i < 5; ++i) CHECK(is_inline(more[window + 5 + i]) == (i < 3));
  CHECK(read(rig.counters.inline_deliveries) == window + 3);
  for (std::uint64_t u = 1; u < ud; ++u) REQUIRE(client.done(u).size() == 1);
}

TEST_CASE_METHOD(InlineRig, "inline: a client that claims releases it never had gets blocks, not harm",
                 "[components]") {
  rig.send(client, ep, "first", 1);
  // Claims far more released than were ever posted.
  server.release_inline(1000);
  for (std::uint32_t i = 0; i < shm::inline_window(server.session->cq.capacity()) + 2; ++i)
    rig.send(client, ep, "x", 10 + i);
  const auto msgs = server.deliveries(shm::CqKind::Message);
  std::size_t blocks = 0;
  for (const auto& m : msgs) blocks += is_inline(m) ? 0 : 1;
  // The first window's credits were taken before the lie was read; once
  // they ran out the count was read, looked impossible, and blocks followed.
  CHECK(blocks >= 2);
  CHECK(msgs.size() == shm::inline_window(server.session->cq.capacity()) + 3);
}
