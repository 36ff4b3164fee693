// Verifiable traffic for the integration tests: every payload is a pure
// function of (sender, sequence) so any receiver can check it byte for byte,
// and payloads of 32 bytes or more carry a header with sender, sequence,
// length and a checksum. Plus the process roles built on it (sink server,
// sender, RPC server, caller), each returning an exit code.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

#include "ferry/client.h"
#include "tests/integration/harness.h"

namespace ferry::itest {

inline constexpr std::uint32_t kHeaderBytes = 32;

void fill_payload(std::byte* p, std::uint32_t len, std::uint32_t sender, std::uint64_t seq) noexcept;
bool check_payload(const std::byte* p, std::uint32_t len, std::uint32_t sender, std::uint64_t seq) noexcept;

// One echo call over `ep` of `len` bytes of fill_payload(sender, tag), its
// reply checked: Ok; the call's status (call_once); NoMemory when the
// buffers cannot be had; ProtocolError for a reply of other length or bytes.
Status echo_checked(Client& c, EndpointId ep, std::uint32_t len, std::uint32_t sender, std::uint64_t tag,
                    std::chrono::milliseconds within = 5s);
// Reads (sender, seq) from a header and checks its length and checksum.
bool read_header(const std::byte* p, std::uint32_t len, std::uint32_t& sender, std::uint64_t& seq) noexcept;
// Mixed sizes 1 B .. max; seq 0 always carries a header.
std::uint32_t size_for(std::uint64_t seq, std::uint32_t max) noexcept;
// The "xform" service: each byte XOR 0xA5. "echo": identity.
inline constexpr std::byte kXformKey{0xA5};
bool check_xformed(const std::byte* p, std::uint32_t len, std::uint32_t sender, std::uint64_t seq) noexcept;

struct SinkSpec {
  std::string socket;
  std::string service = "sink";
  std::uint32_t senders = 0;
  std::uint64_t per_sender = 0;
};
// Serves spec.service, signals `ready`, verifies every message (checksum,
// bytes, per-sender order) until all arrived.
int run_sink(const SinkSpec& spec, const Gate& ready);

struct SenderSpec {
  std::string socket;
  std::string target = "sink";
  std::uint32_t sender = 0;
  std::uint64_t count = 0;
  std::uint32_t window = 8;
};
int run_sender(const SenderSpec& spec);

struct RpcServerSpec {
  std::string socket;
  std::string name = "rpc-server";
  bool hold = false;  // never reply (requests stay in flight): count them and signal `held` per request
  std::chrono::seconds give_up_after{40};  // fails "never told to stop" past it
};
// Serves "echo" and "xform" (or, with hold, "hold") until `stop` is ready.
int run_rpc_server(const RpcServerSpec& spec, const Gate& ready, const Gate& stop, const Gate* held = nullptr);

struct CallerSpec {
  std::string socket;
  std::string target = "xform";
  std::uint32_t caller = 0;
  std::uint64_t count = 0;  // calls to make (after `stop`, when given)
  std::uint32_t concurrency = 4;
  std::uint32_t max_size = 0;      // 0: the client's max message
  const Gate* progress = nullptr;  // signalled once after `progress_after` verified calls
  std::uint64_t progress_after = 0;
  const Gate* stop = nullptr;  // when set: call until it is ready, then `count` more
};
int run_caller(const CallerSpec& spec);

// Call timeouts (traffic_timeout.cpp). The server serves `service`: a
// request whose first byte is 0 is held until `release` is ready, then
// replied late (that Reply must complete CallerGone; `late_done` signalled);
// other requests are echoed at once. Exits 0 once the late reply is done and
// `stop` is ready.
struct LateServerSpec {
  std::string socket;
  std::string service = "late";
};
int run_late_server(const LateServerSpec& spec, const Gate& ready, const Gate& release, const Gate& late_done,
                    const Gate& stop);
// One held call with `timeout` (0: the daemon's call-timeout-ms) must
// complete Timeout, no sooner than expect_ms; `timed_out` is signalled;
// after `late_done` the response buffer must be untouched; then a prompt
// call on the same endpoint completes Ok with its echo.
struct TimeoutCallerSpec {
  std::string socket;
  std::string target = "late";
  std::chrono::milliseconds timeout{300};
  std::chrono::milliseconds expect_ms{300};
  std::uint32_t request_bytes = 64;
  std::uint32_t response_bytes = 4096;
};
int run_timeout_caller(const TimeoutCallerSpec& spec, const Gate& timed_out, const Gate& late_done);

}  // namespace ferry::itest
