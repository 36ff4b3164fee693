// SlotMemory: one reservation for every slot's buffers (the header).
#include "transport/tcp/tcp_slot_memory.h"

#include <sys/mman.h>
#include <unistd.h>

#include <new>
#include <type_traits>

#include "transport/sparse_pages.h"

namespace ferry::transport::tcp {
namespace {

static_assert(std::is_trivially_default_constructible_v<PendingWr> && std::is_trivially_destructible_v<PendingWr>,
              "send queue entries live in raw mapped pages");

std::size_t page_round(std::size_t n) noexcept {
  const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  return (n + page - 1) / page * page;
}

}  // namespace

SlotMemory::SlotMemory(std::uint32_t slots, std::size_t rx_bytes) noexcept
    : hot_bytes_(page_round(sizeof(PendingWr) * kSqHotEntries * slots)),
      sq_bytes_(page_round(sizeof(PendingWr) * (kSendQueueDepth - kSqHotEntries))),
      rx_bytes_(page_round(rx_bytes)),
      stride_(sq_bytes_ + rx_bytes_),
      bytes_(hot_bytes_ + stride_ * slots) {
  base_ = map_sparse(bytes_);
  if (base_ == nullptr) return;
  slots_ = base_ + hot_bytes_;
  // Begin the entries' lifetimes; default-initialising a trivial type
  // writes nothing, so no page is touched.
  ::new (static_cast<void*>(base_)) PendingWr[std::size_t{kSqHotEntries} * slots];
  for (std::uint32_t s = 0; s < slots; ++s) {
    ::new (static_cast<void*>(slots_ + s * stride_)) PendingWr[kSendQueueDepth - kSqHotEntries];
  }
}

SlotMemory::~SlotMemory() { unmap_sparse(base_, bytes_); }

PendingWr* SlotMemory::hot(std::uint32_t slot) const noexcept {
  return std::launder(reinterpret_cast<PendingWr*>(base_)) + std::size_t{slot} * kSqHotEntries;
}

PendingWr* SlotMemory::sq(std::uint32_t slot) const noexcept {
  return std::launder(reinterpret_cast<PendingWr*>(slots_ + slot * stride_));
}

void SlotMemory::release_sq(std::uint32_t slot) noexcept {
  (void)::madvise(slots_ + slot * stride_, sq_bytes_, MADV_DONTNEED);
}

void SlotMemory::release_rx(std::uint32_t slot) noexcept { (void)::madvise(rx(slot), rx_bytes_, MADV_DONTNEED); }

}  // namespace ferry::transport::tcp
