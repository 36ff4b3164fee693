#include "client/src/inline_store.h"

#include "shm/ring_entries.h"

namespace ferry::client_detail {

namespace {
constexpr std::size_t kAlign = 64;
static_assert(shm::kInlineMaxBytes % kAlign == 0, "every slot starts on a cache line");
}  // namespace

InlineStore::InlineStore(std::uint32_t slots)
    : storage_(new std::byte[std::size_t{slots} * shm::kInlineMaxBytes + kAlign]),
      bytes_(std::size_t{slots} * shm::kInlineMaxBytes),
      free_(slots),
      taken_(slots, false) {
  const auto at = reinterpret_cast<std::uintptr_t>(storage_.get());
  base_ = storage_.get() + ((kAlign - at % kAlign) % kAlign);
  // Popped from the back: slot 0 first.
  for (std::uint32_t i = 0; i < slots; ++i) free_[i] = slots - 1 - i;
}

std::byte* InlineStore::take() noexcept {
  if (free_.empty()) return nullptr;
  const std::uint32_t slot = free_.back();
  free_.pop_back();
  taken_[slot] = true;
  return base_ + std::size_t{slot} * shm::kInlineMaxBytes;
}

bool InlineStore::give_back(const std::byte* data) noexcept {
  if (!holds(data)) return false;
  const auto at = static_cast<std::size_t>(data - base_);
  if (at % shm::kInlineMaxBytes != 0) return false;
  const auto slot = static_cast<std::uint32_t>(at / shm::kInlineMaxBytes);
  if (!taken_[slot]) return false;
  taken_[slot] = false;
  free_.push_back(slot);  // never past its capacity: the slot was taken
  ++given_back_;
  return true;
}

}  // namespace ferry::client_detail
