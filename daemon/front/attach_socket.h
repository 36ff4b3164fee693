// Raw socket helpers for the attach handshake: SO_PEERCRED, receiving one
// SEQPACKET message while closing any fds a hostile client slips in, and
// sending the reply with SCM_RIGHTS. Failures come back as an Error whose
// message is the system's reason (strerror), for the log.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>

#include "ferry/error.h"
#include "ferry/result.h"

namespace ferry::daemon {

struct PeerCred {
  pid_t pid = 0;
  uid_t uid = 0;
  gid_t gid = 0;
};
// PermissionDenied when SO_PEERCRED cannot be read: nobody is let in unnamed.
[[nodiscard]] Error peer_cred(int fd, PeerCred* out);

// recvmsg(MSG_DONTWAIT). The bytes received (the real message length, which
// may exceed `cap`: then it was truncated), 0 on EOF; Busy when nothing is
// waiting (EAGAIN, EINTR), PeerReset for any other failure. Any fds
// received are closed.
[[nodiscard]] Result<std::size_t> recv_message(int fd, void* buf, std::size_t cap) noexcept;

// sendmsg of one message with `nfds` fds attached (0 for none, at most 8).
// Ok when sent whole; PeerReset when the peer cannot take it (gone, or its
// buffer full: the socket is non-blocking); BadRequest for more than 8 fds.
[[nodiscard]] Error send_message(int fd, const void* buf, std::size_t len, const int* fds, std::size_t nfds);

}  // namespace ferry::daemon
