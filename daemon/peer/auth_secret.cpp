// Reading auth-secret-file: one open, then fstat and read on that fd.
#include "daemon/peer/auth_secret.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "transport/wire/auth_proof.h"

namespace ferry::daemon::peer {

namespace {

// Whether the file may be read as a secret; the failure's message is the
// tail of load_auth_secret's ("invalid value 'PATH' for auth-secret-file: ").
Error check_file(const struct stat& st) {
  if (!S_ISREG(st.st_mode)) return Error::bad_request("not a regular file");
  if (st.st_uid != 0 && st.st_uid != ::geteuid()) {
    return Error::bad_request("owned by uid " + std::to_string(st.st_uid) +
                              ": must belong to root or to the user ferryd runs as (uid " +
                              std::to_string(::geteuid()) + ")");
  }
  if ((st.st_mode & 0077) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    return Error::bad_request(std::string("mode ") + mode +
                              " lets group or others in; must be 0600 or 0400 (chmod 600)");
  }
  return {};
}

}  // namespace

Error load_auth_secret(const std::string& path, std::string& out) {
  out.clear();
  if (path.empty()) return {};
  const std::string what = "invalid value '" + path + "' for auth-secret-file: ";
  // O_NONBLOCK: a FIFO planted at the path must not block the open; the
  // fstat refuses it.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) return Error::bad_request(what + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return Error::bad_request(what + std::strerror(err));
  }
  if (const Error bad = check_file(st); bad.failed()) {
    ::close(fd);
    return Error::bad_request(what + bad.message());
  }
  std::string buf(kMaxAuthSecretBytes + 1, '\0');
  std::size_t got = 0;
  while (got < buf.size()) {
    const ssize_t n = ::read(fd, buf.data() + got, buf.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      return Error::bad_request(what + std::strerror(err));
    }
    if (n == 0) break;
    got += static_cast<std::size_t>(n);
  }
  ::close(fd);
  if (got > kMaxAuthSecretBytes)
    return Error::bad_request(what + "longer than " + std::to_string(kMaxAuthSecretBytes) + " bytes");
  while (got > 0 && (buf[got - 1] == '\n' || buf[got - 1] == '\r')) --got;
  if (got < wire::kMinAuthSecretBytes) {
    return Error::bad_request(
        what + "the secret is " + std::to_string(got) + " bytes (after trimming the trailing newline); at least " +
        std::to_string(wire::kMinAuthSecretBytes) + " are needed (e.g. head -c 32 /dev/urandom | base64 > FILE)");
  }
  out.assign(buf.data(), got);
  return {};
}

}  // namespace ferry::daemon::peer
