// The `peers` array of `ferryctl --control PATH status --json`, read the
// way an operator would (through the real ferryctl binary, $FERRYCTL) and
// checked strictly against the channel contract: a missing or mistyped
// field is an error naming the field.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "ferry/error.h"

namespace ferry::mhtest {

struct ChannelView {
  std::uint64_t id = 0;
  std::string state;
  std::string transport;
  std::uint64_t tx_msgs = 0, rx_msgs = 0, tx_bytes = 0, rx_bytes = 0, inflight = 0;
};

struct PeerView {
  std::string address;
  std::uint64_t epoch = 0;
  std::string state;
  std::vector<ChannelView> channels;
  std::uint64_t endpoints = 0;
  double heartbeat_rtt_us = 0;
  double since_s = 0;

  std::uint64_t tx_msgs() const;
  std::uint64_t rx_msgs() const;
};

// One entry of status "rails" (several NICs per host, docs/rails.md).
struct RailView {
  std::string name, address, state;
  std::uint64_t lanes = 0, tx_bytes = 0, failures = 0, returns = 0;
};

struct StatusView {
  std::vector<PeerView> peers;
  std::vector<RailView> rails;                    // empty on tcp
  std::map<std::string, std::uint64_t> counters;  // the daemon's `counters` object
  std::size_t engines = 1;                        // entries of its `engines` array

  // A counter by name; 0 when the daemon does not report it.
  std::uint64_t counter(const std::string& name) const {
    auto it = counters.find(name);
    return it == counters.end() ? 0 : it->second;
  }
};

// Runs ferryctl and parses its output into *view. BadRequest when FERRYCTL
// is not set, PeerUnreachable when the run fails (the daemon does not
// answer), ProtocolError on bad JSON or a contract field that is missing or
// has the wrong type.
Error read_status(const std::string& control, StatusView* view);

// The entry whose address equals `address`, or nullptr.
const PeerView* find_peer(const StatusView& s, const std::string& address);

// Polls read_status until `pred` holds or `within` passes; *last (when
// given) gets the last view read (nullopt only when none could be read).
// Fails when `pred` did not hold in time: with the last read's Error when
// that read failed, else Timeout.
template <typename Pred>
Error poll_status(const std::string& control, std::chrono::milliseconds within, Pred pred,
                  std::optional<StatusView>* last = nullptr) {
  const auto deadline = std::chrono::steady_clock::now() + within;
  if (last != nullptr) last->reset();
  for (;;) {
    StatusView s;
    Error read = read_status(control, &s);
    if (read.ok()) {
      const bool held = pred(s);
      if (last != nullptr) *last = std::move(s);
      if (held) return {};
    }
    if (std::chrono::steady_clock::now() > deadline) {
      if (read.failed()) return read;
      return Error(Status::Timeout,
                   "status did not reach the awaited state in " + std::to_string(within.count()) + " ms");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(25));  // polling ferryctl with a deadline
  }
}

// One line per peer: address, state, channels, endpoints, counters.
std::string describe(const StatusView& s);

}  // namespace ferry::mhtest
