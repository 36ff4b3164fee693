#include "tests/integration/raw_client.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <thread>

#include "shm/attach_protocol.h"

namespace ferry::itest {

RawClient::RawClient(const std::string& socket, const char* name) {
  fd_ = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, socket.c_str(), sizeof addr.sun_path - 1);
  if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) return;
  shm::AttachRequest req{};
  req.magic = shm::kAttachMagic;
  req.abi_version = shm::kAbiVersion;
  req.pid = static_cast<std::uint32_t>(::getpid());
  std::strncpy(req.name, name, sizeof req.name - 1);
  if (::send(fd_, &req, sizeof req, MSG_NOSIGNAL) != static_cast<ssize_t>(sizeof req)) return;
  shm::AttachReply reply{};
  alignas(cmsghdr) char control[CMSG_SPACE(3 * sizeof(int))];
  iovec iov{&reply, sizeof reply};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  if (::recvmsg(fd_, &msg, MSG_CMSG_CLOEXEC) != static_cast<ssize_t>(sizeof reply)) return;
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  if (reply.status != 0 || c == nullptr || c->cmsg_len != CMSG_LEN(3 * sizeof(int))) return;
  int fds[3];
  std::memcpy(fds, CMSG_DATA(c), sizeof fds);
  auto m = shm::map_segment(fds[0]);
  sq_bell_ = shm::Doorbell(fds[1]);
  cq_bell_ = shm::Doorbell(fds[2]);
  if (!m) return;
  seg_ = std::move(m.value);
  sq_ = shm::RingProducer<shm::SqEntry>(seg_.view.sq_header, seg_.view.sq_entries, seg_.view.sq_capacity);
  cq_ = shm::RingConsumer<shm::CqEntry>(seg_.view.cq_header, seg_.view.cq_entries, seg_.view.cq_capacity);
  ok_ = true;
}

RawClient::~RawClient() {
  if (fd_ >= 0) ::close(fd_);
}

bool RawClient::submit(const shm::SqEntry& e) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!sq_.try_push(e)) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::yield();
  }
  if (sq_.claim_doorbell()) sq_bell_.ring();
  return true;
}

std::uint32_t RawClient::reap(shm::CqEntry* out, std::uint32_t max, int timeout_ms) {
  std::uint32_t n = cq_.pop_batch(out, max);
  if (n != 0 || timeout_ms == 0) return n;
  if (cq_.prepare_to_sleep()) {
    (void)cq_bell_.wait(timeout_ms);  // a timeout just means nothing came
  }
  cq_.woke_up();
  return cq_.pop_batch(out, max);
}

bool RawClient::hung_up(int timeout_ms) {
  pollfd p{fd_, POLLRDHUP, 0};
  if (::poll(&p, 1, timeout_ms) != 1) return false;
  if ((p.revents & (POLLHUP | POLLRDHUP | POLLERR)) != 0) return true;
  char b;
  return ::recv(fd_, &b, 1, MSG_DONTWAIT) == 0;
}

}  // namespace ferry::itest
