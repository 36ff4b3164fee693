// PsTransport over kernel TCP, the way a parameter-server stack without
// ferry does it: this process holds its own connection to every shard
// (TCP_NODELAY, blocking I/O, 4-byte length prefix), writes all requests,
// then reads each response into its response buffer.
#include <unistd.h>

#include "framed_io.h"
#include "ps_transport.h"
#include "tcp_socket.h"

namespace ferry::ps {

namespace {

class TcpTransport final : public PsTransport {
 public:
  ~TcpTransport() override {
    for (const int fd : fds_) ::close(fd);
  }

  bool setup(const TransportSpec& spec, std::string* error) {
    if (spec.shard_addresses.size() != spec.shards) {
      *error = "tcp transport needs one address per shard";
      return false;
    }
    for (std::uint32_t s = 0; s < spec.shards; ++s) {
      const int fd = bench::tcp_connect(spec.shard_addresses[s], error);
      if (fd < 0) return false;
      fds_.push_back(fd);
      requests_.emplace_back(spec.request_bytes);
      responses_.emplace_back(spec.response_bytes);
    }
    return true;
  }

  std::uint32_t shards() const override { return static_cast<std::uint32_t>(fds_.size()); }
  std::span<std::byte> request(std::uint32_t s) override { return requests_[s]; }
  std::span<std::byte> response(std::uint32_t s) override { return responses_[s]; }

  bool exchange(std::span<const std::uint32_t> request_len, std::span<std::uint32_t> response_len,
                std::string* error) override {
    for (std::uint32_t s = 0; s < fds_.size(); ++s) {
      if (request_len[s] == 0) continue;
      if (!bench::write_frame(fds_[s], requests_[s].data(), request_len[s])) {
        *error = "write to shard " + std::to_string(s) + " failed";
        return false;
      }
    }
    for (std::uint32_t s = 0; s < fds_.size(); ++s) {
      if (request_len[s] == 0) continue;
      std::uint32_t len = 0;
      if (!bench::read_frame_header(fds_[s], &len) || len > responses_[s].size()) {
        *error = "bad or missing response from shard " + std::to_string(s);
        return false;
      }
      if (!bench::read_exact(fds_[s], responses_[s].data(), len)) {
        *error = "short response from shard " + std::to_string(s);
        return false;
      }
      response_len[s] = len;
    }
    return true;
  }

 private:
  std::vector<int> fds_;
  std::vector<std::vector<std::byte>> requests_;
  std::vector<std::vector<std::byte>> responses_;
};

}  // namespace

std::unique_ptr<PsTransport> make_tcp_transport(const TransportSpec& spec, std::string* error) {
  auto t = std::make_unique<TcpTransport>();
  if (!t->setup(spec, error)) return nullptr;
  return t;
}

}  // namespace ferry::ps
