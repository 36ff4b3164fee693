#include "daemon/engines/cross_link.h"

#include <sys/mman.h>
#include <unistd.h>

#include <new>
#include <stdexcept>

namespace ferry::daemon {

namespace {

constexpr std::size_t round_up(std::size_t v, std::size_t to) { return (v + to - 1) / to * to; }

}  // namespace

CrossRings::CrossRings(std::vector<int> wake_fds) : wake_fds_(std::move(wake_fds)) {
  const std::size_t n = wake_fds_.size();
  ring_bytes_ = round_up(sizeof(shm::RingHeader) + sizeof(CrossMsg) * kCrossRingEntries, 4096);
  bytes_ = ring_bytes_ * n * n;
  if (n <= 1) return;  // one engine: nothing to cross
  void* p = ::mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::runtime_error("cannot map the rings between engines");  // start-up only
  memory_ = static_cast<std::byte*>(p);
  for (std::uint32_t a = 0; a < n; ++a) {
    for (std::uint32_t b = 0; b < n; ++b) {
      if (a != b) shm::ring_init(new (header(a, b)) shm::RingHeader);
    }
  }
}

CrossRings::~CrossRings() {
  if (memory_ != nullptr) ::munmap(memory_, bytes_);
}

shm::RingHeader* CrossRings::header(std::uint32_t from, std::uint32_t to) const noexcept {
  return reinterpret_cast<shm::RingHeader*>(memory_ + ring_bytes_ * (std::size_t{from} * engines() + to));
}

CrossMsg* CrossRings::entries(std::uint32_t from, std::uint32_t to) const noexcept {
  return reinterpret_cast<CrossMsg*>(reinterpret_cast<std::byte*>(header(from, to)) + sizeof(shm::RingHeader));
}

CrossLink::CrossLink(CrossRings& rings, std::uint32_t self) : self_(self), rings_(&rings) {
  const std::uint32_t n = rings.engines();
  out_.resize(n);
  in_.resize(n);
  spill_.resize(n);
  dirty_.assign(n, 0);
  for (std::uint32_t e = 0; e < n; ++e) {
    if (e == self) continue;
    out_[e] = shm::RingProducer<CrossMsg>(rings.header(self, e), rings.entries(self, e), kCrossRingEntries);
    in_[e] = shm::RingConsumer<CrossMsg>(rings.header(e, self), rings.entries(e, self), kCrossRingEntries);
  }
}

bool CrossLink::push(std::uint32_t to, const CrossMsg& m) noexcept {
  if (!out_[to].try_push(m)) return false;
  dirty_[to] = 1;
  return true;
}

void CrossLink::send(std::uint32_t to, const CrossMsg& m) noexcept {
  ++sent_;
  if (spill_[to].empty() && push(to, m)) return;
  spill_[to].push_back(m);  // allocates only while a ring is full (bounded: see the header)
  ++spilled_;
}

std::size_t CrossLink::flush() noexcept {
  std::size_t moved = 0;
  for (std::uint32_t e = 0; e < out_.size(); ++e) {
    if (spilled_ != 0) {
      std::deque<CrossMsg>& q = spill_[e];
      while (!q.empty() && push(e, q.front())) {
        q.pop_front();
        --spilled_;
        ++moved;
      }
    }
    if (dirty_[e] == 0) continue;
    dirty_[e] = 0;
    if (out_[e].claim_doorbell()) {
      const std::uint64_t one = 1;
      [[maybe_unused]] const auto r = ::write(rings_->wake_fd(e), &one, sizeof one);  // eventfd: never blocks
    }
  }
  return moved;
}

bool CrossLink::prepare_to_sleep() noexcept {
  for (std::uint32_t e = 0; e < in_.size(); ++e) {
    if (e == self_) continue;
    if (!in_[e].prepare_to_sleep()) {
      for (std::uint32_t d = 0; d < e; ++d) {
        if (d != self_) in_[d].woke_up();
      }
      return false;
    }
  }
  return true;
}

void CrossLink::woke_up() noexcept {
  for (std::uint32_t e = 0; e < in_.size(); ++e) {
    if (e != self_) in_[e].woke_up();
  }
}

}  // namespace ferry::daemon
