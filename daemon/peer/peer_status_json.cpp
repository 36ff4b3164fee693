#include "daemon/peer/peer_status_json.h"

#include <string>

namespace ferry::daemon::peer {

namespace {

std::string address_of(const PeerInfo& p) {
  return p.address.empty() ? "accepted#" + std::to_string(p.channel) : p.address;
}

json::Value lane_json(const PeerInfo& p, std::uint32_t i) {
  json::Object o;
  o["id"] = json::Value(static_cast<std::uint64_t>(p.lane_ids[i]));
  o["lane"] = json::Value(static_cast<std::uint64_t>(i));
  o["state"] = std::string(to_string(p.state));
  o["transport"] = std::string(transport::to_string(p.transport));
  o["tx_msgs"] = json::Value(p.lanes[i].tx_msgs);
  o["rx_msgs"] = json::Value(p.lanes[i].rx_msgs);
  o["tx_bytes"] = json::Value(p.lanes[i].tx_bytes);
  o["rx_bytes"] = json::Value(p.lanes[i].rx_bytes);
  o["inflight"] = json::Value(p.lanes[i].inflight);
  o["credits"] = json::Value(static_cast<std::uint64_t>(p.lanes[i].credits));
  o["credits_owed"] = json::Value(static_cast<std::uint64_t>(p.lanes[i].credits_owed));
  o["backlog"] = json::Value(static_cast<std::uint64_t>(p.lanes[i].backlog));
  o["credit_stalls"] = json::Value(p.lanes[i].credit_stalls);
  o["unconfirmed"] = json::Value(static_cast<std::uint64_t>(p.lanes[i].unconfirmed));
  o["tx_seq"] = json::Value(static_cast<std::uint64_t>(p.lanes[i].tx_seq));
  o["rx_seq"] = json::Value(static_cast<std::uint64_t>(p.lanes[i].rx_seq));
  o["acked"] = json::Value(static_cast<std::uint64_t>(p.lanes[i].acked));
  o["retransmits"] = json::Value(p.lanes[i].retransmits);
  o["rebuilds"] = json::Value(p.lanes[i].rebuilds);
  return json::Value(std::move(o));
}

// One value per lane, in lane order: a scalar array, so ferryctl's tables
// show it as one "a,b,c" cell.
template <typename Field>
json::Value per_lane(const PeerInfo& p, Field field) {
  json::Array a;
  for (std::uint32_t i = 0; i < p.lane_count; ++i) a.emplace_back(static_cast<std::uint64_t>(field(p.lanes[i])));
  return json::Value(std::move(a));
}

}  // namespace

json::Value peers_json(const std::vector<PeerInfo>& peers) {
  json::Array a;
  for (const PeerInfo& p : peers) {
    json::Object o;
    const std::string addr = address_of(p);
    o["address"] = addr;
    o["addr"] = addr;  // ferryctl's column name
    o["channel"] = json::Value(static_cast<std::uint64_t>(p.channel));
    o["epoch"] = json::Value(p.epoch);
    o["state"] = std::string(to_string(p.state));
    o["transport"] = std::string(transport::to_string(p.transport));
    o["engine"] = json::Value(static_cast<std::uint64_t>(p.engine));
    o["qps"] = json::Value(static_cast<std::uint64_t>(p.lane_count));
    json::Array lanes;
    for (std::uint32_t i = 0; i < p.lane_count; ++i) lanes.push_back(lane_json(p, i));
    o["channels"] = json::Value(std::move(lanes));
    o["endpoints"] = json::Value(static_cast<std::uint64_t>(p.endpoints));
    o["heartbeat_rtt_us"] = json::Value(p.rtt_us);
    o["rtt_us"] = json::Value(p.rtt_us);
    o["since_s"] = json::Value(p.since_s);
    o["initiated"] = p.initiated;
    o["window_ops"] = json::Value(static_cast<std::uint64_t>(p.window_ops));
    o["window_bytes"] = json::Value(p.window_bytes);
    o["window_stalls"] = json::Value(p.window_stalls);
    o["reads_inflight"] = json::Value(static_cast<std::uint64_t>(p.reads_inflight));
    o["rnr_naks"] = json::Value(p.rnr_naks);  // daemon-wide: the transport has no per-QP count
    o["lane_credits"] = per_lane(p, [](const LaneStats& s) { return s.credits; });
    o["lane_credits_owed"] = per_lane(p, [](const LaneStats& s) { return s.credits_owed; });
    o["lane_backlog"] = per_lane(p, [](const LaneStats& s) { return s.backlog; });
    o["lane_credit_stalls"] = per_lane(p, [](const LaneStats& s) { return s.credit_stalls; });
    a.emplace_back(std::move(o));
  }
  return json::Value(std::move(a));
}

json::Value channels_json(const std::vector<PeerInfo>& peers) {
  json::Array a;
  for (const PeerInfo& p : peers) {
    for (std::uint32_t i = 0; i < p.lane_count; ++i) {
      json::Value row = lane_json(p, i);
      json::Object& o = *row.as_object();
      o["peer"] = address_of(p);
      o["addr"] = address_of(p);
      o["qps"] = json::Value(static_cast<std::uint64_t>(p.lane_count));
      o["epoch"] = json::Value(p.epoch);
      a.push_back(std::move(row));
    }
  }
  return json::Value(std::move(a));
}

}  // namespace ferry::daemon::peer
