// The runtime directory and the two listening Unix sockets in it. Start-up
// only; an Error's message is for the log.
#pragma once

#include <sys/types.h>

#include <string>

#include "ferry/error.h"

namespace ferry::daemon {

// mkdir -p with mode 0755 for whatever is missing, then checks the
// directory itself: it must belong to root or to the user ferryd runs as,
// and group and others must not write to it (0755 or stricter). Whoever may
// write there could unlink ferryd.sock and put their own socket in its
// place, and every client would attach to them.
Error ensure_runtime_dir(const std::string& dir);

// Binds and listens on a Unix socket of `type` (SOCK_SEQPACKET or
// SOCK_STREAM) at `path` with mode 0660. An existing socket file is removed
// only when nobody is listening on it (a crashed daemon's leftover); a live
// one is an error ("already running"). Sets *fd to the listening socket.
// `file` (optional) records which file this daemon created, for unlink_ours.
struct SocketFile {
  std::string path;
  dev_t dev = 0;
  ino_t ino = 0;
};
Error listen_unix(const std::string& path, int type, int* fd, SocketFile* file = nullptr);

// Removes the socket file only if it is still the one we created: a daemon
// that lost its path to a newer one must not delete the newer one's socket.
void unlink_ours(const SocketFile& file);

}  // namespace ferry::daemon
