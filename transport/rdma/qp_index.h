// qp_num -> connection slot, for receive completions: with a shared receive
// queue a receive CQE names its QP only by wc.qp_num (the receive's wr_id
// names a pool slot, not a connection). Open addressing with linear probing
// and backward-shift deletion in a fixed table twice the connection count,
// so a lookup on the datapath allocates nothing and touches a cache line or
// two. Insert/erase on the control path (QP creation and teardown).
#pragma once

#include <bit>
#include <cstdint>
#include <memory>

namespace ferry::transport::rdma {

class QpIndex {
 public:
  static constexpr std::uint32_t kNone = 0xFFFFFFFFu;

  explicit QpIndex(std::uint32_t max_entries)
      : mask_(std::bit_ceil(2 * (max_entries < 1 ? 1 : max_entries)) - 1), keys_(new Entry[mask_ + 1]) {}

  void insert(std::uint32_t qp_num, std::uint32_t slot) noexcept {
    std::uint32_t i = hash(qp_num);
    while (keys_[i].slot != kNone && keys_[i].qp_num != qp_num) i = (i + 1) & mask_;
    keys_[i] = Entry{qp_num, slot};
  }
  // The slot of qp_num, or kNone.
  std::uint32_t find(std::uint32_t qp_num) const noexcept {
    for (std::uint32_t i = hash(qp_num);; i = (i + 1) & mask_) {
      if (keys_[i].slot == kNone) return kNone;
      if (keys_[i].qp_num == qp_num) return keys_[i].slot;
    }
  }
  void erase(std::uint32_t qp_num) noexcept {
    std::uint32_t i = hash(qp_num);
    while (keys_[i].qp_num != qp_num || keys_[i].slot == kNone) {
      if (keys_[i].slot == kNone) return;
      i = (i + 1) & mask_;
    }
    // Backward shift: move later entries of the run into the hole so no
    // lookup stops early at it.
    for (std::uint32_t j = (i + 1) & mask_; keys_[j].slot != kNone; j = (j + 1) & mask_) {
      const std::uint32_t home = hash(keys_[j].qp_num);
      // Entry j may move to i when its home is not in (i, j] cyclically.
      if (((j - home) & mask_) >= ((j - i) & mask_)) {
        keys_[i] = keys_[j];
        i = j;
      }
    }
    keys_[i] = Entry{};
  }

 private:
  struct Entry {
    std::uint32_t qp_num = 0;
    std::uint32_t slot = kNone;
  };
  std::uint32_t hash(std::uint32_t q) const noexcept { return (q * 0x9E3779B1u) >> 8 & mask_; }

  std::uint32_t mask_;
  std::unique_ptr<Entry[]> keys_;
};

}  // namespace ferry::transport::rdma
