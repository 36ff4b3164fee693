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

std::string errtext(const std::string& what, const std::string& path) {
  return what + " " + path + ": " + std::strerror(errno);
}

bool make_addr(const std::string& path, sockaddr_un* addr, std::string* error) {
  *addr = sockaddr_un{};
  addr->sun_family = AF_UNIX;
  if (path.size() >= sizeof(addr->sun_path)) {
    *error = "socket path too long (max " + std::to_string(sizeof(addr->sun_path) - 1) + " bytes): " + path;
    return false;
  }
  std::memcpy(addr->sun_path, path.c_str(), path.size() + 1);
  return true;
}

}  // namespace

bool ensure_runtime_dir(const std::string& dir, std::string* error) {
  for (std::size_t pos = 1; pos <= dir.size(); ++pos) {
    if (pos != dir.size() && dir[pos] != '/') continue;
    std::string part = dir.substr(0, pos);
    if (::mkdir(part.c_str(), 0755) != 0 && errno != EEXIST) {
      *error = errtext("cannot create runtime directory", part);
      return false;
    }
  }
  // One descriptor for every check: what was checked is what was opened.
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  struct stat st {};
  if (fd < 0 || ::fstat(fd, &st) != 0 || !S_ISDIR(st.st_mode)) {
    *error = "runtime directory " + dir + " is not a directory";
    if (fd >= 0) ::close(fd);
    return false;
  }
  ::close(fd);
  const uid_t self = ::geteuid();
  if (st.st_uid != 0 && st.st_uid != self) {
    *error = "runtime directory " + dir + " belongs to uid " + std::to_string(st.st_uid) +
             ": it must belong to root or to the user ferryd runs as (uid " + std::to_string(self) +
             "), or that user could replace ferryd.sock; chown it or choose another --runtime-dir";
    return false;
  }
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    *error = "runtime directory " + dir + " has mode " + mode +
             ": group or others may write to it and so replace ferryd.sock; chmod 0755 (or stricter) or choose "
             "another --runtime-dir";
    return false;
  }
  return true;
}

int listen_unix(const std::string& path, int type, std::string* error, SocketFile* file) {
  sockaddr_un addr;
  if (!make_addr(path, &addr, error)) return -1;

  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) {
      *error = path + " exists and is not a socket; not removing it";
      return -1;
    }
    int probe = ::socket(AF_UNIX, type | SOCK_CLOEXEC, 0);
    bool live = probe >= 0 && ::connect(probe, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
    if (probe >= 0) ::close(probe);
    if (live) {
      *error = "another daemon is listening on " + path;
      return -1;
    }
    ::unlink(path.c_str());  // stale: nobody answers
  }

  int fd = ::socket(AF_UNIX, type | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) {
    *error = errtext("socket for", path);
    return -1;
  }
  // Narrow umask while binding so the file never exists with a wider mode.
  mode_t old = ::umask(0117);
  int rc = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  ::umask(old);
  if (rc != 0 || ::chmod(path.c_str(), 0660) != 0 || ::listen(fd, 128) != 0) {
    *error = errtext("cannot listen on", path);
    ::close(fd);
    return -1;
  }
  if (file != nullptr && ::lstat(path.c_str(), &st) == 0) *file = SocketFile{path, st.st_dev, st.st_ino};
  return fd;
}

void unlink_ours(const SocketFile& file) {
  struct stat st {};
  if (file.path.empty() || ::lstat(file.path.c_str(), &st) != 0) return;
  if (st.st_dev == file.dev && st.st_ino == file.ino) ::unlink(file.path.c_str());
}

}  // namespace ferry::daemon
