#include "tcp_link.h"

#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cstdlib>
#include <deque>
#include <functional>

#include "framed_io.h"
#include "tcp_socket.h"

namespace ferry::ps::tool {

namespace {

class TcpLink final : public ShardLink {
 public:
  ~TcpLink() override {
    for (const int fd : fds_) ::close(fd);
    for (auto& cls : cache_)
      for (std::byte* p : cls) std::free(p);
  }

  Error connect(const std::vector<std::string>& addresses) {
    for (const auto& a : addresses) {
      int fd = -1;
      if (Error e = bench::tcp_connect(a, &fd); e.failed()) return e;
      fds_.push_back(fd);
    }
    pending_.resize(fds_.size());
    return {};
  }

  std::uint32_t shards() const noexcept override { return static_cast<std::uint32_t>(fds_.size()); }
  std::size_t max_message_bytes() const noexcept override { return 1u << 20; }

  // Blocks are kept for reuse by power-of-two class: a worker allocates a
  // pull's rows and a push's requests every operation, and handing those
  // (tens of kB) back to malloc makes it trim the heap and fault the pages
  // in again on the next operation (a brk and a dozen page faults per op).
  Buffer alloc(std::size_t bytes) noexcept override {
    if (bytes == 0 || bytes > max_message_bytes()) return {};
    const unsigned cls = static_cast<unsigned>(std::bit_width(std::max<std::size_t>(bytes, kMinBlock) - 1));
    const std::size_t capacity = std::size_t{1} << cls;
    std::byte* p = nullptr;
    if (!cache_[cls].empty()) {
      p = cache_[cls].back();
      cache_[cls].pop_back();
    } else {
      p = static_cast<std::byte*>(std::malloc(capacity));
    }
    return p ? Buffer{p, static_cast<std::uint32_t>(capacity), 0} : Buffer{};
  }
  void free(const Buffer& b) noexcept override {
    if (!b) return;
    const auto cls = static_cast<unsigned>(std::bit_width(std::size_t{b.capacity} - 1));
    if (cls < cache_.size() && cache_[cls].size() < kCachedPerClass && (std::size_t{1} << cls) == b.capacity) {
      cache_[cls].push_back(b.data);
      return;
    }
    std::free(b.data);
  }

  // Writes the request now; the response is read in wait().
  Status call(std::uint32_t shard, const Buffer& request, std::uint32_t length, const Buffer& response,
              std::uint64_t tag) noexcept override {
    if (state_ != Status::Ok) return state_;
    if (shard >= fds_.size()) return Status::BadRequest;
    if (!bench::write_frame(fds_[shard], request.data, length)) {
      state_ = Status::PeerReset;
      return state_;
    }
    pending_[shard].push_back({tag, response});
    return Status::Ok;
  }

  std::size_t wait(std::span<LinkDone> out, std::chrono::milliseconds timeout) noexcept override {
    std::size_t n = 0;
    std::vector<pollfd>& p = pollfds_;
    p.clear();
    for (std::uint32_t s = 0; s < fds_.size(); ++s)
      if (!pending_[s].empty()) p.push_back({fds_[s], POLLIN, 0});
    if (p.empty()) return 0;
    if (::poll(p.data(), p.size(), static_cast<int>(timeout.count())) <= 0) return 0;
    for (const pollfd& x : p) {
      if (x.revents == 0 || n == out.size()) continue;
      const auto s = static_cast<std::uint32_t>(std::find(fds_.begin(), fds_.end(), x.fd) - fds_.begin());
      const Pending c = pending_[s].front();
      pending_[s].pop_front();
      std::uint32_t len = 0;
      Status st = Status::Ok;
      if (!bench::read_frame_header(x.fd, &len)) {
        st = Status::PeerReset;
      } else if (len > c.response.capacity) {
        st = Status::ResponseTooLarge;  // a well-behaved shard never sends one: the stream is lost
      } else if (!bench::read_exact(x.fd, c.response.data, len)) {
        st = Status::PeerReset;
      }
      if (st != Status::Ok) state_ = st;
      out[n++] = LinkDone{c.tag, st, len};
    }
    return n;
  }

  Status state() const noexcept override { return state_; }
  int event_fd() const noexcept override { return -1; }

 private:
  struct Pending {
    std::uint64_t tag;
    Buffer response;
  };
  std::vector<int> fds_;
  std::vector<std::deque<Pending>> pending_;  // per shard, in request order (TCP keeps it)
  std::vector<pollfd> pollfds_;
  Status state_ = Status::Ok;
  static constexpr std::size_t kMinBlock = 64;
  static constexpr std::size_t kCachedPerClass = 64;  // a worker's operations in flight, and then some
  std::array<std::vector<std::byte*>, 21> cache_;     // by log2 of the block size, up to 1 MiB
};

}  // namespace

Error connect_tcp(const std::vector<std::string>& shard_addresses, std::unique_ptr<ShardLink>* out) {
  auto link = std::make_unique<TcpLink>();
  if (Error e = link->connect(shard_addresses); e.failed()) return e;
  *out = std::move(link);
  return {};
}

int serve_shard_tcp(Shard& shard, const std::string& listen, int stop_fd,
                    const std::function<void(const std::string&)>& ready,
                    const std::function<void(const std::string&)>& failed) {
  std::string bound;
  int listen_fd = -1;
  if (const Error e = bench::tcp_listen(listen, &listen_fd, &bound); e.failed()) {
    failed(e.message());
    return 1;
  }
  const std::size_t request_cap = shard.max_request_bytes();
  std::vector<std::byte> request(request_cap);
  std::vector<std::byte> response(shard.max_response_bytes());
  std::vector<pollfd> fds{{stop_fd, POLLIN, 0}, {listen_fd, POLLIN, 0}};
  ready(bound);
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
        if (ok) out = shard.handle({request.data(), len}, response);
      } else if (ok) {
        // Too big for any valid request: drain it and answer with an error.
        std::size_t left = len;
        while (ok && left > 0) {
          const std::size_t chunk = std::min(left, request_cap);
          ok = bench::read_exact(fds[i].fd, request.data(), chunk);
          left -= chunk;
        }
        if (ok) out = shard.handle({request.data(), 0}, response);
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

}  // namespace ferry::ps::tool
