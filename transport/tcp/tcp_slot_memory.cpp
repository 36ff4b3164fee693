// SlotMemory: one reservation for every slot's buffers (the header).
#include "transport/tcp/tcp_slot_memory.h"

#include <sys/mman.h>
#include <unistd.h>

#include <new>
#include <type_traits>

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
  void* p = ::mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return;
  base_ = static_cast<std::byte*>(p);
  slots_ = base_ + hot_bytes_;
  // Begin the entries' lifetimes; default-initialising a trivial type
  // writes nothing, so no page is touched.
  ::new (static_cast<void*>(base_)) PendingWr[std::size_t{kSqHotEntries} * slots];
  for (std::uint32_t s = 0; s < slots; ++s) {
    ::new (static_cast<void*>(slots_ + s * stride_)) PendingWr[kSendQueueDepth - kSqHotEntries];
  }
}

SlotMemory::~SlotMemory() {
  if (base_ != nullptr) ::munmap(base_, bytes_);
}

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
