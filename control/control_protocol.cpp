// Encoding and decoding of control-socket request and response lines.
#include "control/control_protocol.h"

#include <array>
#include <cstdlib>
#include <utility>

namespace ferry::control {
namespace {

constexpr std::array<std::pair<Command, std::string_view>, 7> kCommandNames{{
    {Command::Status, "status"},
    {Command::Clients, "clients"},
    {Command::Counters, "counters"},
    {Command::Peers, "peers"},
    {Command::Channels, "channels"},
    {Command::Drain, "drain"},
    {Command::Resume, "resume"},
}};

std::string_view strip_newline(std::string_view line) {
  if (!line.empty() && line.back() == '\n') line.remove_suffix(1);
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  return line;
}

Error parse_line_object(std::string_view line, json::Object* out) {
  line = strip_newline(line);
  if (line.size() >= kMaxLineBytes) {
    return Error::bad_request("line longer than " + std::to_string(kMaxLineBytes) + " bytes");
  }
  json::ParseError pe;
  auto v = json::parse(line, &pe);
  if (!v) return Error::bad_request("invalid JSON at offset " + std::to_string(pe.offset) + ": " + pe.message);
  json::Object* o = v->as_object();
  if (o == nullptr) return Error::bad_request("expected a JSON object");
  *out = std::move(*o);
  return {};
}

std::string line_of(const json::Value& v) {
  std::string s = json::dump(v);
  s.push_back('\n');
  return s;
}

}  // namespace

std::string_view to_string(Command c) noexcept {
  for (const auto& [cmd, name] : kCommandNames) {
    if (cmd == c) return name;
  }
  return "unknown";
}

std::optional<Command> command_from_string(std::string_view name) noexcept {
  for (const auto& [cmd, n] : kCommandNames) {
    if (n == name) return cmd;
  }
  return std::nullopt;
}

Request make_request(Command c, json::Object args) { return Request{std::string(to_string(c)), std::move(args)}; }

std::string encode_request(const Request& r) {
  json::Object o = r.args;
  o["cmd"] = r.cmd;  // cmd wins over any stray "cmd" in args
  return line_of(json::Value(std::move(o)));
}

std::string encode_response(const Response& r) {
  json::Object o;
  o["ok"] = r.ok;
  if (r.ok) {
    o["result"] = r.result;
  } else {
    o["error"] = r.error;
  }
  return line_of(json::Value(std::move(o)));
}

std::string encode_ok(json::Value result) { return encode_response(Response{true, std::move(result), {}}); }

std::string encode_error(std::string_view message) {
  return encode_response(Response{false, {}, std::string(message)});
}

Error decode_request(std::string_view line, Request* out) {
  json::Object o;
  if (Error e = parse_line_object(line, &o); e.failed()) return e;
  auto it = o.find("cmd");
  if (it == o.end()) return Error::bad_request("request has no \"cmd\"");
  const std::string* cmd = it->second.as_string();
  if (cmd == nullptr || cmd->empty()) return Error::bad_request("\"cmd\" must be a non-empty string");
  Request r;
  r.cmd = *cmd;
  o.erase(it);
  r.args = std::move(o);
  *out = std::move(r);
  return {};
}

Error decode_response(std::string_view line, Response* out) {
  json::Object o;
  if (Error e = parse_line_object(line, &o); e.failed()) return e;
  const json::Value* ok = nullptr;
  if (auto it = o.find("ok"); it != o.end()) ok = &it->second;
  if (ok == nullptr || !ok->is_bool()) return Error::bad_request("response has no boolean \"ok\"");
  Response r;
  r.ok = *ok->as_bool();
  if (r.ok) {
    auto it = o.find("result");
    if (it == o.end()) return Error::bad_request("ok response has no \"result\"");
    r.result = std::move(it->second);
  } else {
    auto it = o.find("error");
    const std::string* msg = it == o.end() ? nullptr : it->second.as_string();
    if (msg == nullptr) return Error::bad_request("error response has no string \"error\"");
    r.error = *msg;
  }
  *out = std::move(r);
  return {};
}

LineReader::State LineReader::next(std::string* line) {
  const auto nl = buf_.find('\n');
  if (nl == std::string::npos) {
    return buf_.size() >= kMaxLineBytes ? State::TooLong : State::NeedMore;
  }
  if (nl + 1 > kMaxLineBytes) return State::TooLong;
  line->assign(buf_, 0, nl);
  buf_.erase(0, nl + 1);
  return State::Line;
}

std::string resolve_control_path(const char* control_env, const char* socket_env) {
  if (control_env != nullptr && *control_env != '\0') return control_env;
  if (socket_env != nullptr && *socket_env != '\0') {
    std::string_view sock(socket_env);
    const auto slash = sock.rfind('/');
    if (slash == std::string_view::npos) return std::string(kControlSocketName);
    return std::string(sock.substr(0, slash + 1)) + std::string(kControlSocketName);
  }
  return std::string(kDefaultControlPath);
}

std::string default_control_path() {
  return resolve_control_path(std::getenv("FERRY_CONTROL"), std::getenv("FERRY_SOCKET"));
}

}  // namespace ferry::control
