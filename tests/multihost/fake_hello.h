// The first step of a peer daemon, played by a test: connect to a ferryd's
// peer port and send a well-formed bootstrap Hello, then read what the
// daemon answers. Strangers (test_fake_peers) stop there; a Hello that
// names a real daemon's --listen port makes the daemon route that
// daemon's address to the stranger's channel (test_peer_dialled).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

namespace ferry::mhtest {

struct FakeHello {
  std::uint64_t epoch = 1;        // the stranger's daemon epoch (not 0)
  std::uint16_t listen_port = 1;  // the --listen port it claims, as a daemon's Hello carries
  bool with_nonce = false;        // a nonce, as a daemon with a secret sends (no proof follows)
};

// Connects to host:port (IPv4) and sends the Hello: the connected socket,
// which the caller closes, or -1 when the connect or the send failed.
[[nodiscard]] int send_fake_hello(const std::string& host, std::uint16_t port, const FakeHello& hello);

// Reads the daemon's answers on `fd` until `bytes` arrived: false at EOF
// or when `within` passed first.
[[nodiscard]] bool read_answers(int fd, std::size_t bytes, std::chrono::milliseconds within);

}  // namespace ferry::mhtest
