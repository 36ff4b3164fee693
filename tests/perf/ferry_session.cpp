#include "ferry_session.h"

#include <sched.h>

#include "daemon_cpu.h"

namespace ferry::bench {

Error attach_bench_client(const std::string& socket, const std::string& name, std::size_t tx_bytes,
                          std::size_t rx_bytes, std::unique_ptr<Client>* out, bool busy_poll) {
  AttachOptions a;
  a.socket_path = socket;
  a.name = name;
  a.busy_poll = busy_poll;  // --busy-poll: spinning on poll(), no doorbell wanted
  // Ask for more than the daemon default only when the run needs it;
  // round up to 1 MiB so the arena has slack for allocator headers.
  constexpr std::size_t kMiB = std::size_t{1} << 20;
  a.tx_bytes = tx_bytes == 0 ? 0 : (tx_bytes + 2 * kMiB) & ~(kMiB - 1);
  a.rx_bytes = rx_bytes == 0 ? 0 : (rx_bytes + 2 * kMiB) & ~(kMiB - 1);
  auto r = Client::attach(a);
  if (!r) {
    return Error(r.status, "cannot attach to ferryd at " + socket + ": " + std::string(to_string(r.status)) +
                               " (is ferryd running? pass --socket or set FERRY_SOCKET)");
  }
  *out = std::move(r.value);
  return {};
}

std::size_t wait_completions(Client& client, std::span<Completion> out, bool busy_poll) noexcept {
  const auto deadline = std::chrono::steady_clock::now() + kOpDeadline;
  if (busy_poll) {
    for (std::uint32_t spins = 1;; ++spins) {
      const std::size_t n = client.poll(out);
      if (n != 0) return n;
      ::sched_yield();
      // Check the daemon and the clock now and then, not every spin.
      if ((spins & 1023) == 0 && (client.state() != Status::Ok || std::chrono::steady_clock::now() >= deadline))
        return 0;
    }
  }
  for (;;) {
    const std::size_t n = client.wait(out, std::chrono::milliseconds(500));
    if (n != 0 || client.state() != Status::Ok) return n;
    if (std::chrono::steady_clock::now() >= deadline) return 0;
  }
}

void charge_daemons(ScenarioContext& ctx) {
  ctx.cpu().add_daemon(control_path_for(ctx.options().socket));
  ctx.cpu().add_daemon(control_path_for(ctx.options().server_socket));
}

Error size_fits(const Client& client, std::size_t size) {
  if (size <= client.max_message_bytes()) return {};
  return Error::bad_request("size " + std::to_string(size) + " exceeds the daemon's max message size (" +
                            std::to_string(client.max_message_bytes()) + " bytes)");
}

}  // namespace ferry::bench
