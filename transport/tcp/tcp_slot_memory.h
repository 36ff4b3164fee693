// Address space for every connection slot's send queue and receive buffer,
// reserved in one mapping at construction and committed by the kernel only
// where a connection writes. A slot that closes gives its pages back, so
// the resident size follows the connections in use (and the bytes they
// buffered), not kMaxConnections: an idle transport of 1,024 slots costs
// about what one of 64 did.
//
// Layout: first every slot's kSqHotEntries first send queue entries, side
// by side (an idle connection's few sends share pages with its
// neighbours'); then per slot the rest of its send queue and its receive
// buffer (rx_bytes), each rounded up to whole pages so each can be given
// back on its own. Setup and close only (mmap, madvise); the datapath just
// uses the pointers.
#pragma once

#include <cstddef>
#include <cstdint>

#include "transport/tcp/tcp_connection.h"

namespace ferry::transport::tcp {

class SlotMemory {
 public:
  // Reserves slots x (send queue + rx_bytes), MAP_NORESERVE: no commit
  // charge until written. mapped() is false when the kernel refused.
  SlotMemory(std::uint32_t slots, std::size_t rx_bytes) noexcept;
  ~SlotMemory();
  SlotMemory(const SlotMemory&) = delete;
  SlotMemory& operator=(const SlotMemory&) = delete;

  bool mapped() const noexcept { return base_ != nullptr; }
  PendingWr* hot(std::uint32_t slot) const noexcept;  // kSqHotEntries
  PendingWr* sq(std::uint32_t slot) const noexcept;   // kSendQueueDepth - kSqHotEntries
  std::byte* rx(std::uint32_t slot) const noexcept { return slots_ + slot * stride_ + sq_bytes_; }
  // Gives a slot's pages back (MADV_DONTNEED: they read as zero and cost
  // nothing until written again). The caller guarantees that nobody still
  // reads them: a send queue once every WR was reported, a receive buffer
  // once the Recv completions that point into it expired. (The hot entries
  // stay: a few hundred bytes a slot, on pages shared with other slots.)
  void release_sq(std::uint32_t slot) noexcept;
  void release_rx(std::uint32_t slot) noexcept;

  std::size_t reserved_bytes() const noexcept { return bytes_; }

 private:
  std::size_t hot_bytes_ = 0;
  std::size_t sq_bytes_ = 0;
  std::size_t rx_bytes_ = 0;
  std::size_t stride_ = 0;
  std::size_t bytes_ = 0;
  std::byte* base_ = nullptr;
  std::byte* slots_ = nullptr;  // base_ + hot_bytes_
};

}  // namespace ferry::transport::tcp
