// Raw socket helpers for the attach handshake: SO_PEERCRED, receiving one
// SEQPACKET message while closing any fds a hostile client slips in, and
// sending the reply with SCM_RIGHTS.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>

namespace ferry::daemon {

struct PeerCred {
  pid_t pid = 0;
  uid_t uid = 0;
  gid_t gid = 0;
};
bool peer_cred(int fd, PeerCred* out) noexcept;

// recvmsg(MSG_DONTWAIT). Returns bytes received (the real message length,
// which may exceed `cap`: then it was truncated), 0 on EOF, -1 with errno.
// Any fds received are closed.
long recv_message(int fd, void* buf, std::size_t cap) noexcept;

// sendmsg of one message with `nfds` fds attached (0 for none). true when sent whole.
bool send_message(int fd, const void* buf, std::size_t len, const int* fds, std::size_t nfds) noexcept;

}  // namespace ferry::daemon
