// Forward declarations of the peer layer's types that the remote components
// hold by pointer or reference (their headers need not include the channel
// manager's).
#pragma once

namespace ferry::daemon::peer {
class ChannelManager;
struct Channel;
struct PeerInfo;
}  // namespace ferry::daemon::peer
