// check_system (config.h): the checks that look at the host, shared by
// --check-config, start-up and SIGHUP.
#include <grp.h>

#include "daemon/config/config.h"
#include "daemon/peer/auth_secret.h"
#include "daemon/serve/services.h"

namespace ferry::daemon {

namespace {

Error check_group(std::string_view key, const std::string& name) {
  if (name.empty()) return {};
  group gr{};
  group* found = nullptr;
  char buf[16384];
  if (::getgrnam_r(name.c_str(), &gr, buf, sizeof buf, &found) != 0 || found == nullptr) {
    return Error::bad_request("invalid value '" + name + "' for " + std::string(key) + ": no such group");
  }
  return {};
}

}  // namespace

Error check_system(const Config& c) {
  if (Error bad = check_group("socket-group", c.socket_group); bad.failed()) return bad;
  if (Error bad = check_group("admin-group", c.admin_group); bad.failed()) return bad;
  std::vector<ServiceOwner> owners;
  if (Error bad = parse_service_owners(c.service_owners, owners); bad.failed()) return bad;
  // Read here too so --check-config reports a short secret or a loose mode.
  std::string secret;
  return peer::load_auth_secret(c.auth_secret_file, secret);
}

}  // namespace ferry::daemon
