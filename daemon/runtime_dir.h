// The runtime directory and the two listening Unix sockets in it. Start-up
// only; errors come back as text for the log.
#pragma once

#include <string>

namespace ferry::daemon {

// mkdir -p with mode 0755 for whatever is missing.
bool ensure_runtime_dir(const std::string& dir, std::string* error);

// Binds and listens on a Unix socket of `type` (SOCK_SEQPACKET or
// SOCK_STREAM) at `path` with mode 0660. An existing socket file is removed
// only when nobody is listening on it (a crashed daemon's leftover); a live
// one is an error ("already running"). Returns the fd or -1.
int listen_unix(const std::string& path, int type, std::string* error);

}  // namespace ferry::daemon
