#include "daemon/serve/call_table.h"

#include "daemon/loop/free_slots.h"

namespace ferry::daemon {

CallTable::CallTable(std::uint64_t key, std::size_t reserve) : key_(key) {
  slots_.reserve(reserve);
  free_.reserve(reserve);
}

std::uint64_t CallTable::insert(const PendingCall& call) {
  const std::uint32_t index = take_free_slot(slots_, free_).index;
  Slot& s = slots_[index];
  s.call = call;
  s.live = true;
  ++s.generation;
  ++live_;
  std::uint64_t raw = (std::uint64_t{s.generation} << 32) | (std::uint64_t{index} + 1);
  std::uint64_t token = raw ^ key_;
  if (token == 0) {  // the one (slot, generation) that would encode as 0: skip it
    s.live = false;
    --live_;
    free_.push_back(index);
    return insert(call);
  }
  return token;
}

bool CallTable::decode(std::uint64_t token, std::uint32_t* index) const noexcept {
  const std::uint64_t raw = token ^ key_;
  const std::uint32_t low = static_cast<std::uint32_t>(raw);
  if (low == 0 || low > slots_.size()) return false;
  const Slot& s = slots_[low - 1];
  if (!s.live || s.generation != static_cast<std::uint32_t>(raw >> 32)) return false;
  *index = low - 1;
  return true;
}

PendingCall* CallTable::find(std::uint64_t token) noexcept {
  std::uint32_t index;
  return decode(token, &index) ? &slots_[index].call : nullptr;
}

void CallTable::erase(std::uint64_t token) noexcept {
  std::uint32_t index;
  if (decode(token, &index)) release(index);
}

void CallTable::release(std::uint32_t index) noexcept {
  slots_[index].live = false;
  --live_;
  free_.push_back(index);  // capacity reserved alongside slots_
}

}  // namespace ferry::daemon
