#include "tests/multihost/peer_status.h"

#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "base/json.h"

namespace ferry::mhtest {

namespace {

// A field that breaks the contract: the daemon's output is at fault.
Error field_error(const std::string& where, const char* key, bool present, const char* wrong) {
  return Error(Status::ProtocolError,
               where + ": field '" + key + "' " + (present ? std::string(wrong) : std::string("is missing")));
}

Error get_uint(const json::Value& o, const char* key, std::uint64_t* out, const std::string& where) {
  const json::Value* v = o.find(key);
  const auto u = v ? v->as_uint() : std::nullopt;
  if (!u) return field_error(where, key, v != nullptr, "is not a non-negative integer");
  *out = *u;
  return {};
}

Error get_number(const json::Value& o, const char* key, double* out, const std::string& where) {
  const json::Value* v = o.find(key);
  const auto d = v ? v->as_double() : std::nullopt;
  if (!d) return field_error(where, key, v != nullptr, "is not a number");
  *out = *d;
  return {};
}

Error get_string(const json::Value& o, const char* key, std::string* out, const std::string& where) {
  const json::Value* v = o.find(key);
  const std::string* s = v ? v->as_string() : nullptr;
  if (!s) return field_error(where, key, v != nullptr, "is not a string");
  *out = *s;
  return {};
}

Error parse_channel(const json::Value& c, ChannelView* out, const std::string& where) {
  if (Error e = get_uint(c, "id", &out->id, where); e.failed()) return e;
  if (Error e = get_string(c, "state", &out->state, where); e.failed()) return e;
  if (Error e = get_string(c, "transport", &out->transport, where); e.failed()) return e;
  if (Error e = get_uint(c, "tx_msgs", &out->tx_msgs, where); e.failed()) return e;
  if (Error e = get_uint(c, "rx_msgs", &out->rx_msgs, where); e.failed()) return e;
  if (Error e = get_uint(c, "tx_bytes", &out->tx_bytes, where); e.failed()) return e;
  if (Error e = get_uint(c, "rx_bytes", &out->rx_bytes, where); e.failed()) return e;
  return get_uint(c, "inflight", &out->inflight, where);
}

Error parse_peer(const json::Value& p, PeerView* out, const std::string& where) {
  if (Error e = get_string(p, "address", &out->address, where); e.failed()) return e;
  if (Error e = get_uint(p, "epoch", &out->epoch, where); e.failed()) return e;
  if (Error e = get_string(p, "state", &out->state, where); e.failed()) return e;
  if (Error e = get_uint(p, "endpoints", &out->endpoints, where); e.failed()) return e;
  if (Error e = get_number(p, "heartbeat_rtt_us", &out->heartbeat_rtt_us, where); e.failed()) return e;
  if (Error e = get_number(p, "since_s", &out->since_s, where); e.failed()) return e;
  const json::Value* ch = p.find("channels");
  const json::Array* arr = ch ? ch->as_array() : nullptr;
  if (!arr) return field_error(where, "channels", ch != nullptr, "is not an array");
  for (std::size_t i = 0; i < arr->size(); ++i) {
    ChannelView c;
    if (Error e = parse_channel((*arr)[i], &c, where + ".channels[" + std::to_string(i) + "]"); e.failed()) return e;
    out->channels.push_back(c);
  }
  return {};
}

Error parse_rail(const json::Value& r, RailView* out, const std::string& where) {
  if (Error e = get_string(r, "name", &out->name, where); e.failed()) return e;
  if (Error e = get_string(r, "address", &out->address, where); e.failed()) return e;
  if (Error e = get_string(r, "state", &out->state, where); e.failed()) return e;
  if (Error e = get_uint(r, "lanes", &out->lanes, where); e.failed()) return e;
  if (Error e = get_uint(r, "tx_bytes", &out->tx_bytes, where); e.failed()) return e;
  if (Error e = get_uint(r, "failures", &out->failures, where); e.failed()) return e;
  return get_uint(r, "returns", &out->returns, where);
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

Error read_status(const std::string& control, StatusView* view) {
  const char* ctl = std::getenv("FERRYCTL");
  if (ctl == nullptr || *ctl == '\0') return Error::bad_request("FERRYCTL is not set (run through meson test)");
  const std::string cmd = std::string(ctl) + " --control " + control + " status --json 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return Error(Status::NoMemory, "popen failed");  // no pipe, process or memory
  std::string out;
  char buf[4096];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  const int rc = ::pclose(p);
  if (rc != 0) return Error(Status::PeerUnreachable, "`" + cmd + "` failed (" + std::to_string(rc) + "): " + out);
  json::ParseError pe;
  const auto v = json::parse(out, &pe);
  if (!v || !v->is_object()) {
    return Error(Status::ProtocolError,
                 "status --json is not one JSON object (" + pe.message + "): " + out.substr(0, 400));
  }
  const json::Value* peers = v->find("peers");
  const json::Array* arr = peers ? peers->as_array() : nullptr;
  if (!arr) return field_error("status", "peers", peers != nullptr, "is not an array");
  StatusView s;
  for (std::size_t i = 0; i < arr->size(); ++i) {
    PeerView pv;
    if (Error e = parse_peer((*arr)[i], &pv, "peers[" + std::to_string(i) + "]"); e.failed()) return e;
    s.peers.push_back(std::move(pv));
  }
  if (const json::Value* rails = v->find("rails"); rails != nullptr && rails->as_array() != nullptr) {
    for (const json::Value& r : *rails->as_array()) {
      RailView rv;
      if (Error e = parse_rail(r, &rv, "rails[" + std::to_string(s.rails.size()) + "]"); e.failed()) return e;
      s.rails.push_back(std::move(rv));
    }
  }
  if (const json::Value* engines = v->find("engines"); engines != nullptr && engines->as_array() != nullptr) {
    s.engines = engines->as_array()->size();
  }
  if (const json::Value* counters = v->find("counters"); counters != nullptr && counters->is_object()) {
    for (const auto& [name, value] : *counters->as_object()) s.counters[name] = value.as_uint().value_or(0);
  }
  *view = std::move(s);
  return {};
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
