// The daemon-wide service name registry. Ids are nonzero and never reused,
// so an endpoint opened to a service that later went away finds nothing and
// reports ServiceGone instead of reaching a newcomer with the same name.
// Engine thread only.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <unordered_map>

#include "ferry/result.h"

namespace ferry::daemon {

struct Service {
  std::uint32_t id = 0;
  std::uint32_t owner = 0;  // client id
  std::string name;
};

class ServiceRegistry {
 public:
  // ServiceExists when the name is taken.
  [[nodiscard]] Result<std::uint32_t> add(std::string_view name, std::uint32_t owner);
  const Service* find(std::uint32_t id) const noexcept;
  const Service* find(std::string_view name) const noexcept;
  bool remove(std::uint32_t id);
  std::size_t size() const noexcept { return by_id_.size(); }

 private:
  std::uint32_t next_id_ = 1;
  std::unordered_map<std::uint32_t, Service> by_id_;
  std::map<std::string, std::uint32_t, std::less<>> by_name_;
};

}  // namespace ferry::daemon
