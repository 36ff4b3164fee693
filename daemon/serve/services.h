// Services: what one is, the service-owners option (names reserved to a
// user: another uid's Serve of a reserved name gets PermissionDenied, so no
// other user can take a well-known name and receive its callers' requests;
// unreserved names stay first come, first served), and the services one
// engine serves.
#pragma once

#include <sys/types.h>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "ferry/error.h"

namespace ferry::daemon {

struct Service {
  std::uint32_t id = 0;
  std::uint32_t owner = 0;  // client id
  std::string name;
};

// One service-owners entry: NAME reserved to uid.
struct ServiceOwner {
  std::string name;
  uid_t uid = 0;
};

// Parses service-owners: "NAME:USER" entries separated by commas, USER a
// user name or a numeric uid, each NAME once. Fills `out`; returns
// BadRequest with a one-line message naming the bad entry, or Ok.
[[nodiscard]] Error parse_service_owners(std::string_view text, std::vector<ServiceOwner>& out);

// The services one engine serves, by id: what its Sends, Calls and peers'
// deliveries look up without a lock. Names and their uniqueness across the
// host live in the ServiceDirectory (engines/service_directory.h), which
// gives the ids. Engine thread only.
class ServiceRegistry {
 public:
  void add(Service s) { by_id_.emplace(s.id, std::move(s)); }
  const Service* find(std::uint32_t id) const noexcept;
  bool remove(std::uint32_t id);
  std::size_t size() const noexcept { return by_id_.size(); }

 private:
  std::unordered_map<std::uint32_t, Service> by_id_;
};

}  // namespace ferry::daemon
