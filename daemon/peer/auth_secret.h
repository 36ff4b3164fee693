// Loading the peer shared secret (auth-secret-file) once at start-up.
#pragma once

#include <optional>
#include <string>

namespace ferry::daemon::peer {

// Longest secret file accepted; a secret is a line of text, not a key store.
inline constexpr std::size_t kMaxAuthSecretBytes = 4096;

// Reads `path` into `out`: the file's bytes with trailing newlines (\n, \r)
// trimmed, at least wire::kMinAuthSecretBytes and at most
// kMaxAuthSecretBytes. An empty path leaves `out` empty (auth off). Returns
// a one-line error naming the file and the key (never the contents), or
// nullopt on success. The file's mode is checked by check_system().
std::optional<std::string> load_auth_secret(const std::string& path, std::string& out);

}  // namespace ferry::daemon::peer
