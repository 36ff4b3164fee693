// Prometheus text exposition (format 0.0.4) of a ferryd status result, so
// `ferryctl metrics` can back a node-exporter textfile or a scrape shim.
#pragma once

#include <string>
#include <string_view>

#include "base/json.h"

namespace ferry::ctl {

// Metrics rendered (every family with # HELP and # TYPE):
//   ferry_info{version,transport} 1            gauge
//   ferry_uptime_seconds                       gauge
//   ferry_clients                              gauge
//   ferry_peers                                gauge
//   ferry_cpu_seconds_total{mode=user|system}  counter (when reported)
//   ferry_<counter>_total                      counter, one per status.counters
//                                              member (name sanitised)
// Non-numeric or missing fields are skipped, never invented.
std::string render_prometheus(const json::Value& status);

// [a-zA-Z0-9_] only, never starting with a digit: a safe metric-name part.
std::string sanitize_metric_name(std::string_view name);
// Label value escaping per the exposition format: \\, \" and \n.
std::string escape_label_value(std::string_view value);

}  // namespace ferry::ctl
