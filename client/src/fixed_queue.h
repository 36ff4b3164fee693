// A FIFO with capacity fixed at construction: storage is allocated once at
// attach, so pushing and popping on the datapath never allocates.
#pragma once

#include <cstdint>
#include <vector>

namespace ferry::client_detail {

template <typename T>
class FixedQueue {
 public:
  explicit FixedQueue(std::uint32_t capacity) : items_(capacity) {}

  bool push(const T& v) noexcept {
    if (count_ == items_.size()) return false;
    items_[(head_ + count_) % items_.size()] = v;
    ++count_;
    return true;
  }
  const T& front() const noexcept { return items_[head_]; }
  void pop() noexcept {
    head_ = (head_ + 1) % static_cast<std::uint32_t>(items_.size());
    --count_;
  }
  bool empty() const noexcept { return count_ == 0; }
  bool full() const noexcept { return count_ == items_.size(); }
  std::uint32_t size() const noexcept { return count_; }

 private:
  std::vector<T> items_;
  std::uint32_t head_ = 0;
  std::uint32_t count_ = 0;
};

}  // namespace ferry::client_detail
