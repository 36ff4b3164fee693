// The control-socket protocol shared by ferryd (server) and ferryctl,
// ferry-bench and the tests (clients).
//
// Transport: a Unix stream socket at RUNTIME_DIR/control.sock. Framing: JSON
// lines, one compact JSON object per line, each at most kMaxLineBytes
// including the '\n'. A client sends one request line and reads one response
// line; a server may keep the connection open for further requests.
//
//   request : {"cmd":"<name>", ...args}
//   response: {"ok":true,"result":<value>}  or  {"ok":false,"error":"<message>"}
//
// A server answers an unknown "cmd" with ok:false and an error naming it
// (e.g. "unknown command: drain"), never by closing the socket, so a newer
// ferryctl against an older ferryd prints a clean message.
//
// Result shapes (what ferryctl renders; fields beyond these are allowed and
// shown where a renderer is generic):
//   status   : {"version":str, "uptime_s":int, "transport":str,
//               "clients":int (count of attached clients),
//               "peers":[{"addr":str, "state":str, ...}],
//               "counters":{name:int, ...}  (includes rnr_naks, retransmits,
//                            recoveries, credit_stalls, window_stalls),
//               "cpu_user_us":int, "cpu_sys_us":int (daemon process CPU),
//               "pid":int, "runtime_dir":str, "listen":str (optional)}
//   clients  : [{"id":int, "pid":int, "uid":int, "name":str,
//                "memory":int (segment bytes), "endpoints":int,
//                "services":[str] or int}]
//   counters : {name:int, ...}   (same as status.counters)
//   peers    : [{"addr":str, "state":str, "epoch":int, ...}]
//   channels : [{"peer":str, "state":str, "qps":int, ...}]
//   drain    : {"draining":true}    (privileged: root, ferryd's user or admin-group)
//   resume   : {"draining":false}   (privileged; undoes drain)
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "base/json.h"
#include "ferry/error.h"

namespace ferry::control {

inline constexpr std::size_t kMaxLineBytes = 64 * 1024;
inline constexpr std::string_view kControlSocketName = "control.sock";
inline constexpr std::string_view kDefaultControlPath = "/run/ferry/control.sock";

enum class Command {
  Status,
  Clients,
  Counters,
  Peers,
  Channels,
  Drain,
  Resume,
};

std::string_view to_string(Command c) noexcept;
// nullopt for a name that is not a known command.
std::optional<Command> command_from_string(std::string_view name) noexcept;

struct Request {
  std::string cmd;    // kept as text: unknown names travel to the server
  json::Object args;  // every member but "cmd"

  // The known command, or nullopt when cmd names none.
  std::optional<Command> command() const noexcept { return command_from_string(cmd); }
};

struct Response {
  bool ok = false;
  json::Value result;  // meaningful when ok
  std::string error;   // meaningful when !ok
};

Request make_request(Command c, json::Object args = {});

// Each encoder returns one complete line, '\n' included.
std::string encode_request(const Request& r);
std::string encode_response(const Response& r);
std::string encode_ok(json::Value result);
std::string encode_error(std::string_view message);

// Decoders take one line, with or without its trailing '\n', and fill *out;
// a line they cannot decode is a BadRequest with a one-line reason.
Error decode_request(std::string_view line, Request* out);
Error decode_response(std::string_view line, Response* out);

// Splits a byte stream into lines, bounded by kMaxLineBytes, for servers and
// clients that read in chunks.
class LineReader {
 public:
  enum class State { Line, NeedMore, TooLong };

  void feed(std::string_view bytes) { buf_.append(bytes); }
  // Line: *line holds the next line without '\n'. TooLong: the buffered
  // data exceeds the limit without a newline; the connection should be
  // answered with an error and closed.
  State next(std::string* line);
  std::size_t buffered() const noexcept { return buf_.size(); }

 private:
  std::string buf_;
};

// The control socket path a client should use: `control_env` ($FERRY_CONTROL)
// when set and non-empty, else dirname(`socket_env`)/control.sock when
// $FERRY_SOCKET is set, else kDefaultControlPath.
std::string resolve_control_path(const char* control_env, const char* socket_env);
// Same, reading the environment.
std::string default_control_path();

}  // namespace ferry::control
