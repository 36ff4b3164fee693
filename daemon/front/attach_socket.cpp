#include "daemon/front/attach_socket.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace ferry::daemon {

Error peer_cred(int fd, PeerCred* out) {
  ucred cred{};
  socklen_t len = sizeof(cred);
  if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0)
    return Error(Status::PermissionDenied, std::string("SO_PEERCRED: ") + std::strerror(errno));
  out->pid = cred.pid;
  out->uid = cred.uid;
  out->gid = cred.gid;
  return {};
}

Result<std::size_t> recv_message(int fd, void* buf, std::size_t cap) noexcept {
  iovec iov{buf, cap};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 16)];
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  ssize_t n = ::recvmsg(fd, &msg, MSG_DONTWAIT | MSG_TRUNC | MSG_CMSG_CLOEXEC);
  if (n < 0)
    return Result<std::size_t>::fail(errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? Status::Busy
                                                                                               : Status::PeerReset);
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
      std::size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (std::size_t i = 0; i < count; ++i) {
        int stray;
        std::memcpy(&stray, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
        ::close(stray);
      }
    }
  }
  return Result<std::size_t>::ok(static_cast<std::size_t>(n));
}

Error send_message(int fd, const void* buf, std::size_t len, const int* fds, std::size_t nfds) {
  iovec iov{const_cast<void*>(buf), len};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 8)];
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  if (nfds != 0) {
    if (nfds > 8) return Error::bad_request("more than 8 descriptors in one message");
    msg.msg_control = control;
    msg.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
    std::memcpy(CMSG_DATA(c), fds, sizeof(int) * nfds);
  }
  const ssize_t n = ::sendmsg(fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
  if (n < 0) return Error(Status::PeerReset, std::strerror(errno));
  if (n != static_cast<ssize_t>(len))
    return Error(Status::PeerReset, "sent " + std::to_string(n) + " of " + std::to_string(len) + " bytes");
  return {};
}

}  // namespace ferry::daemon
