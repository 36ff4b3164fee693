// Loading the peer shared secret (auth-secret-file) once at start-up.
#pragma once

#include <cstddef>
#include <string>

#include "ferry/error.h"

namespace ferry::daemon::peer {

// Longest secret file accepted; a secret is a line of text, not a key store.
inline constexpr std::size_t kMaxAuthSecretBytes = 4096;

// Opens `path` once and does every check on that descriptor (no stat-then-
// open race): a regular file, owned by root or by the user ferryd runs as,
// that group and others cannot read (mode 0600 or 0400), holding at least
// wire::kMinAuthSecretBytes and at most kMaxAuthSecretBytes after trailing
// newlines (\n, \r) are trimmed. Fills `out` with the secret. An empty path
// leaves `out` empty (auth off). Returns BadRequest with a one-line message
// naming the file and the key (never the contents), or Ok.
[[nodiscard]] Error load_auth_secret(const std::string& path, std::string& out);

}  // namespace ferry::daemon::peer
