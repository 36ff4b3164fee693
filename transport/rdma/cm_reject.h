// Why an rdma listener rejected a connection request, as the private data
// of its reject (rdma_reject): 8 bytes, "ferry", version 1, a reason byte,
// a zero. A dialler tells a full peer from an unreachable one by it, as
// the tcp transport's Goodbye(Busy) tells it (docs/protocol.md, "No
// room"), and logs why a peer refused rather than calling it unreachable.
#pragma once

#include <array>
#include <cstddef>
#include <cstring>

namespace ferry::transport::rdma {

enum class CmReject : unsigned char {
  Unknown = 0,        // no reason given (another listener, or a ferry before the reasons)
  NoRoom = 'B',       // no free slot: rdma-max-connections, transport/accept_guard.h
  NoQp = 'Q',         // the listener could not make a QP for it (resources; its log says why)
  OtherDevice = 'D',  // the request arrived on a device other than the listener's
};

inline constexpr std::array<unsigned char, 8> cm_reject_data(CmReject why) noexcept {
  return {'f', 'e', 'r', 'r', 'y', 1, static_cast<unsigned char>(why), 0};
}

// A REJECTED event's reason. The IB connection manager pads a reject's
// private data to its full size (148 bytes), so the prefix decides.
inline CmReject cm_reject_reason(const void* data, std::size_t len) noexcept {
  constexpr std::array<unsigned char, 6> kPrefix = {'f', 'e', 'r', 'r', 'y', 1};
  if (data == nullptr || len < 8 || std::memcmp(data, kPrefix.data(), kPrefix.size()) != 0) return CmReject::Unknown;
  switch (const auto why = static_cast<CmReject>(static_cast<const unsigned char*>(data)[6])) {
    case CmReject::NoRoom:
    case CmReject::NoQp:
    case CmReject::OtherDevice: return why;
    default: return CmReject::Unknown;
  }
}

// What a dialler logs for it.
inline const char* cm_reject_text(CmReject why) noexcept {
  switch (why) {
    case CmReject::NoRoom: return "the peer has no free connection slot";
    case CmReject::NoQp: return "the peer could not make a QP for it (its log says why: memory, QP limits)";
    case CmReject::OtherDevice: return "the request reached a device of the peer other than the one it listens on";
    case CmReject::Unknown: break;
  }
  return "rejected";
}

}  // namespace ferry::transport::rdma
