// `ferryctl top`: a live view of counter rates, refreshed in place.
#pragma once

#include <string>

#include "base/json.h"
#include "control/ferryctl_options.h"

namespace ferry::ctl {

// One frame from two successive status results `dt_s` seconds apart;
// `prev` may be null (first frame: totals only, rates shown as '-').
std::string render_top_frame(const json::Value* prev, const json::Value& cur, double dt_s, double interval_s);
// The --json form of a frame: {"uptime_s","counters":{..},"interval_s",
// "rates":{name: per-second double},"cpu_percent"}; the last three only
// from the second frame on (a rate needs two samples).
json::Value top_json(const json::Value* prev, const json::Value& cur, double dt_s);

// Runs until q, Ctrl-C or o.count refreshes; returns the exit code.
int run_top(const Options& o);

}  // namespace ferry::ctl
