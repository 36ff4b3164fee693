#include "tests/unit/client/fake_daemon.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <thread>

#include "shm/attach_protocol.h"

namespace ferry::test {

FakeDaemon::FakeDaemon() {
  char tmpl[] = "/tmp/ferry-fake-XXXXXX";
  if (::mkdtemp(tmpl) == nullptr) throw std::runtime_error("mkdtemp");
  dir_ = tmpl;
  path_ = dir_ + "/ferryd.sock";
  listen_fd_ = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path_.c_str(), sizeof addr.sun_path - 1);
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(listen_fd_, 4) != 0) {
    throw std::runtime_error("bind/listen");
  }
}

FakeDaemon::~FakeDaemon() {
  hang_up();
  if (listen_fd_ >= 0) ::close(listen_fd_);
  ::unlink(path_.c_str());
  ::rmdir(dir_.c_str());
}

void FakeDaemon::hang_up() {
  if (conn_fd_ >= 0) ::close(conn_fd_);
  conn_fd_ = -1;
}

bool FakeDaemon::accept_one(std::uint32_t client_id, std::uint64_t epoch) {
  conn_fd_ = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
  if (conn_fd_ < 0) return false;
  shm::AttachRequest req{};
  if (::recv(conn_fd_, &req, sizeof req, 0) != static_cast<ssize_t>(sizeof req)) return false;
  if (req.magic != shm::kAttachMagic) return false;
  shm::SegmentSizes sizes{256, 256, 8u << 20, 8u << 20};
  auto created = shm::create_segment(sizes, client_id, epoch, 1u << 20);
  auto sqb = shm::Doorbell::create();
  auto cqb = shm::Doorbell::create();
  if (!created || !sqb || !cqb) return false;
  seg_ = std::move(created.value);
  sq_bell_ = std::move(sqb.value);
  cq_bell_ = std::move(cqb.value);
  sq_ = shm::RingConsumer<shm::SqEntry>(seg_.view.sq_header, seg_.view.sq_entries, seg_.view.sq_capacity);
  cq_ = shm::RingProducer<shm::CqEntry>(seg_.view.cq_header, seg_.view.cq_entries, seg_.view.cq_capacity);

  shm::AttachReply reply{};
  reply.magic = shm::kAttachMagic;
  reply.abi_version = shm::kAbiVersion;
  reply.client_id = client_id;
  reply.segment_bytes = seg_.view.layout.segment_bytes;
  reply.daemon_epoch = epoch;
  int fds[3] = {seg_.mapping.fd(), sq_bell_.fd(), cq_bell_.fd()};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof fds)];
  iovec iov{&reply, sizeof reply};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof fds);
  std::memcpy(CMSG_DATA(c), fds, sizeof fds);
  return ::sendmsg(conn_fd_, &msg, MSG_NOSIGNAL) == static_cast<ssize_t>(sizeof reply);
}

void FakeDaemon::complete(const shm::CqEntry& e) {
  if (!cq_.try_push(e)) throw std::runtime_error("fake daemon: CQ full");
  if (cq_.claim_doorbell()) cq_bell_.ring();
}

std::unique_ptr<Client> attach_client(FakeDaemon& d, const char* name, bool busy_poll) {
  bool ok = false;
  std::thread t([&] { ok = d.accept_one(); });
  AttachOptions o;
  o.socket_path = d.socket_path();
  o.name = name;
  o.busy_poll = busy_poll;
  auto r = Client::attach(o);
  t.join();
  return ok && r.status == Status::Ok ? std::move(r.value) : nullptr;
}

ferry_client* attach_c_client(FakeDaemon& d, const char* name) {
  bool ok = false;
  std::thread t([&] { ok = d.accept_one(); });
  ferry_attach_options o{};
  const std::string path = d.socket_path();
  o.socket_path = path.c_str();
  o.name = name;
  ferry_client* c = nullptr;
  const int r = ferry_attach(&o, &c);
  t.join();
  if (r == FERRY_OK && ok) return c;
  if (c != nullptr) ferry_detach(c);
  return nullptr;
}

}  // namespace ferry::test
