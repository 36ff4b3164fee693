#include "tests/multihost/peer_status.h"

#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "base/json.h"

namespace ferry::mhtest {

namespace {

bool get_uint(const json::Value& o, const char* key, std::uint64_t* out, const std::string& where, std::string* error) {
  const json::Value* v = o.find(key);
  const auto u = v ? v->as_uint() : std::nullopt;
  if (!u) {
    *error = where + ": field '" + key + "' " + (v ? "is not a non-negative integer" : "is missing");
    return false;
  }
  *out = *u;
  return true;
}

bool get_number(const json::Value& o, const char* key, double* out, const std::string& where, std::string* error) {
  const json::Value* v = o.find(key);
  const auto d = v ? v->as_double() : std::nullopt;
  if (!d) {
    *error = where + ": field '" + key + "' " + (v ? "is not a number" : "is missing");
    return false;
  }
  *out = *d;
  return true;
}

bool get_string(const json::Value& o, const char* key, std::string* out, const std::string& where, std::string* error) {
  const json::Value* v = o.find(key);
  const std::string* s = v ? v->as_string() : nullptr;
  if (!s) {
    *error = where + ": field '" + key + "' " + (v ? "is not a string" : "is missing");
    return false;
  }
  *out = *s;
  return true;
}

bool parse_channel(const json::Value& c, ChannelView* out, const std::string& where, std::string* error) {
  return get_uint(c, "id", &out->id, where, error) && get_string(c, "state", &out->state, where, error) &&
         get_string(c, "transport", &out->transport, where, error) &&
         get_uint(c, "tx_msgs", &out->tx_msgs, where, error) && get_uint(c, "rx_msgs", &out->rx_msgs, where, error) &&
         get_uint(c, "tx_bytes", &out->tx_bytes, where, error) &&
         get_uint(c, "rx_bytes", &out->rx_bytes, where, error) && get_uint(c, "inflight", &out->inflight, where, error);
}

bool parse_peer(const json::Value& p, PeerView* out, const std::string& where, std::string* error) {
  if (!(get_string(p, "address", &out->address, where, error) && get_uint(p, "epoch", &out->epoch, where, error) &&
        get_string(p, "state", &out->state, where, error) && get_uint(p, "endpoints", &out->endpoints, where, error) &&
        get_number(p, "heartbeat_rtt_us", &out->heartbeat_rtt_us, where, error) &&
        get_number(p, "since_s", &out->since_s, where, error)))
    return false;
  const json::Value* ch = p.find("channels");
  const json::Array* arr = ch ? ch->as_array() : nullptr;
  if (!arr) {
    *error = where + ": field 'channels' " + (ch ? "is not an array" : "is missing");
    return false;
  }
  for (std::size_t i = 0; i < arr->size(); ++i) {
    ChannelView c;
    if (!parse_channel((*arr)[i], &c, where + ".channels[" + std::to_string(i) + "]", error)) return false;
    out->channels.push_back(c);
  }
  return true;
}

}  // namespace

std::uint64_t PeerView::tx_msgs() const {
  std::uint64_t n = 0;
  for (const auto& c : channels) n += c.tx_msgs;
  return n;
}

std::uint64_t PeerView::rx_msgs() const {
  std::uint64_t n = 0;
  for (const auto& c : channels) n += c.rx_msgs;
  return n;
}

std::optional<StatusView> read_status(const std::string& control, std::string* error) {
  const char* ctl = std::getenv("FERRYCTL");
  if (ctl == nullptr || *ctl == '\0') {
    *error = "FERRYCTL is not set (run through meson test)";
    return std::nullopt;
  }
  const std::string cmd = std::string(ctl) + " --control " + control + " status --json 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) {
    *error = "popen failed";
    return std::nullopt;
  }
  std::string out;
  char buf[4096];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  const int rc = ::pclose(p);
  if (rc != 0) {
    *error = "`" + cmd + "` failed (" + std::to_string(rc) + "): " + out;
    return std::nullopt;
  }
  json::ParseError pe;
  const auto v = json::parse(out, &pe);
  if (!v || !v->is_object()) {
    *error = "status --json is not one JSON object (" + pe.message + "): " + out.substr(0, 400);
    return std::nullopt;
  }
  const json::Value* peers = v->find("peers");
  const json::Array* arr = peers ? peers->as_array() : nullptr;
  if (!arr) {
    *error = std::string("status: field 'peers' ") + (peers ? "is not an array" : "is missing");
    return std::nullopt;
  }
  StatusView s;
  for (std::size_t i = 0; i < arr->size(); ++i) {
    PeerView pv;
    if (!parse_peer((*arr)[i], &pv, "peers[" + std::to_string(i) + "]", error)) return std::nullopt;
    s.peers.push_back(std::move(pv));
  }
  if (const json::Value* rails = v->find("rails"); rails != nullptr && rails->as_array() != nullptr) {
    for (const json::Value& r : *rails->as_array()) {
      RailView rv;
      const std::string where = "rails[" + std::to_string(s.rails.size()) + "]";
      if (!get_string(r, "name", &rv.name, where, error) || !get_string(r, "address", &rv.address, where, error) ||
          !get_string(r, "state", &rv.state, where, error) || !get_uint(r, "lanes", &rv.lanes, where, error) ||
          !get_uint(r, "tx_bytes", &rv.tx_bytes, where, error) ||
          !get_uint(r, "failures", &rv.failures, where, error) || !get_uint(r, "returns", &rv.returns, where, error)) {
        return std::nullopt;
      }
      s.rails.push_back(std::move(rv));
    }
  }
  if (const json::Value* engines = v->find("engines"); engines != nullptr && engines->as_array() != nullptr) {
    s.engines = engines->as_array()->size();
  }
  if (const json::Value* counters = v->find("counters"); counters != nullptr && counters->is_object()) {
    for (const auto& [name, value] : *counters->as_object()) s.counters[name] = value.as_uint().value_or(0);
  }
  return s;
}

const PeerView* find_peer(const StatusView& s, const std::string& address) {
  for (const auto& p : s.peers)
    if (p.address == address) return &p;
  return nullptr;
}

std::string describe(const StatusView& s) {
  std::ostringstream o;
  o << s.peers.size() << " peer(s)";
  for (const auto& p : s.peers) {
    o << "\n  " << p.address << " state=" << p.state << " epoch=" << p.epoch << " endpoints=" << p.endpoints
      << " rtt_us=" << p.heartbeat_rtt_us << " channels=" << p.channels.size() << " [";
    for (const auto& c : p.channels)
      o << " {id=" << c.id << " " << c.state << " " << c.transport << " tx=" << c.tx_msgs << " rx=" << c.rx_msgs
        << " inflight=" << c.inflight << "}";
    o << " ]";
  }
  return o.str();
}

}  // namespace ferry::mhtest
