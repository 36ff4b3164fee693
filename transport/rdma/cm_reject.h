// Why an rdma listener rejected a connection request, as the private data
// of its reject (rdma_reject): the one reason it gives is "no free slot"
// (rdma-max-connections, the admission rules of transport/accept_guard.h),
// so a dialler can tell a full peer from an unreachable one, as the tcp
// transport's Goodbye(Busy) tells it (docs/protocol.md, "No room").
// Other rejects (a request on another device, a QP that could not be made)
// carry nothing.
#pragma once

#include <array>
#include <cstddef>
#include <cstring>

namespace ferry::transport::rdma {

// "ferry", version 1, 'B' for Busy, a zero.
inline constexpr std::array<unsigned char, 8> kNoRoomReject = {'f', 'e', 'r', 'r', 'y', 1, 'B', 0};

// Whether a REJECTED event's private data is kNoRoomReject. The IB
// connection manager pads a reject's private data to its full size (148
// bytes), so the prefix decides.
inline bool says_no_room(const void* data, std::size_t len) noexcept {
  return data != nullptr && len >= kNoRoomReject.size() &&
         std::memcmp(data, kNoRoomReject.data(), kNoRoomReject.size()) == 0;
}

}  // namespace ferry::transport::rdma
