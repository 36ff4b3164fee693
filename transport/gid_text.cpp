#include "transport/gid_text.h"

#include <arpa/inet.h>

#include <charconv>
#include <cstdio>
#include <fstream>

namespace ferry::transport {

std::string read_sysfs_line(const std::string& path) {
  std::ifstream in(path);
  std::string s;
  if (!in || !std::getline(in, s)) return {};
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

Result<std::string> ipv4_mapped_gid(std::string_view ipv4) {
  in_addr a{};
  const std::string s(ipv4);
  if (inet_pton(AF_INET, s.c_str(), &a) != 1) return Result<std::string>::fail(Status::BadRequest);
  const auto* b = reinterpret_cast<const unsigned char*>(&a.s_addr);
  char buf[64];
  std::snprintf(buf, sizeof buf, "0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x", b[0], b[1], b[2], b[3]);
  return Result<std::string>::ok(buf);
}

Result<std::string> mapped_ipv4(std::string_view gid) {
  static constexpr std::string_view kPrefix = "0000:0000:0000:0000:0000:ffff:";
  if (gid.size() != kPrefix.size() + 9 || !gid.starts_with(kPrefix) || gid[kPrefix.size() + 4] != ':')
    return Result<std::string>::fail(Status::BadRequest);
  unsigned hi = 0, lo = 0;
  const char* p = gid.data() + kPrefix.size();
  auto parse = [](const char* from, unsigned& v) {
    const auto r = std::from_chars(from, from + 4, v, 16);
    return r.ec == std::errc{} && r.ptr == from + 4;
  };
  if (!parse(p, hi) || !parse(p + 5, lo)) return Result<std::string>::fail(Status::BadRequest);
  return Result<std::string>::ok(std::to_string(hi >> 8) + "." + std::to_string(hi & 255) + "." +
                                 std::to_string(lo >> 8) + "." + std::to_string(lo & 255));
}

}  // namespace ferry::transport
