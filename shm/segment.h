// Creating (daemon side) and mapping (client side) a client segment.
// The memfd is sealed against shrinking and growing, so a client can never
// truncate it under the daemon's mapping (which would SIGBUS the daemon).
#pragma once

#include <cstddef>
#include <cstdint>

#include "ferry/result.h"
#include "shm/ring.h"
#include "shm/ring_entries.h"
#include "shm/segment_layout.h"

namespace ferry::shm {

// An owned MAP_SHARED mapping (and optionally its fd). Move-only.
class Mapping {
 public:
  Mapping() = default;
  Mapping(void* base, std::size_t bytes, int fd) noexcept : base_(base), bytes_(bytes), fd_(fd) {}
  ~Mapping();
  Mapping(Mapping&& o) noexcept;
  Mapping& operator=(Mapping&& o) noexcept;
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;

  std::byte* base() const noexcept { return static_cast<std::byte*>(base_); }
  std::size_t bytes() const noexcept { return bytes_; }
  int fd() const noexcept { return fd_; }  // -1 once released or for fd-less mappings
  int release_fd() noexcept;               // caller takes the fd; mapping stays

 private:
  void reset() noexcept;
  void* base_ = nullptr;
  std::size_t bytes_ = 0;
  int fd_ = -1;
};

// Typed pointers into a mapped segment. Sizes come from the trusted side:
// the daemon's own layout, or (client) the header after validation.
struct SegmentView {
  std::byte* base = nullptr;
  SegmentHeader* header = nullptr;
  RingHeader* sq_header = nullptr;
  SqEntry* sq_entries = nullptr;
  std::uint32_t sq_capacity = 0;
  RingHeader* cq_header = nullptr;
  CqEntry* cq_entries = nullptr;
  std::uint32_t cq_capacity = 0;
  SegmentLayout layout{};

  std::byte* at(std::uint64_t offset) const noexcept { return base + offset; }
};

struct CreatedSegment {
  Mapping mapping;  // owns the memfd (sealed) and the daemon's mapping
  SegmentView view;
};

// Daemon side: memfd_create + ftruncate + seal + mmap, header and both ring
// headers formatted. `sizes` must satisfy valid_sizes().
Result<CreatedSegment> create_segment(const SegmentSizes& sizes, std::uint32_t client_id, std::uint64_t daemon_epoch,
                                      std::uint64_t max_message_bytes);

struct MappedSegment {
  Mapping mapping;
  SegmentView view;
};

// Client side: maps the fd received at attach (takes ownership of it) and
// checks magic, version, and that every offset and size in the header is
// consistent with the fd's real size. VersionMismatch / BadRequest on failure.
Result<MappedSegment> map_segment(int fd);

// Builds a view from a layout (both sides use it once sizes are trusted).
SegmentView make_view(std::byte* base, const SegmentSizes& sizes) noexcept;

}  // namespace ferry::shm
