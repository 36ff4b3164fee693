// JSON shapes of the channel table for `status` (peers), `peers` and
// `channels` (control/control_protocol.h; ferryctl's columns in
// control/ferryctl_tables.h). Control thread only, on a PeerInfo copy.
#pragma once

#include <vector>

#include "base/json.h"
#include "daemon/peer/channel_manager.h"

namespace ferry::daemon::peer {

// [{address, addr, epoch, state, transport, qps, channels:[{id, lane, state,
//   transport, tx_msgs, rx_msgs, tx_bytes, rx_bytes, inflight, credits,
//   credits_owed, backlog, credit_stalls}], endpoints, heartbeat_rtt_us,
//   rtt_us, since_s, initiated, window_ops, window_bytes, window_stalls,
//   reads_inflight, rnr_naks (daemon-wide), lane_credits, lane_credits_owed,
//   lane_backlog, lane_credit_stalls (one number per lane)}]
json::Value peers_json(const std::vector<PeerInfo>& peers);
// One row per data connection: [{peer, addr, id, state, transport, qps,
//   epoch, tx_msgs, rx_msgs, tx_bytes, rx_bytes, inflight, credits,
//   credits_owed, backlog, credit_stalls}]
json::Value channels_json(const std::vector<PeerInfo>& peers);

}  // namespace ferry::daemon::peer
