// Human-readable rendering of control-socket results for ferryctl: aligned
// tables with a header row. Renderers accept any JSON (a daemon newer or
// older than ferryctl may add or omit fields) and never fail.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/json.h"

namespace ferry::ctl {

using Row = std::vector<std::string>;

// Columns padded to their widest cell; all-numeric columns right-aligned.
std::string format_table(const Row& headers, const std::vector<Row>& rows, std::string_view indent = "");

// A JSON value as one table cell: strings bare, arrays of scalars joined by
// ',', null as '-', anything else compact JSON.
std::string cell_text(const json::Value& v);
std::string format_bytes(std::uint64_t bytes);      // "512 B", "64.0 MiB"
std::string format_duration(std::int64_t seconds);  // "3d 04h 05m 06s", "42s"

// The status for a screen: the daemon, its engines, its peers and the
// counters that are not 0, grouped (render_status_all: every counter).
std::string render_status(const json::Value& status);
std::string render_status_all(const json::Value& status);
// The "engines" array as a table (status, top); "" when there is none.
std::string render_engines(const json::Value& status, std::string_view indent = "  ");
// The group a counter is shown under (status).
std::string_view counter_group(std::string_view name) noexcept;
std::string render_clients(const json::Value& clients);
std::string render_counters(const json::Value& counters);
// An array of objects as a table: `preferred` columns first (when present in
// any row), then the remaining keys sorted. `empty` is printed for [].
std::string render_object_list(const json::Value& list, const std::vector<std::string>& preferred,
                               std::string_view empty, std::string_view indent = "");

// Credit columns hold one number per lane ("127,120"); rnr_naks is the
// daemon-wide count repeated per peer.
inline const std::vector<std::string> kPeerColumns{"addr",
                                                   "host",
                                                   "state",
                                                   "transport",
                                                   "epoch",
                                                   "qps",
                                                   "rtt_us",
                                                   "lane_credits",
                                                   "lane_credits_owed",
                                                   "lane_backlog",
                                                   "lane_credit_stalls",
                                                   "window_ops",
                                                   "window_bytes",
                                                   "window_stalls",
                                                   "reads_inflight",
                                                   "rnr_naks"};
inline const std::vector<std::string> kChannelColumns{"peer", "addr", "state", "transport", "qps", "epoch"};

}  // namespace ferry::ctl
