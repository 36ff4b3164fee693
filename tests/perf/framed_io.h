// Blocking, length-prefixed messages over a stream socket: what a typical
// kernel-socket RPC stack does (a 4-byte little-endian length, then the
// payload, written with one writev). Used by the uds-rpc and tcp-rpc
// baselines and their servers.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ferry::bench {

inline constexpr std::uint32_t kMaxFrameBytes = 256u << 20;

bool write_exact(int fd, const void* data, std::size_t len);
bool read_exact(int fd, void* data, std::size_t len);
// Header and payload in one writev (one syscall for small messages).
bool write_frame(int fd, const void* payload, std::uint32_t len);
// Reads one frame header; false on EOF/error or a length over kMaxFrameBytes.
bool read_frame_header(int fd, std::uint32_t* len);

}  // namespace ferry::bench
