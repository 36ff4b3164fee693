#include "daemon_cpu.h"

#include "control/control_client.h"

namespace ferry::bench {

std::optional<std::uint64_t> read_daemon_cpu_us(const std::string& control_path) {
  // Short deadline: this brackets a measured phase, and a daemon that does
  // not answer just means its CPU is reported as not included.
  const auto reply = control::call(control_path, control::Command::Status, std::chrono::milliseconds(2000));
  if (!reply.ok()) return std::nullopt;
  const json::Value* user = reply.result.find("cpu_user_us");
  const json::Value* sys = reply.result.find("cpu_sys_us");
  if (!user || !sys) return std::nullopt;
  const auto u = user->as_uint();
  const auto s = sys->as_uint();
  if (!u || !s) return std::nullopt;
  return *u + *s;
}

std::string control_path_for(const std::string& client_socket) {
  const auto slash = client_socket.rfind('/');
  if (slash == std::string::npos) return std::string(control::kControlSocketName);
  return client_socket.substr(0, slash + 1) + std::string(control::kControlSocketName);
}

}  // namespace ferry::bench
