// Descriptor of a registered remote buffer: what a zero-copy Call carries
// for its response buffer (the server RDMA-WRITEs into it) and what a
// RendezvousReq carries for its source (the receiver RDMA-READs it).
//
//   off size field
//     0    8 addr    remote virtual address
//     8    4 rkey    remote key, scoped to this buffer where the NIC allows
//    12    4 length  bytes, > 0
//    16      total
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "transport/wire/wire_error.h"

namespace ferry::wire {

inline constexpr std::size_t kRemoteBufferBytes = 16;

struct RemoteBuffer {
  std::uint64_t addr = 0;
  std::uint32_t rkey = 0;
  std::uint32_t length = 0;

  friend bool operator==(const RemoteBuffer&, const RemoteBuffer&) = default;
};

void encode_remote_buffer(const RemoteBuffer& rb, std::span<std::byte, kRemoteBufferBytes> out) noexcept;

// Truncated when in.size() < kRemoteBufferBytes; BadField when length is 0
// or addr + length wraps around. `out` is written only on success.
[[nodiscard]] WireError decode_remote_buffer(std::span<const std::byte> in, RemoteBuffer& out) noexcept;

}  // namespace ferry::wire
