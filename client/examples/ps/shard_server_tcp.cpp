// Shard over kernel TCP: one listening socket, one connection per worker
// process, poll() for readiness, then blocking reads of a whole frame and a
// blocking write of the response (the common thread-less RPC server shape).
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <vector>

#include "framed_io.h"
#include "shard_server.h"
#include "tcp_socket.h"

namespace ferry::ps {

std::size_t max_request_bytes(const ShardConfig& c, std::uint32_t max_batch) {
  return push_request_bytes(max_batch, c.dim, c.dense);
}

std::size_t max_response_bytes(const ShardConfig& c, std::uint32_t max_batch) {
  return pull_response_bytes(max_batch, c.dim, c.dense);
}

int serve_shard_tcp(ShardState& state, const ShardServerSpec& spec) {
  std::string bound, error;
  const int listen_fd = bench::tcp_listen(spec.listen, &bound, &error);
  if (listen_fd < 0) {
    spec.failed(error);
    return 1;
  }
  const std::size_t request_cap = max_request_bytes(state.config(), spec.max_batch);
  std::vector<std::byte> request(request_cap);
  std::vector<std::byte> response(max_response_bytes(state.config(), spec.max_batch));
  std::vector<pollfd> fds{{spec.stop_fd, POLLIN, 0}, {listen_fd, POLLIN, 0}};
  spec.ready(bound);
  for (;;) {
    if (::poll(fds.data(), fds.size(), -1) < 0) continue;  // EINTR
    if (fds[0].revents != 0) break;
    if (fds[1].revents & POLLIN) {
      const int fd = bench::tcp_accept(listen_fd);
      if (fd >= 0) fds.push_back({fd, POLLIN, 0});
    }
    for (std::size_t i = 2; i < fds.size(); ++i) {
      if (fds[i].revents == 0) continue;
      std::uint32_t len = 0;
      bool ok = bench::read_frame_header(fds[i].fd, &len);
      std::size_t out = 0;
      if (ok && len <= request_cap) {
        ok = bench::read_exact(fds[i].fd, request.data(), len);
        if (ok) out = state.handle({request.data(), len}, response);
      } else if (ok) {
        // Too big for any valid request: drain it and answer with an error.
        std::size_t left = len;
        while (ok && left > 0) {
          const std::size_t chunk = std::min(left, request_cap);
          ok = bench::read_exact(fds[i].fd, request.data(), chunk);
          left -= chunk;
        }
        if (ok) out = state.handle({request.data(), 0}, response);
      }
      if (!ok || !bench::write_frame(fds[i].fd, response.data(), static_cast<std::uint32_t>(out))) {
        ::close(fds[i].fd);
        fds.erase(fds.begin() + static_cast<std::ptrdiff_t>(i));
        --i;
      }
    }
  }
  for (std::size_t i = 1; i < fds.size(); ++i) ::close(fds[i].fd);
  return 0;
}

int serve_shard(ShardState& state, const ShardServerSpec& spec) {
  return spec.kind == TransportKind::Ferry ? serve_shard_ferry(state, spec) : serve_shard_tcp(state, spec);
}

}  // namespace ferry::ps
