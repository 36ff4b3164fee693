#include "client/ps/npy_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string_view>

namespace ferry::ps::detail {

namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr std::size_t kMagicBytes = 6;
// The header NpyWriter writes: magic, version 1.0, its length, the dict,
// spaces and a newline; 128 bytes in all keeps the data 64-byte aligned
// (numpy's own rule) and leaves room for a 20-digit row count.
constexpr std::size_t kHeaderBytes = 128;

std::string_view descr(NpyType t) noexcept { return t == NpyType::U64 ? "<u8" : "<f4"; }

Error io_error(const std::string& what, const std::string& path) {
  return Error(Status::BadRequest, what + " '" + path + "': " + std::strerror(errno));
}

std::string header_for(NpyType type, std::uint64_t rows, std::uint32_t dim) {
  std::string dict = "{'descr': '" + std::string(descr(type)) + "', 'fortran_order': False, 'shape': (" +
                     std::to_string(rows) + (dim == 0 ? "," : ", " + std::to_string(dim)) + "), }";
  std::string h(kMagic, kMagicBytes);
  h += '\x01';
  h += '\x00';
  const auto len = static_cast<std::uint16_t>(kHeaderBytes - 10);
  h += static_cast<char>(len & 0xFF);
  h += static_cast<char>(len >> 8);
  h += dict;
  h.resize(kHeaderBytes - 1, ' ');
  h += '\n';
  return h;
}

bool read_all(int fd, void* out, std::size_t bytes) noexcept {
  auto* p = static_cast<char*>(out);
  while (bytes > 0) {
    const ssize_t n = ::read(fd, p, bytes);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    bytes -= static_cast<std::size_t>(n);
  }
  return true;
}

// The number after `key` in the dict (`'shape': (` ...), parsing digits only.
bool parse_u64(std::string_view s, std::size_t* at, std::uint64_t* out) noexcept {
  while (*at < s.size() && s[*at] == ' ') ++*at;
  std::uint64_t v = 0;
  const std::size_t start = *at;
  while (*at < s.size() && s[*at] >= '0' && s[*at] <= '9') {
    if (v > (UINT64_MAX - 9) / 10) return false;
    v = v * 10 + static_cast<std::uint64_t>(s[*at] - '0');
    ++*at;
  }
  *out = v;
  return *at > start;
}

}  // namespace

bool write_all(int fd, const void* data, std::size_t bytes) noexcept {
  const auto* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::write(fd, p, bytes);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    bytes -= static_cast<std::size_t>(n);
  }
  return true;
}

Error NpyWriter::open(const std::string& path, NpyType type, std::uint32_t dim) {
  discard();
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd_ < 0) return io_error("cannot create", path);
  path_ = path;
  type_ = type;
  dim_ = dim;
  const std::string h = header_for(type, 0, dim);
  if (!write_all(fd_, h.data(), h.size())) {
    Error e = io_error("cannot write", path);
    discard();
    return e;
  }
  return {};
}

Error NpyWriter::append(const void* data, std::size_t bytes) {
  if (fd_ < 0) return Error::bad_request("append to a closed file");
  if (!write_all(fd_, data, bytes)) return io_error("cannot write", path_);
  return {};
}

Error NpyWriter::sync() {
  if (fd_ < 0) return Error::bad_request("sync of a closed file");
  if (::fdatasync(fd_) != 0) return io_error("cannot sync", path_);
  return {};
}

Error NpyWriter::finish(std::uint64_t rows) {
  if (fd_ < 0) return Error::bad_request("finish of a closed file");
  const std::string h = header_for(type_, rows, dim_);
  if (::pwrite(fd_, h.data(), h.size(), 0) != static_cast<ssize_t>(h.size()) || ::fsync(fd_) != 0)
    return io_error("cannot write", path_);
  ::close(fd_);
  fd_ = -1;
  path_.clear();
  return {};
}

void NpyWriter::discard() noexcept {
  if (fd_ < 0) return;
  ::close(fd_);
  fd_ = -1;
  ::unlink(path_.c_str());
  path_.clear();
}

NpyReader::~NpyReader() {
  if (fd_ >= 0) ::close(fd_);
}

Error NpyReader::open(const std::string& path, NpyType type, std::uint32_t dim) {
  if (fd_ >= 0) ::close(fd_);
  path_ = path;
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) return io_error("cannot open", path);
  auto bad = [&](const std::string& why) { return Error::bad_request("'" + path + "' " + why); };
  unsigned char pre[10];
  if (!read_all(fd_, pre, sizeof pre) || std::memcmp(pre, kMagic, kMagicBytes) != 0) return bad("is not a .npy file");
  std::size_t len = 0;
  if (pre[6] == 1) {
    len = pre[8] | (std::size_t{pre[9]} << 8);
  } else if (pre[6] == 2 || pre[6] == 3) {
    unsigned char more[2];
    if (!read_all(fd_, more, sizeof more)) return bad("is not a .npy file");
    len = pre[8] | (std::size_t{pre[9]} << 8) | (std::size_t{more[0]} << 16) | (std::size_t{more[1]} << 24);
  } else {
    return bad("has .npy format version " + std::to_string(pre[6]) + ", which this reader does not know");
  }
  if (len > (1u << 20)) return bad("has a header of " + std::to_string(len) + " bytes");
  std::string dict(len, '\0');
  if (!read_all(fd_, dict.data(), len)) return bad("is cut short in its header");
  const std::string want_descr = "'descr': '" + std::string(descr(type)) + "'";
  if (dict.find(want_descr) == std::string::npos)
    return bad("does not hold " + std::string(type == NpyType::U64 ? "uint64" : "float32") + " little-endian");
  if (dict.find("'fortran_order': False") == std::string::npos) return bad("is not in C order");
  std::size_t at = dict.find("'shape': (");
  if (at == std::string::npos) return bad("has no shape");
  at += 10;
  std::uint64_t rows = 0;
  std::uint64_t cols = 0;
  bool two = false;
  if (!parse_u64(dict, &at, &rows)) return bad("has a shape this reader cannot parse");
  while (at < dict.size() && (dict[at] == ',' || dict[at] == ' ')) ++at;
  if (at < dict.size() && dict[at] != ')') {
    if (!parse_u64(dict, &at, &cols)) return bad("has a shape this reader cannot parse");
    two = true;
    while (at < dict.size() && (dict[at] == ',' || dict[at] == ' ')) ++at;
  }
  if (at >= dict.size() || dict[at] != ')') return bad("has a shape of more than two dimensions");
  if (dim == 0 ? two : (!two || cols != dim))
    return bad("has " + (two ? std::to_string(cols) : std::string("no")) + " columns, not " +
               (dim == 0 ? std::string("one dimension") : std::to_string(dim)));
  rows_ = rows;
  return {};
}

Error NpyReader::read(void* out, std::size_t bytes) {
  if (fd_ < 0) return Error::bad_request("read of a closed file");
  if (!read_all(fd_, out, bytes)) return Error::bad_request("'" + path_ + "' is cut short");
  return {};
}

}  // namespace ferry::ps::detail
