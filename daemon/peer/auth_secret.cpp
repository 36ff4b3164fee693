// Reading auth-secret-file.
#include "daemon/peer/auth_secret.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "transport/wire/auth_proof.h"

namespace ferry::daemon::peer {

std::optional<std::string> load_auth_secret(const std::string& path, std::string& out) {
  out.clear();
  if (path.empty()) return std::nullopt;
  const std::string what = "invalid value '" + path + "' for auth-secret-file: ";
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return what + std::strerror(errno);
  std::string buf(kMaxAuthSecretBytes + 1, '\0');
  std::size_t got = 0;
  while (got < buf.size()) {
    const ssize_t n = ::read(fd, buf.data() + got, buf.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      return what + std::strerror(err);
    }
    if (n == 0) break;
    got += static_cast<std::size_t>(n);
  }
  ::close(fd);
  if (got > kMaxAuthSecretBytes) return what + "longer than " + std::to_string(kMaxAuthSecretBytes) + " bytes";
  while (got > 0 && (buf[got - 1] == '\n' || buf[got - 1] == '\r')) --got;
  if (got < wire::kMinAuthSecretBytes) {
    return what + "the secret is " + std::to_string(got) + " bytes (after trimming the trailing newline); at least " +
           std::to_string(wire::kMinAuthSecretBytes) + " are needed (e.g. head -c 32 /dev/urandom | base64 > FILE)";
  }
  out.assign(buf.data(), got);
  return std::nullopt;
}

}  // namespace ferry::daemon::peer
