#include "tests/multihost/fake_hello.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <span>

#include "transport/wire/handshake.h"
#include "transport/wire/header.h"
#include "transport/wire/msg_type.h"

namespace ferry::mhtest {

int send_fake_hello(const std::string& host, std::uint16_t port, const FakeHello& hello) {
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port);
  if (::inet_pton(AF_INET, host.c_str(), &sa.sin_addr) != 1) return -1;
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
    ::close(fd);
    return -1;
  }
  wire::Handshake hs;
  hs.qp_count = 1;
  hs.daemon_epoch = hello.epoch;
  hs.capabilities = wire::kCapTcp | (hello.with_nonce ? wire::kCapAuth : 0);
  hs.initial_credits = 128;
  hs.max_message_bytes = 1u << 20;
  hs.has_nonce = hello.with_nonce;
  for (std::size_t i = 0; i < hs.auth_nonce.size(); ++i) hs.auth_nonce[i] = static_cast<std::uint8_t>(hello.epoch >> i);
  std::array<std::byte, wire::kHeaderBytes + wire::kHandshakeMaxWithRails> frame{};
  const std::size_t len = wire::encode_handshake(hs, std::span(frame).subspan(wire::kHeaderBytes));
  wire::Header h;
  h.type = wire::MsgType::Hello;
  h.payload_len = static_cast<std::uint32_t>(len);
  h.ack = hello.listen_port;
  wire::encode_header(h, std::span(frame).first<wire::kHeaderBytes>());
  const std::size_t total = wire::kHeaderBytes + len;
  if (len == 0 || ::send(fd, frame.data(), total, MSG_NOSIGNAL) != static_cast<ssize_t>(total)) {
    ::close(fd);
    return -1;
  }
  return fd;
}

bool read_answers(int fd, std::size_t bytes, std::chrono::milliseconds within) {
  const auto deadline = std::chrono::steady_clock::now() + within;
  std::size_t got = 0;
  while (got < bytes && std::chrono::steady_clock::now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 100) != 1) continue;
    char buf[512];
    const ssize_t r = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT);
    if (r <= 0) return false;
    got += static_cast<std::size_t>(r);
  }
  return got >= bytes;
}

}  // namespace ferry::mhtest
