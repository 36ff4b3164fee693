#include "daemon/front/runtime_dir.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace ferry::daemon {

namespace {

// A system call's failure: what, where, and errno's words.
Error sys_error(const std::string& what, const std::string& path) {
  const Status status = errno == EACCES || errno == EPERM ? Status::PermissionDenied : Status::BadRequest;
  return Error(status, what + " " + path + ": " + std::strerror(errno));
}

Error make_addr(const std::string& path, sockaddr_un* addr) {
  *addr = sockaddr_un{};
  addr->sun_family = AF_UNIX;
  if (path.size() >= sizeof(addr->sun_path)) {
    return Error::bad_request("socket path too long (max " + std::to_string(sizeof(addr->sun_path) - 1) +
                              " bytes): " + path);
  }
  std::memcpy(addr->sun_path, path.c_str(), path.size() + 1);
  return {};
}

}  // namespace

Error ensure_runtime_dir(const std::string& dir) {
  for (std::size_t pos = 1; pos <= dir.size(); ++pos) {
    if (pos != dir.size() && dir[pos] != '/') continue;
    std::string part = dir.substr(0, pos);
    if (::mkdir(part.c_str(), 0755) != 0 && errno != EEXIST) {
      return sys_error("cannot create runtime directory", part);
    }
  }
  // One descriptor for every check: what was checked is what was opened.
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  struct stat st {};
  if (fd < 0 || ::fstat(fd, &st) != 0 || !S_ISDIR(st.st_mode)) {
    if (fd >= 0) ::close(fd);
    return Error::bad_request("runtime directory " + dir + " is not a directory");
  }
  ::close(fd);
  const uid_t self = ::geteuid();
  if (st.st_uid != 0 && st.st_uid != self) {
    return Error(Status::PermissionDenied,
                 "runtime directory " + dir + " belongs to uid " + std::to_string(st.st_uid) +
                     ": it must belong to root or to the user ferryd runs as (uid " + std::to_string(self) +
                     "), or that user could replace ferryd.sock; chown it or choose another --runtime-dir");
  }
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    return Error(Status::PermissionDenied,
                 "runtime directory " + dir + " has mode " + mode +
                     ": group or others may write to it and so replace ferryd.sock; chmod 0755 (or stricter) or "
                     "choose another --runtime-dir");
  }
  return {};
}

Error listen_unix(const std::string& path, int type, int* out, SocketFile* file) {
  *out = -1;
  sockaddr_un addr;
  if (Error e = make_addr(path, &addr); e.failed()) return e;

  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) {
      return Error::bad_request(path + " exists and is not a socket; not removing it");
    }
    int probe = ::socket(AF_UNIX, type | SOCK_CLOEXEC, 0);
    bool live = probe >= 0 && ::connect(probe, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
    if (probe >= 0) ::close(probe);
    if (live) {
      return Error(Status::Busy, "another daemon is listening on " + path);
    }
    ::unlink(path.c_str());  // stale: nobody answers
  }

  int fd = ::socket(AF_UNIX, type | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return sys_error("socket for", path);
  // Narrow umask while binding so the file never exists with a wider mode.
  mode_t old = ::umask(0117);
  int rc = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  ::umask(old);
  if (rc != 0 || ::chmod(path.c_str(), 0660) != 0 || ::listen(fd, 128) != 0) {
    Error e = sys_error("cannot listen on", path);
    ::close(fd);
    return e;
  }
  if (file != nullptr && ::lstat(path.c_str(), &st) == 0) *file = SocketFile{path, st.st_dev, st.st_ino};
  *out = fd;
  return {};
}

void unlink_ours(const SocketFile& file) {
  struct stat st {};
  if (file.path.empty() || ::lstat(file.path.c_str(), &st) != 0) return;
  if (st.st_dev == file.dev && st.st_ino == file.ino) ::unlink(file.path.c_str());
}

}  // namespace ferry::daemon
