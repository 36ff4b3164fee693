#include "daemon/config/config_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <set>
#include <string_view>

#include "daemon/config/config_keys.h"

namespace ferry::daemon {

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

const char* file_kind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

}  // namespace

Error read_config_file(const std::string& path, bool missing_ok, std::string* text, bool* missing) {
  *missing = false;
  text->clear();
  const std::string what = "config file " + path + ": ";
  // O_NONBLOCK: opening a FIFO must not wait for a writer; the fstat below
  // refuses it anyway. Everything after the open looks at this one fd.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) {
    if (missing_ok && errno == ENOENT) {
      *missing = true;
      return {};
    }
    return Error::bad_request("cannot read " + what + std::strerror(errno));
  }
  struct stat st {};
  Error bad;
  if (::fstat(fd, &st) != 0) {
    bad = Error::bad_request("cannot read " + what + std::strerror(errno));
  } else if (!S_ISREG(st.st_mode)) {
    bad = Error::bad_request(what + "is " + file_kind(st.st_mode) + ", not a regular file");
  } else if (static_cast<std::uint64_t>(st.st_size) > kMaxConfigFileBytes) {
    bad = Error::bad_request(what + "is " + std::to_string(st.st_size) + " bytes; at most " +
                             std::to_string(kMaxConfigFileBytes) + " are read");
  }
  while (bad.ok()) {
    char buf[8192];
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) bad = Error::bad_request("cannot read " + what + std::strerror(errno));
    if (n <= 0) break;
    text->append(buf, static_cast<std::size_t>(n));
    // The size was checked, but a file may grow while it is read.
    if (text->size() > kMaxConfigFileBytes)
      bad = Error::bad_request(what + "grew past " + std::to_string(kMaxConfigFileBytes) + " bytes");
  }
  ::close(fd);
  return bad;
}

Error parse_config_text(const std::string& path, const std::string& text, std::vector<FileEntry>* out) {
  out->clear();
  std::set<std::string, std::less<>> seen;
  std::string_view rest = text;
  for (int line_no = 1; !rest.empty(); ++line_no) {
    const auto nl = rest.find('\n');
    std::string_view line = rest.substr(0, nl);
    rest = nl == std::string_view::npos ? std::string_view{} : rest.substr(nl + 1);
    const std::string where = path + ":" + std::to_string(line_no) + ": ";
    // A comment: '#' at the start, or after white space (a value may hold '#').
    for (std::size_t i = 0; i < line.size(); ++i) {
      if (line[i] == '#' && (i == 0 || line[i - 1] == ' ' || line[i - 1] == '\t')) {
        line = line.substr(0, i);
        break;
      }
    }
    line = trim(line);
    if (line.empty()) continue;
    if (line.front() == '[')
      return Error::bad_request(where + "sections ('" + std::string(line) + "') are not part of ferryd.conf");
    const auto eq = line.find('=');
    if (eq == std::string_view::npos)
      return Error::bad_request(where + "expected 'key = value', got '" + std::string(line) + "'");
    const std::string key(trim(line.substr(0, eq)));
    const std::string value(trim(line.substr(eq + 1)));
    const ConfigKey* k = find_key(key);
    if (k == nullptr) return Error::bad_request(where + "unknown key '" + key + "' (ferryd --help lists the keys)");
    if (k->scope != Scope::Anywhere) {
      return Error::bad_request(where + "'" + key + "' is a command-line option, not a configuration key");
    }
    if (!seen.insert(key).second) return Error::bad_request(where + "'" + key + "' is set twice");
    out->push_back(FileEntry{key, value, line_no});
  }
  return {};
}

}  // namespace ferry::daemon
