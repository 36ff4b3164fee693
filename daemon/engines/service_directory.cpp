#include "daemon/engines/service_directory.h"

namespace ferry::daemon {

void ServiceDirectory::reserve(std::vector<ServiceOwner> owners) {
  const std::lock_guard lock(mu_);
  reserved_.clear();
  for (ServiceOwner& o : owners) reserved_.emplace(std::move(o.name), o.uid);
}

std::optional<uid_t> ServiceDirectory::reserved_to(std::string_view name) const {
  const std::lock_guard lock(mu_);
  const auto it = reserved_.find(name);
  if (it == reserved_.end()) return std::nullopt;
  return it->second;
}

Result<std::uint32_t> ServiceDirectory::claim(std::string_view name, std::uint32_t engine, uid_t uid) {
  const std::lock_guard lock(mu_);
  if (const auto it = reserved_.find(name); it != reserved_.end() && it->second != uid) {
    return Result<std::uint32_t>::fail(Status::PermissionDenied);
  }
  if (by_name_.find(name) != by_name_.end()) return Result<std::uint32_t>::fail(Status::ServiceExists);
  const std::uint32_t id = next_id_++;
  if (next_id_ == 0) next_id_ = 1;  // 2^32 serves later; ids stay nonzero
  by_name_.emplace(std::string(name), ServiceLocation{engine, id});
  names_.emplace(id, std::string(name));
  return Result<std::uint32_t>::ok(id);
}

std::optional<ServiceLocation> ServiceDirectory::find(std::string_view name) const {
  const std::lock_guard lock(mu_);
  const auto it = by_name_.find(name);
  if (it == by_name_.end()) return std::nullopt;
  return it->second;
}

void ServiceDirectory::release(std::uint32_t id) {
  const std::lock_guard lock(mu_);
  const auto it = names_.find(id);
  if (it == names_.end()) return;
  by_name_.erase(it->second);
  names_.erase(it);
}

std::size_t ServiceDirectory::size() const {
  const std::lock_guard lock(mu_);
  return names_.size();
}

}  // namespace ferry::daemon
