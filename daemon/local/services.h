// The daemon-wide service name registry. Ids are nonzero and never reused,
// so an endpoint opened to a service that later went away finds nothing and
// reports ServiceGone instead of reaching a newcomer with the same name.
// Names can be reserved to a user (the service-owners option): another
// uid's Serve of a reserved name gets PermissionDenied, so no other user can
// take a well-known name and receive its callers' requests. Unreserved names
// stay first come, first served. Engine thread only.
#pragma once

#include <sys/types.h>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "ferry/result.h"

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
// user name or a numeric uid, each NAME once. Fills `out`; returns a
// one-line error naming the bad entry, or nullopt.
[[nodiscard]] std::optional<std::string> parse_service_owners(std::string_view text, std::vector<ServiceOwner>& out);

class ServiceRegistry {
 public:
  // The reserved names (replaces any earlier set; live services keep running).
  void reserve(std::vector<ServiceOwner> owners);
  // The uid a name is reserved to, or nullopt.
  std::optional<uid_t> reserved_to(std::string_view name) const noexcept;
  // ServiceExists when the name is taken; PermissionDenied when it is
  // reserved to another uid than `uid`.
  [[nodiscard]] Result<std::uint32_t> add(std::string_view name, std::uint32_t owner, uid_t uid);
  const Service* find(std::uint32_t id) const noexcept;
  const Service* find(std::string_view name) const noexcept;
  bool remove(std::uint32_t id);
  std::size_t size() const noexcept { return by_id_.size(); }

 private:
  std::uint32_t next_id_ = 1;
  std::unordered_map<std::uint32_t, Service> by_id_;
  std::map<std::string, std::uint32_t, std::less<>> by_name_;
  std::map<std::string, uid_t, std::less<>> reserved_;
};

}  // namespace ferry::daemon
