// The rings between engines: one single-producer/single-consumer ring per
// ordered pair (Seastar's smp queues), so engines share nothing on the
// datapath. CrossRings owns them all (made before the engine threads start);
// each engine holds a CrossLink: its rings out (it alone produces) and in (it
// alone consumes).
//
// Sending never fails: a full ring spills into a private queue of the
// sender, drained into the ring, in order, on its next turns (what is in
// flight between two engines is bounded by the clients' outstanding ops, as
// a client's CQ overflow is). A receiver about to sleep announces it on each
// ring in (ring.h's doorbell protocol); a sender that finds the announcement
// wakes it through its wake fd.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <vector>

#include "daemon/engines/cross_msg.h"
#include "shm/ring.h"

namespace ferry::daemon {

inline constexpr std::uint32_t kCrossRingEntries = 1024;
static_assert(shm::is_power_of_two(kCrossRingEntries));
inline constexpr std::uint32_t kCrossBatch = 32;  // taken from one ring per turn

class CrossRings {
 public:
  // `wake_fds[e]`: the eventfd that wakes engine e's sleep. Rings of a pair
  // are mapped lazily: untouched pages cost nothing.
  explicit CrossRings(std::vector<int> wake_fds);
  ~CrossRings();
  CrossRings(const CrossRings&) = delete;
  CrossRings& operator=(const CrossRings&) = delete;

  std::uint32_t engines() const noexcept { return static_cast<std::uint32_t>(wake_fds_.size()); }
  int wake_fd(std::uint32_t engine) const noexcept { return wake_fds_[engine]; }
  shm::RingHeader* header(std::uint32_t from, std::uint32_t to) const noexcept;
  CrossMsg* entries(std::uint32_t from, std::uint32_t to) const noexcept;

 private:
  std::vector<int> wake_fds_;
  std::byte* memory_ = nullptr;
  std::size_t bytes_ = 0;
  std::size_t ring_bytes_ = 0;
};

class CrossLink {
 public:
  CrossLink() = default;
  CrossLink(CrossRings& rings, std::uint32_t self);

  std::uint32_t self() const noexcept { return self_; }
  std::uint32_t engines() const noexcept { return static_cast<std::uint32_t>(out_.size()); }
  bool single() const noexcept { return out_.size() <= 1; }

  // Hands `m` to engine `to` (never itself). It is woken, if it sleeps, at
  // the next flush(): one doorbell check per ring per turn, not per message.
  void send(std::uint32_t to, const CrossMsg& m) noexcept;
  // End of a turn: spilled messages into their rings, then the doorbells of
  // engines sent to that sleep. Returns how many spilled messages went.
  std::size_t flush() noexcept;
  bool spilling() const noexcept { return spilled_ != 0; }
  // Up to kCrossBatch messages from each ring in; f(from, msg) for each.
  template <typename F>
  std::size_t poll(F&& f) {
    std::size_t n = 0;
    CrossMsg batch[kCrossBatch];
    for (std::uint32_t e = 0; e < in_.size(); ++e) {
      if (e == self_) continue;
      const std::uint32_t got = in_[e].pop_batch(batch, kCrossBatch);
      for (std::uint32_t i = 0; i < got; ++i) f(e, batch[i]);
      n += got;
    }
    received_ += n;
    return n;
  }
  // Sleep protocol over every ring in: false when one has work (announcements undone).
  bool prepare_to_sleep() noexcept;
  void woke_up() noexcept;

  // Messages sent to and received from other engines (status: cross_engine_out/in).
  std::uint64_t sent() const noexcept { return sent_; }
  std::uint64_t received() const noexcept { return received_; }

 private:
  bool push(std::uint32_t to, const CrossMsg& m) noexcept;

  std::uint32_t self_ = 0;
  CrossRings* rings_ = nullptr;
  std::vector<shm::RingProducer<CrossMsg>> out_;
  std::vector<shm::RingConsumer<CrossMsg>> in_;
  std::vector<std::deque<CrossMsg>> spill_;
  std::vector<std::uint8_t> dirty_;  // sent to since the last flush
  std::size_t spilled_ = 0;
  std::uint64_t sent_ = 0;
  std::uint64_t received_ = 0;
};

}  // namespace ferry::daemon
