#include "daemon/local/services.h"

namespace ferry::daemon {

Result<std::uint32_t> ServiceRegistry::add(std::string_view name, std::uint32_t owner) {
  if (by_name_.find(name) != by_name_.end()) return Result<std::uint32_t>::fail(Status::ServiceExists);
  std::uint32_t id = next_id_++;
  if (next_id_ == 0) next_id_ = 1;  // 2^32 serves later; ids stay nonzero
  by_name_.emplace(std::string(name), id);
  by_id_.emplace(id, Service{id, owner, std::string(name)});
  return Result<std::uint32_t>::ok(id);
}

const Service* ServiceRegistry::find(std::uint32_t id) const noexcept {
  auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : &it->second;
}

const Service* ServiceRegistry::find(std::string_view name) const noexcept {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : find(it->second);
}

bool ServiceRegistry::remove(std::uint32_t id) {
  auto it = by_id_.find(id);
  if (it == by_id_.end()) return false;
  by_name_.erase(it->second.name);
  by_id_.erase(it);
  return true;
}

}  // namespace ferry::daemon
