// Shared pieces of the scenarios that go through ferryd: attaching with
// a clear error, waiting for completions with a deadline, and charging the
// daemon(s) CPU.
#pragma once

#include <chrono>
#include <memory>
#include <span>
#include <string>

#include "ferry/client.h"
#include "ferry/error.h"
#include "scenario.h"

namespace ferry::bench {

// How long one operation may take before the run fails instead of hanging.
inline constexpr std::chrono::milliseconds kOpDeadline{10000};
// Completions taken per poll.
inline constexpr std::size_t kCompletionBatch = 64;

// Attaches to `socket` (the daemon's client socket) with a tx arena big
// enough for `tx_bytes` of buffers into *out; on failure the Error has the
// attach's status and its message names the socket.
Error attach_bench_client(const std::string& socket, const std::string& name, std::size_t tx_bytes,
                          std::size_t rx_bytes, std::unique_ptr<Client>* out, bool busy_poll = false);

// Waits for at least one completion, up to kOpDeadline. 0 on timeout or a
// gone daemon (check client.state()). busy_poll spins on poll() instead of
// sleeping on the completion doorbell (--busy-poll).
std::size_t wait_completions(Client& client, std::span<Completion> out, bool busy_poll) noexcept;

// Charges the daemons behind these client sockets (deduplicated).
void charge_daemons(ScenarioContext& ctx);

// Checks the size against the daemon's message limit (BadRequest past it).
Error size_fits(const Client& client, std::size_t size);

}  // namespace ferry::bench
