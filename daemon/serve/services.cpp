#include "daemon/serve/services.h"

#include <pwd.h>

#include <cerrno>
#include <charconv>

#include "daemon/session/validate.h"

namespace ferry::daemon {

Error parse_service_owners(std::string_view text, std::vector<ServiceOwner>& out) {
  out.clear();
  while (!text.empty()) {
    const std::size_t comma = text.find(',');
    std::string_view entry = text.substr(0, comma);
    text = comma == std::string_view::npos ? std::string_view{} : text.substr(comma + 1);
    while (!entry.empty() && entry.front() == ' ') entry.remove_prefix(1);
    while (!entry.empty() && entry.back() == ' ') entry.remove_suffix(1);
    const std::string bad = "invalid entry '" + std::string(entry) + "' for service-owners: ";
    const std::size_t colon = entry.rfind(':');
    if (colon == std::string_view::npos || colon == 0 || colon + 1 == entry.size()) {
      return Error::bad_request(bad + "expected NAME:USER (a user name or a numeric uid)");
    }
    ServiceOwner o;
    o.name = std::string(entry.substr(0, colon));
    if (!valid_service_name(o.name)) return Error::bad_request(bad + "not a valid service name");
    const std::string user(entry.substr(colon + 1));
    unsigned long uid = 0;
    const auto [end, ec] = std::from_chars(user.data(), user.data() + user.size(), uid);
    if (ec == std::errc{} && end == user.data() + user.size()) {
      o.uid = static_cast<uid_t>(uid);
    } else {
      passwd pw{};
      passwd* found = nullptr;
      char buf[16384];
      if (::getpwnam_r(user.c_str(), &pw, buf, sizeof buf, &found) != 0 || found == nullptr) {
        return Error::bad_request(bad + "no such user '" + user + "'");
      }
      o.uid = found->pw_uid;
    }
    for (const ServiceOwner& other : out) {
      if (other.name == o.name) return Error::bad_request(bad + "the name is reserved twice");
    }
    out.push_back(std::move(o));
  }
  return {};
}

const Service* ServiceRegistry::find(std::uint32_t id) const noexcept {
  auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : &it->second;
}

bool ServiceRegistry::remove(std::uint32_t id) { return by_id_.erase(id) != 0; }

}  // namespace ferry::daemon
