// How long ferry waits before it tries again something that keeps failing
// on its own initiative: 100 ms, doubling to 2 s while the failures go on,
// from 100 ms again after a success. One policy for every such retry (a
// listener out of descriptors, a worker's endpoint to a shard that went
// away, a Python shard server attaching to a restarted ferryd), so that
// the docs' "at most every 100 ms, doubling to 2 s" holds for each.
#pragma once

#include <algorithm>
#include <chrono>

namespace ferry {

class RetryPause {
 public:
  static constexpr std::chrono::milliseconds kFirst{100};
  static constexpr std::chrono::milliseconds kMax{2000};

  // The pause before the next try, after one more failure.
  [[nodiscard]] std::chrono::milliseconds next() noexcept {
    const std::chrono::milliseconds pause = next_;
    next_ = std::min(kMax, next_ * 2);
    return pause;
  }
  // What next() would return, without counting a failure.
  [[nodiscard]] std::chrono::milliseconds peek() const noexcept { return next_; }
  // A success: the next failure pauses kFirst again.
  void reset() noexcept { next_ = kFirst; }

 private:
  std::chrono::milliseconds next_ = kFirst;
};

}  // namespace ferry
