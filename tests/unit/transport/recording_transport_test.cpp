// The recording transport behaves like a Transport and shows what was sent.
#include <array>
#include <vector>

#include <catch2/catch.hpp>

#include "transport/testing/recording_transport.h"

using namespace ferry;
using namespace ferry::transport;
using ferry::transport::testing::RecordingTransport;

TEST_CASE("recording transport records sends and replays scripted completions", "[transport]") {
  RecordingTransport t;
  Transport& iface = t;  // used only through the interface, like protocol code would
  const std::array<std::byte, 3> payload{std::byte{7}, std::byte{8}, std::byte{9}};
  std::array<SendWr, 2> wrs;
  for (std::size_t i = 0; i < wrs.size(); ++i) {
    wrs[i].conn = 5;
    wrs[i].header.type = wire::MsgType::Send;
    wrs[i].header.seq = i;
    wrs[i].payload = payload.data();
    wrs[i].payload_len = static_cast<std::uint32_t>(payload.size());
    wrs[i].user_data = 40 + i;
  }
  t.auto_complete_sends(true);
  const PostResult r = iface.post_send(wrs);
  REQUIRE(r.accepted == 2);
  REQUIRE(t.sent().size() == 2);
  CHECK(t.sent()[1].header.seq == 1);
  CHECK(t.sent()[1].header.payload_len == 3);
  CHECK(t.sent()[0].payload == std::vector<std::byte>(payload.begin(), payload.end()));

  wire::Header h;
  h.type = wire::MsgType::Credit;
  h.credit = 16;
  t.inject_recv(5, h);
  std::array<Completion, 8> out;
  REQUIRE(iface.poll(out) == 3);
  CHECK(out[0].kind == CompletionKind::SendDone);
  CHECK(out[1].user_data == 41);
  CHECK(out[2].kind == CompletionKind::Recv);
  CHECK(out[2].header.credit == 16);

  t.limit_accepts(1);
  CHECK(iface.post_send(wrs).accepted == 1);
  CHECK(iface.post_send(wrs).status == Status::Busy);
  CHECK(iface.register_memory(nullptr, 0).status == Status::NotSupported);
}
