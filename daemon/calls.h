// Calls delivered to a server and not yet replied to, keyed by the request
// token the server must echo. Tokens are daemon-generated: a bijective mix
// of a counter and a per-daemon key, so they never repeat within a daemon's
// life and are not guessable from one another. Engine thread only.
#pragma once

#include <cstdint>
#include <unordered_map>

namespace ferry::daemon {

struct PendingCall {
  std::uint32_t caller = 0;    // client id
  std::uint32_t endpoint = 0;  // caller's endpoint id
  std::uint32_t server = 0;    // client id the Request was delivered to
  std::uint32_t service = 0;
  std::uint64_t user_data = 0;
  std::uint64_t resp_offset = 0;
  std::uint32_t resp_length = 0;
  bool caller_gone = false;  // caller closed the endpoint or died: reply gets CallerGone
};

class TokenSource {
 public:
  explicit TokenSource(std::uint64_t key) noexcept : key_(key) {}
  std::uint64_t next() noexcept;

 private:
  std::uint64_t key_;
  std::uint64_t counter_ = 0;
};

using CallTable = std::unordered_map<std::uint64_t, PendingCall>;

}  // namespace ferry::daemon
