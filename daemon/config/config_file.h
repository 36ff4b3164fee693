// The configuration file: read once through one descriptor (never a
// directory, device or FIFO, never more than kMaxConfigFileBytes) and split
// into key = value entries checked against the descriptor table. Start-up
// and SIGHUP only.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "ferry/error.h"

namespace ferry::daemon {

inline constexpr std::size_t kMaxConfigFileBytes = 1u << 20;

// Reads `path` into *text. `missing_ok`: a file that does not exist is not
// an error (*missing is set; the default file is optional). Returns
// BadRequest with a message naming the file, or Ok.
[[nodiscard]] Error read_config_file(const std::string& path, bool missing_ok, std::string* text, bool* missing);

struct FileEntry {
  std::string key;
  std::string value;
  int line = 0;
};

// INI text: "key = value" lines, '#' starts a comment (at the start of a
// line, or after white space), blank lines ignored. Every key must be a
// configuration key of the table (not a command-line-only one) and appear
// once. Failures are BadRequest, their messages naming `path` and the line.
[[nodiscard]] Error parse_config_text(const std::string& path, const std::string& text, std::vector<FileEntry>* out);

}  // namespace ferry::daemon
