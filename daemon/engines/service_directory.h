// The host's service names, shared by every engine: which engine serves a
// name, under which id, and which names are reserved to a user
// (service-owners). Serve, Unserve and Open consult it (the one lock of the
// engines, taken at those control-rate ops and never per message); each
// engine keeps the services it serves in its own ServiceRegistry
// (serve/services.h), which Sends and Calls use without a lock.
//
// Ids are nonzero and never reused, so an endpoint opened to a service that
// later went away finds nothing and reports ServiceGone instead of reaching
// a newcomer with the same name.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "daemon/serve/services.h"
#include "ferry/result.h"

namespace ferry::daemon {

struct ServiceLocation {
  std::uint32_t engine = 0;
  std::uint32_t id = 0;
};

class ServiceDirectory {
 public:
  // The reserved names (replaces any earlier set; live services keep running).
  void reserve(std::vector<ServiceOwner> owners);
  // The uid a name is reserved to, or nullopt.
  std::optional<uid_t> reserved_to(std::string_view name) const;
  // A new service `name` on `engine`: its id. ServiceExists when the name is
  // taken; PermissionDenied when it is reserved to another uid than `uid`.
  [[nodiscard]] Result<std::uint32_t> claim(std::string_view name, std::uint32_t engine, uid_t uid);
  // Where `name` is served now, or nullopt.
  std::optional<ServiceLocation> find(std::string_view name) const;
  // The service `id` ends (its name is free again).
  void release(std::uint32_t id);
  std::size_t size() const;

 private:
  mutable std::mutex mu_;
  std::uint32_t next_id_ = 1;
  std::map<std::string, ServiceLocation, std::less<>> by_name_;
  std::unordered_map<std::uint32_t, std::string> names_;  // id -> name
  std::map<std::string, uid_t, std::less<>> reserved_;
};

}  // namespace ferry::daemon
