// control/control_protocol and control/control_client: line encoding,
// decoding, framing, path resolution, and a real client against a fake server.
#include <catch2/catch.hpp>

#include <chrono>
#include <string>
#include <thread>

#include "control/control_client.h"
#include "control/control_protocol.h"
#include "fake_control_server.h"

using namespace ferry;
using namespace ferry::control;

TEST_CASE("protocol: command names round trip and unknown names are nullopt", "[control]") {
  for (Command c : {Command::Status, Command::Clients, Command::Counters, Command::Peers, Command::Channels,
                    Command::Drain, Command::Resume}) {
    CHECK(command_from_string(to_string(c)) == c);
  }
  CHECK(to_string(Command::Status) == "status");
  CHECK(to_string(Command::Drain) == "drain");
  CHECK(to_string(Command::Resume) == "resume");
  CHECK_FALSE(command_from_string("Status").has_value());
  CHECK_FALSE(command_from_string("").has_value());
}

TEST_CASE("protocol: requests encode as one line and decode back", "[control]") {
  json::Object args;
  args["verbose"] = true;
  args["limit"] = 3;
  const std::string line = encode_request(make_request(Command::Clients, args));
  CHECK(line == "{\"cmd\":\"clients\",\"limit\":3,\"verbose\":true}\n");
  Request r;
  REQUIRE(decode_request(line, &r).ok());
  CHECK(r.cmd == "clients");
  CHECK(r.command() == Command::Clients);
  CHECK(r.args.size() == 2);
  CHECK(r.args.at("limit").as_int() == 3);

  Request unknown;
  REQUIRE(decode_request(R"({"cmd":"frobnicate"})", &unknown).ok());  // unknown commands decode: the server answers
  CHECK_FALSE(unknown.command().has_value());

  for (const char* bad : {"", "{}", "[]", "\"status\"", R"({"cmd":1})", R"({"cmd":""})", R"({"cmd":"status",})",
                          R"({"cmd":"a","cmd":"b"})", "{\"cmd\":\"status\"}\n{\"cmd\":\"x\"}"}) {
    INFO(bad);
    Request out;
    const Error e = decode_request(bad, &out);
    CHECK(e.status() == Status::BadRequest);
    CHECK_FALSE(e.message().empty());
  }
}

TEST_CASE("protocol: responses encode and decode, ok and error", "[control]") {
  json::Value result;
  result["version"] = "0.1.0";
  const std::string ok = encode_ok(result);
  CHECK(ok == "{\"ok\":true,\"result\":{\"version\":\"0.1.0\"}}\n");
  Response r;
  REQUIRE(decode_response(ok, &r).ok());
  CHECK(r.ok);
  CHECK(*r.result.find("version")->as_string() == "0.1.0");

  const std::string bad = encode_error("unknown command: \"drain\"\n");
  CHECK(bad.find('\n') == bad.size() - 1);  // the message's newline is escaped
  Response e;
  REQUIRE(decode_response(bad, &e).ok());
  CHECK_FALSE(e.ok);
  CHECK(e.error == "unknown command: \"drain\"\n");

  for (const char* invalid : {R"({"result":1})", R"({"ok":"yes","result":1})", R"({"ok":true})", R"({"ok":false})",
                              R"({"ok":false,"error":3})", "nonsense"}) {
    INFO(invalid);
    Response out;
    CHECK(decode_response(invalid, &out).failed());
  }
  // Lines at the limit: the limit counts the newline.
  const std::string filler(kMaxLineBytes - 40, 'x');
  std::string big = encode_ok(json::Value(filler));
  REQUIRE(big.size() <= kMaxLineBytes);
  Response out;
  CHECK(decode_response(big, &out).ok());
  big = encode_ok(json::Value(std::string(kMaxLineBytes, 'x')));
  const Error too_long = decode_response(big, &out);
  CHECK(too_long.failed());
  CHECK(too_long.message().find("longer") != std::string::npos);
}

TEST_CASE("protocol: LineReader splits chunks and bounds line length", "[control]") {
  LineReader r;
  std::string line;
  CHECK(r.next(&line) == LineReader::State::NeedMore);
  r.feed("{\"a\":");
  CHECK(r.next(&line) == LineReader::State::NeedMore);
  r.feed("1}\n{\"b\"");
  REQUIRE(r.next(&line) == LineReader::State::Line);
  CHECK(line == "{\"a\":1}");
  CHECK(r.next(&line) == LineReader::State::NeedMore);
  r.feed(":2}\n\n");
  REQUIRE(r.next(&line) == LineReader::State::Line);
  CHECK(line == "{\"b\":2}");
  REQUIRE(r.next(&line) == LineReader::State::Line);
  CHECK(line.empty());

  LineReader exact;
  exact.feed(std::string(kMaxLineBytes - 1, 'x') + "\n");
  CHECK(exact.next(&line) == LineReader::State::Line);
  LineReader over;
  over.feed(std::string(kMaxLineBytes, 'x'));
  CHECK(over.next(&line) == LineReader::State::TooLong);
  LineReader over_nl;
  over_nl.feed(std::string(kMaxLineBytes, 'x') + "\n");
  CHECK(over_nl.next(&line) == LineReader::State::TooLong);
}

TEST_CASE("protocol: control path resolution", "[control]") {
  CHECK(resolve_control_path("/a/b.sock", "/x/ferryd.sock") == "/a/b.sock");
  CHECK(resolve_control_path("", "/x/y/ferryd.sock") == "/x/y/control.sock");
  CHECK(resolve_control_path(nullptr, "/x/ferryd.sock") == "/x/control.sock");
  CHECK(resolve_control_path(nullptr, "ferryd.sock") == "control.sock");
  CHECK(resolve_control_path(nullptr, nullptr) == "/run/ferry/control.sock");
  CHECK(resolve_control_path(nullptr, "") == "/run/ferry/control.sock");
}

TEST_CASE("client: real socket round trips against a fake server", "[control][client]") {
  test::FakeControlServer server({
      {"status", R"({"ok":true,"result":{"version":"9.9","counters":{"rnr_naks":0}}})"},
      {"clients", test::FakeControlServer::kCloseWithoutReply},
      {"peers", test::FakeControlServer::kNeverReply},
      {"channels", "this is not json"},
  });
  auto r = call(server.socket_path(), Command::Status);
  REQUIRE(r.ok());
  CHECK(*r.result.find("version")->as_string() == "9.9");

  r = call(server.socket_path(), Command::Drain);
  CHECK(r.status == CallStatus::DaemonError);
  CHECK(r.error == "unknown command: drain");

  r = call(server.socket_path(), Command::Clients);
  CHECK(r.status == CallStatus::IoError);
  CHECK(r.error.find("closed") != std::string::npos);

  r = call(server.socket_path(), Command::Channels);
  CHECK(r.status == CallStatus::BadResponse);

  const auto t0 = std::chrono::steady_clock::now();
  r = call(server.socket_path(), Command::Peers, std::chrono::milliseconds(200));
  const auto took = std::chrono::steady_clock::now() - t0;
  CHECK(r.status == CallStatus::Timeout);
  CHECK(took >= std::chrono::milliseconds(190));
  CHECK(took < std::chrono::seconds(3));

  // The fake server's thread records "peers" when it reads it, which a
  // loaded machine may do after the client's 200 ms are up: wait for it.
  const auto by = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (server.commands().size() < 5 && std::chrono::steady_clock::now() < by)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  CHECK(server.commands() == std::vector<std::string>{"status", "drain", "clients", "channels", "peers"});
}

TEST_CASE("client: unreachable sockets fail with the path and errno text", "[control][client]") {
  auto r = call("/nonexistent-ferry-dir/control.sock", Command::Status);
  CHECK(r.status == CallStatus::ConnectFailed);
  CHECK(r.error == "cannot connect to /nonexistent-ferry-dir/control.sock: No such file or directory");
  r = call(std::string(200, 'x'), Command::Status);
  CHECK(r.status == CallStatus::ConnectFailed);
}
