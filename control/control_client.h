// Blocking control-socket client: connect, send one request line, wait for
// one response line with a deadline, parse. Used by ferryctl, ferry-bench
// and the tests. No exceptions: every failure is a status and a message.
#pragma once

#include <chrono>
#include <string>
#include <string_view>

#include "base/json.h"
#include "control/control_protocol.h"

namespace ferry::control {

enum class CallStatus {
  Ok,             // the daemon answered ok:true; `result` holds its value
  DaemonError,    // the daemon answered ok:false; `error` holds its message
  ConnectFailed,  // no socket, nobody listening, permission, path too long
  IoError,        // send/recv failed or the daemon closed before answering
  Timeout,        // no complete response line before the deadline
  BadResponse,    // the line was not a valid response (or too long)
};

std::string_view to_string(CallStatus s) noexcept;

struct CallResult {
  CallStatus status = CallStatus::IoError;
  json::Value result;  // when status == Ok
  std::string error;   // otherwise: a one-line message naming the cause,
                       // e.g. "cannot connect to /x: No such file or directory"

  bool ok() const noexcept { return status == CallStatus::Ok; }
};

inline constexpr std::chrono::milliseconds kDefaultCallTimeout{5000};

// One request on a fresh connection to `socket_path`; the connection is
// closed before returning. `timeout` bounds the whole exchange.
CallResult call(const std::string& socket_path, const Request& request,
                std::chrono::milliseconds timeout = kDefaultCallTimeout);
CallResult call(const std::string& socket_path, Command command,
                std::chrono::milliseconds timeout = kDefaultCallTimeout);

}  // namespace ferry::control
