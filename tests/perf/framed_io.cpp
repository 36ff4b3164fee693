#include "framed_io.h"

#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>

namespace ferry::bench {

bool write_exact(int fd, const void* data, std::size_t len) {
  const auto* p = static_cast<const char*>(data);
  while (len > 0) {
    const ssize_t n = ::write(fd, p, len);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    len -= static_cast<std::size_t>(n);
  }
  return true;
}

bool read_exact(int fd, void* data, std::size_t len) {
  auto* p = static_cast<char*>(data);
  while (len > 0) {
    const ssize_t n = ::read(fd, p, len);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    len -= static_cast<std::size_t>(n);
  }
  return true;
}

bool write_frame(int fd, const void* payload, std::uint32_t len) {
  std::uint32_t header = len;  // x86 and arm64 Linux: little-endian already
  iovec iov[2] = {{&header, sizeof(header)}, {const_cast<void*>(payload), len}};
  std::size_t total = sizeof(header) + len;
  const ssize_t n = ::writev(fd, iov, 2);
  if (n < 0 && errno != EINTR) return false;
  const std::size_t done = n < 0 ? 0 : static_cast<std::size_t>(n);
  if (done == total) return true;
  // Partial write (large payloads): finish with plain writes.
  if (done < sizeof(header)) {
    if (!write_exact(fd, reinterpret_cast<const char*>(&header) + done, sizeof(header) - done)) return false;
    return write_exact(fd, payload, len);
  }
  return write_exact(fd, static_cast<const char*>(payload) + (done - sizeof(header)), total - done);
}

bool read_frame_header(int fd, std::uint32_t* len) {
  std::uint32_t header = 0;
  if (!read_exact(fd, &header, sizeof(header))) return false;
  if (header > kMaxFrameBytes) return false;
  *len = header;
  return true;
}

}  // namespace ferry::bench
