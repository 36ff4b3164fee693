// Index of a slot for a new entry in a table that reuses freed slots (LIFO:
// the hottest slot is the next one taken) and grows only past its
// high-water mark. Shared by the call table and the remote-op table.
#pragma once

#include <cstdint>
#include <vector>

namespace ferry::daemon {

struct TakenSlot {
  std::uint32_t index;
  bool fresh;  // appended: the table grew by one default-constructed slot
};

template <class Slots>
TakenSlot take_free_slot(Slots& slots, std::vector<std::uint32_t>& free) {
  if (!free.empty()) {
    const std::uint32_t index = free.back();
    free.pop_back();
    return {index, false};
  }
  slots.emplace_back();
  return {static_cast<std::uint32_t>(slots.size() - 1), true};
}

}  // namespace ferry::daemon
