// Everything written from the descriptor table (config_keys.h): --help
// lines, --version, --describe, and the three checked-in documents (the
// example ferryd.conf, the man page's option list, the configuration
// reference in docs/). The tool ferryd-config-docs (config_docs_main.cpp)
// writes or checks the documents; the ops test config-docs fails when a
// checked-in copy differs from what the table makes.
#pragma once

#include <string>
#include <string_view>

#include "daemon/config/config_keys.h"
#include "ferry/error.h"

namespace ferry::daemon {

// One option's --help text: summary, then [default; range; SIGHUP].
std::string help_line(const ConfigKey& key);
// The value placeholder --help shows (DIR, N, rdma|tcp|auto).
std::string help_value_name(const ConfigKey& key);
// "ferryd VERSION" and whether the fault switches are compiled in.
std::string version_text();
// --describe: a JSON array with one object per option.
std::string describe_keys_json();

// The documents.
std::string example_conf();        // daemon/conf/ferryd.conf, whole
std::string man_options();         // daemon/man/ferryd.8, between the markers
std::string reference_markdown();  // docs/configuration.md, between the markers

// Markers around a generated block inside a hand-written file.
struct Markers {
  std::string_view begin;
  std::string_view end;
};
inline constexpr Markers kManMarkers{".\\\" BEGIN GENERATED OPTIONS", ".\\\" END GENERATED OPTIONS"};
inline constexpr Markers kMarkdownMarkers{"<!-- BEGIN GENERATED REFERENCE -->", "<!-- END GENERATED REFERENCE -->"};

// *out = `file` with the lines between the two marker lines replaced by
// `block` (which ends with '\n'); fails when the markers are missing or out
// of order.
Error splice(const std::string& file, const Markers& m, const std::string& block, std::string* out);

}  // namespace ferry::daemon
