#include "daemon/remote/remote_ops.h"

namespace ferry::daemon {

RemoteOpTable::RemoteOpTable(std::size_t reserve, std::uint32_t first_generation)
    : first_generation_(first_generation & WrTag::kGenerationMask) {
  free_.reserve(reserve);
}

std::uint64_t RemoteOpTable::insert(RemoteOp op) {
  std::uint32_t index;
  if (!free_.empty()) {
    index = free_.back();
    free_.pop_back();
  } else {
    index = static_cast<std::uint32_t>(slots_.size());
    slots_.emplace_back();  // grows only past the high-water mark
    slots_.back().generation = first_generation_;
  }
  Slot& s = slots_[index];
  s.op = std::move(op);
  s.live = true;
  s.generation = s.generation >= WrTag::kGenerationMask ? 1 : s.generation + 1;  // 30 bits, never 0
  ++live_;
  return token_of(index);
}

RemoteOp* RemoteOpTable::find(std::uint64_t token) noexcept {
  const auto low = static_cast<std::uint32_t>(token);
  if (low == 0 || low > slots_.size()) return nullptr;
  Slot& s = slots_[low - 1];
  if (!s.live || s.generation != static_cast<std::uint32_t>(token >> 32)) return nullptr;
  return &s.op;
}

RemoteOp* RemoteOpTable::find_slot(std::uint32_t low, std::uint64_t* token) noexcept {
  if (low == 0 || low > slots_.size() || !slots_[low - 1].live) return nullptr;
  *token = token_of(low - 1);
  return &slots_[low - 1].op;
}

void RemoteOpTable::erase(std::uint64_t token) noexcept {
  if (find(token) != nullptr) release(static_cast<std::uint32_t>(token) - 1);
}

void RemoteOpTable::release(std::uint32_t index) noexcept {
  slots_[index].live = false;
  slots_[index].op.service.clear();
  --live_;
  free_.push_back(index);  // capacity reserved alongside slots_
}

}  // namespace ferry::daemon
