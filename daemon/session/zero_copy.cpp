#include "daemon/session/zero_copy.h"

#include "daemon/remote/wr_tag.h"

namespace ferry::daemon {

ZeroCopy::ZeroCopy() : slots_(kSlots) {
  free_.reserve(kSlots);
  for (std::uint32_t i = kSlots; i-- > 0;) free_.push_back(i);
}

std::uint64_t ZeroCopy::track(std::uint32_t client, std::uint64_t inner_tag) noexcept {
  if (free_.empty()) return 0;
  const std::uint32_t slot = free_.back();
  free_.pop_back();
  slots_[slot] = Slot{client, inner_tag};
  return WrTag::zero_copy(slot);
}

ZeroCopy::Done ZeroCopy::done(std::uint64_t tag) noexcept {
  const WrTag t = WrTag::decode(tag);
  if (t.kind != WrKind::ZeroCopy || t.slot >= slots_.size() || slots_[t.slot].inner_tag == 0) return {};
  const Slot s = slots_[t.slot];
  slots_[t.slot] = Slot{};
  free_.push_back(t.slot);  // capacity reserved for every slot
  return Done{s.client, s.inner_tag};
}

}  // namespace ferry::daemon
