// Slots for the work requests whose local memory is a client's (zero-copy
// eager sends and replies from its registered tx arena, tcp writes straight
// from it, READs into its rx arena): the segment and its MR must outlive
// each of them. A slot holds the client and the op's own tag; the WR is
// posted signaled with the slot's tag (wr_tag.h), and its completion, which
// every posted WR has (success, error or flush on close), frees the slot.
// Preallocated: one slot per WR that may name client memory at once (the
// transport's send queues plus the lanes' backlogs); with none free an op
// waits rather than go untracked. Engine thread only.
#pragma once

#include <cstdint>
#include <vector>

namespace ferry::daemon {

class ZeroCopy {
 public:
  static constexpr std::uint32_t kSlots = 65536;

  ZeroCopy();
  bool available() const noexcept { return !free_.empty(); }
  // The WR's tag, or 0 when every slot is busy.
  [[nodiscard]] std::uint64_t track(std::uint32_t client, std::uint64_t inner_tag) noexcept;
  struct Done {
    std::uint32_t client = 0;
    std::uint64_t inner_tag = 0;  // 0: not a live slot
  };
  [[nodiscard]] Done done(std::uint64_t tag) noexcept;

 private:
  struct Slot {
    std::uint32_t client = 0;
    std::uint64_t inner_tag = 0;
  };
  std::vector<Slot> slots_;
  std::vector<std::uint32_t> free_;
};

}  // namespace ferry::daemon
