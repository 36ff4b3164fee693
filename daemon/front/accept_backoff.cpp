#include "daemon/front/accept_backoff.h"

#include <spdlog/spdlog.h>

#include <cerrno>
#include <cstring>

namespace ferry::daemon {

bool AcceptBackoff::is_resource_error(int err) noexcept {
  return err == EMFILE || err == ENFILE || err == ENOBUFS || err == ENOMEM;
}

std::chrono::milliseconds AcceptBackoff::on_failure(int err) {
  ++failures_;
  ++unlogged_;
  const auto now = std::chrono::steady_clock::now();
  if (last_log_ == std::chrono::steady_clock::time_point{} || now - last_log_ >= kLogEvery) {
    spdlog::warn(
        "{}: accept failed: {} ({} time{} since the last such line); pausing accepts for {} ms. Descriptors: see "
        "max-clients, control-max-connections and the process's limit (LimitNOFILE=)",
        listener_, std::strerror(err), unlogged_, unlogged_ == 1 ? "" : "s", wait_.peek().count());
    last_log_ = now;
    unlogged_ = 0;
  }
  return wait_.next();
}

}  // namespace ferry::daemon
