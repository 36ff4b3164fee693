// Attach handshake on the client socket (`RUNTIME_DIR/ferryd.sock`, a
// SOCK_SEQPACKET Unix socket). The client sends one AttachRequest; ferryd
// answers with one AttachReply carrying, with SCM_RIGHTS and in this order,
// the segment memfd, the SQ doorbell (an eventfd: client writes, daemon
// sleeps on it, never reading it) and the CQ doorbell (the read end of a
// pipe whose write end only the daemon holds: daemon writes, client sleeps
// on it; shm/doorbell.h). The
// connection then stays open for the client's lifetime: its hang-up is how
// ferryd learns a client is gone, and the client learns the daemon is gone.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "shm/segment_layout.h"

namespace ferry::shm {

inline constexpr std::uint64_t kAttachMagic = 0x4843544154594646ull;  // "FFYATTCH"
inline constexpr std::size_t kAttachFdCount = 3;
inline constexpr std::size_t kClientNameBytes = 32;

struct AttachRequest {
  std::uint64_t magic;
  std::uint32_t abi_version;
  std::uint32_t pid;            // informational; ferryd trusts SO_PEERCRED instead
  SegmentSizes sizes;           // 0 fields ask for the daemon's defaults
  char name[kClientNameBytes];  // NUL padded, for logs and ferryctl clients
  std::uint32_t engine;         // the engine asked for, index + 1; 0: ferryd's choice (FERRY_ENGINE)
  std::uint32_t reserved;       // must be 0
};
static_assert(std::is_standard_layout_v<AttachRequest>);
static_assert(sizeof(AttachRequest) == 80);
static_assert(offsetof(AttachRequest, engine) == 72);

struct AttachReply {
  std::uint64_t magic;
  std::uint32_t abi_version;
  std::uint8_t status;  // ferry::Status; fds are attached only when Ok
  std::uint8_t reserved0[3];
  std::uint32_t client_id;
  std::uint32_t engine;  // the engine the client was placed on (index)
  std::uint64_t segment_bytes;
  std::uint64_t daemon_epoch;
};
static_assert(std::is_standard_layout_v<AttachReply>);
static_assert(sizeof(AttachReply) == 40);

}  // namespace ferry::shm
