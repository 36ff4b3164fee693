// Where libferry keeps the payloads of inline deliveries (shm::kCqFlagInline)
// from poll() until release(): fixed slots of shm::kInlineMaxBytes, as many
// as the daemon's window (shm::inline_window), allocated once at attach and
// private to the process, so the daemon's ring slots are free as soon as
// they are copied out. Releasing one is counting it: the running count goes
// to the CQ's RingHeader::released, where the daemon reads it to open its
// window again; no ReleaseRx, no system call.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace ferry::client_detail {

class InlineStore {
 public:
  explicit InlineStore(std::uint32_t slots);

  // A slot for one payload (64-byte aligned); nullptr when every slot is
  // taken, which a daemon that keeps to its window never causes.
  [[nodiscard]] std::byte* take() noexcept;
  // Whether `data` points into the store (a delivery of it, not of the rx arena).
  bool holds(const std::byte* data) const noexcept { return data >= base_ && data < base_ + bytes_; }
  // Gives back the slot that starts at `data`: false (and nothing changes)
  // for anything but a taken slot's start, e.g. a delivery released twice.
  [[nodiscard]] bool give_back(const std::byte* data) noexcept;
  // Slots given back so far (wraps), for RingHeader::released.
  std::uint32_t given_back() const noexcept { return given_back_; }

 private:
  std::unique_ptr<std::byte[]> storage_;
  std::byte* base_ = nullptr;  // storage_, rounded up to a cache line
  std::size_t bytes_ = 0;
  std::vector<std::uint32_t> free_;  // stack of free slot indices
  std::vector<bool> taken_;
  std::uint32_t given_back_ = 0;
};

}  // namespace ferry::client_detail
