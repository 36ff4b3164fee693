#include "daemon/front/socket_group.h"

#include <grp.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace ferry::daemon {

Error apply_socket_group(const std::string& path, const std::string& group) {
  if (group.empty()) return {};
  ::group gr{};
  ::group* found = nullptr;
  char buf[4096];
  if (::getgrnam_r(group.c_str(), &gr, buf, sizeof buf, &found) != 0 || found == nullptr) {
    return Error::bad_request("socket-group " + group + ": no such group");
  }
  // lchown: never follow a link someone planted where the socket was.
  if (::lchown(path.c_str(), static_cast<uid_t>(-1), found->gr_gid) != 0) {
    const Status status = errno == EPERM ? Status::PermissionDenied : Status::BadRequest;
    return Error(status, "socket-group " + group + ": chgrp " + path + ": " + std::strerror(errno));
  }
  return {};
}

}  // namespace ferry::daemon
