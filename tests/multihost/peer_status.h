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

// Runs ferryctl; nullopt with *error on a failed run, bad JSON or a
// contract field that is missing or has the wrong type.
std::optional<StatusView> read_status(const std::string& control, std::string* error);

// The entry whose address equals `address`, or nullptr.
const PeerView* find_peer(const StatusView& s, const std::string& address);

// Polls read_status until `pred` holds or `within` passes; returns the last
// view read (nullopt only when none could be read) and sets *held.
template <typename Pred>
std::optional<StatusView> poll_status(const std::string& control, std::chrono::milliseconds within, Pred pred,
                                      bool* held, std::string* error) {
  const auto deadline = std::chrono::steady_clock::now() + within;
  std::optional<StatusView> last;
  *held = false;
  for (;;) {
    if (auto s = read_status(control, error)) {
      last = std::move(s);
      if (pred(*last)) {
        *held = true;
        return last;
      }
    }
    if (std::chrono::steady_clock::now() > deadline) return last;
    std::this_thread::sleep_for(std::chrono::milliseconds(25));  // polling ferryctl with a deadline
  }
}

// One line per peer: address, state, channels, endpoints, counters.
std::string describe(const StatusView& s);

}  // namespace ferry::mhtest
