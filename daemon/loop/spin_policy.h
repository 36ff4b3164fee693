// How long the engine spins on an idle stretch before it sleeps (adaptive
// back-off, docs/design.md). A daemon with nothing in flight spins
// engine-spin-us, so an idle daemon costs ~0 CPU. After a turn that did
// work, while calls or remote operations the engine handled are in flight,
// an answer is due soon: it spins engine-spin-inflight-us instead, sparing
// the round trip the wake-ups of a sleeping engine (a CQ event or doorbell,
// then a scheduler wake-up). A wake-up that finds nothing to do gets the
// short spin again, so a call held for long costs one long spin, not one
// per wake-up.
//
// The long spin only pays when answers come within it. The policy keeps a
// moving average of how often the wait for work after such a turn ended
// within engine-spin-inflight-us, whether the engine spun or slept through
// it (record_wait). A wait that outlasts the spin wastes the whole spin; a
// caught one saves a wake-up (tens of microseconds). The policy spends at
// most half a spin of CPU per wake-up saved: when fewer than two thirds of
// recent waits ended within the spin (servers that compute for
// milliseconds, or a daemon that sees one quick message and then waits long
// for each answer), the engine takes the short spin and sleeps, and goes
// back to the long spin once answers come quickly again (their waits are
// measured through the sleep).
//
// With hold (engine-spin-hold) the in-flight spin does not turn itself off:
// while answers are due the engine spins up to kHoldNs. That is right where
// a sleep and wake-up cost more than the spin: on a software RDMA provider
// the "NIC" is kernel work on the same CPUs (the engine yields to it every
// idle turn) and in a VM a wake-up is priced by the host. Not while a bulk
// transfer is in flight (a rendezvous READ, a reply WRITTEN into a window):
// there the provider has much work to do on those CPUs, and two held spins
// were measured to slow a 1 MiB call 3.6x; the adaptive spin applies then.
// A large transfer (one of at least engine-spin-bulk-bytes started since
// nothing was last in flight) gets no in-flight spin at all where the hold
// applies: the engine sleeps after the idle spin, as phase 1's datapath did
// once its adaptive spin had turned itself off, since the provider's copy
// work on those CPUs takes milliseconds while a wake-up takes far less.
#pragma once

#include <algorithm>
#include <cstdint>

namespace ferry::daemon {

// What is in flight while answers are due (Engine::transfer_inflight).
enum class Transfer : std::uint8_t {
  Small,  // messages only: the hold applies
  Bulk,   // a rendezvous READ or an op with an exposed buffer: the adaptive spin
  Large,  // a transfer of engine-spin-bulk-bytes or more (hold mode only): no in-flight spin
};

class SpinPolicy {
 public:
  // Longest held spin: far beyond any round trip, short of a call's timeout.
  static constexpr std::uint64_t kHoldNs = 100'000'000;

  SpinPolicy(std::uint32_t idle_us, std::uint32_t inflight_us, bool hold = false) noexcept
      : idle_ns_(std::uint64_t{idle_us} * 1000),
        inflight_ns_(std::max(idle_ns_, std::uint64_t{inflight_us} * 1000)),
        hold_(hold) {}

  // True when the stretch is one where the long spin applies: it began with
  // a turn that did work (not with a wake-up) and answers are due (calls or
  // remote operations in flight).
  static bool awaits_answers(bool after_work, bool answers_due) noexcept { return after_work && answers_due; }

  std::uint64_t budget_ns(bool after_work, bool answers_due, Transfer t = Transfer::Small) const noexcept {
    if (!awaits_answers(after_work, answers_due)) return idle_ns_;
    if (t == Transfer::Large) return idle_ns_;
    if (hold_ && t == Transfer::Small) return std::max(idle_ns_, kHoldNs);
    return spin_pays() ? inflight_ns_ : idle_ns_;
  }
  // Whether a sleep after an awaiting stretch skipped the in-flight spin
  // because answers came late (a Large transfer's sleep is not a skip).
  bool skipped(Transfer t) const noexcept {
    return t != Transfer::Large && !(hold_ && t == Transfer::Small) && !spin_pays();
  }

  // A stretch that awaited answers ended with work waited_ns after it began.
  void record_wait(std::uint64_t waited_ns) noexcept {
    const std::uint32_t hit = waited_ns <= inflight_ns_ ? kOne / kWeight : 0;
    hits_ = hits_ - hits_ / kWeight + hit;
  }

  // Whether recent answers came within the long spin often enough for it.
  bool spin_pays() const noexcept { return hits_ >= kOne / 3 * 2; }
  bool holds() const noexcept { return hold_; }

 private:
  static constexpr std::uint32_t kOne = 1u << 16;  // fixed point: hits_ / kOne is the hit rate
  static constexpr std::uint32_t kWeight = 8;      // each wait moves the average by 1/8

  std::uint64_t idle_ns_;
  std::uint64_t inflight_ns_;  // never shorter than idle_ns_
  bool hold_;
  std::uint32_t hits_ = kOne;  // start spinning: the common case is a quick answer
};

}  // namespace ferry::daemon
