// Compiled by check_nodiscard.py, never linked: each DROP_* case throws
// away a Status or Result the API returns and must fail to compile under
// -Werror=unused-result; with no case defined every result is looked at and
// the file must compile (so a failure means the attribute, not a typo).
#include <cstdint>

#include "ferry/client.h"
#include "ferry/result.h"
#include "ferry/status.h"

namespace {

// No attribute of its own: only Status's [[nodiscard]] can catch the drop.
ferry::Status plain_status() { return ferry::Status::Busy; }
ferry::Result<int> plain_result() { return ferry::Result<int>::fail(ferry::Status::Busy); }

}  // namespace

int use(ferry::Client& client, ferry::EndpointId endpoint, const ferry::Buffer& buffer) {
#if defined(DROP_SEND)
  client.send(endpoint, buffer, 8, 1);
  return 0;
#elif defined(DROP_STATUS)
  plain_status();
  return 0;
#elif defined(DROP_RESULT)
  plain_result();
  return 0;
#else
  int failures = 0;
  if (client.send(endpoint, buffer, 8, 1) != ferry::Status::Ok) ++failures;
  if (plain_status() != ferry::Status::Ok) ++failures;
  if (!plain_result()) ++failures;
  return failures;
#endif
}
