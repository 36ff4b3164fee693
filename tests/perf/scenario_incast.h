// incast: many sender processes, spread over several daemons, send one-way
// messages to ONE receiving service (optionally plus a second, stalled
// service on the same daemon: the slow-consumer run). Pieces shared by the
// orchestrating parent (scenario_incast.cpp), the sender processes
// (scenario_incast_sender.cpp) and the receiver processes
// (scenario_incast_receiver.cpp): the message format with its checksums and
// the shared-memory board where every process leaves its results.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "ferry/error.h"
#include "ferry/status.h"

namespace ferry::bench {

class ReadyNotifier;

inline constexpr std::uint32_t kIncastMaxStreams = 256;    // sender processes, both services together
inline constexpr std::uint32_t kIncastMagic = 0x494e4353;  // "INCS"
inline constexpr const char* kIncastService = "bench-incast";
inline constexpr const char* kIncastStallService = "bench-incast-stall";

// At the start of every message. body_sum covers bytes [sizeof(header),
// length); header_sum covers the header fields, so a torn, stale or
// misdirected message fails one of the two.
struct IncastHeader {
  std::uint32_t magic;
  std::uint16_t stream;  // sender index
  std::uint16_t reserved;
  std::uint64_t seq;  // per stream, from 0 (warm-up first)
  std::uint32_t length;
  std::uint32_t reserved2;
  std::uint64_t body_sum;
  std::uint64_t header_sum;
};
static_assert(sizeof(IncastHeader) == 40);
inline constexpr std::size_t kIncastMinSize = 64;

// 64-bit checksum of whole 8-byte words plus the tail; four independent
// lanes so verifying 1 MiB costs ~0.1 ms, not the run.
inline std::uint64_t incast_checksum(const std::byte* p, std::size_t n) noexcept {
  constexpr std::uint64_t k = 0x9e3779b97f4a7c15ull;
  std::uint64_t h[4] = {1, 2, 3, 4};
  std::size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    for (int l = 0; l < 4; ++l) {
      std::uint64_t w;
      std::memcpy(&w, p + i + 8 * l, 8);
      h[l] = (h[l] + w) * k;
    }
  }
  std::uint64_t tail = n;
  for (; i < n; ++i) tail = (tail << 8 | static_cast<std::uint8_t>(p[i])) * k;
  return ((h[0] ^ (h[1] >> 7)) * k ^ (h[2] + (h[3] << 3))) * k ^ tail;
}

inline std::uint64_t incast_header_sum(const IncastHeader& h) noexcept {
  IncastHeader copy = h;
  copy.header_sum = 0;
  return incast_checksum(reinterpret_cast<const std::byte*>(&copy), sizeof copy);
}

// What one sender process reports (written by that sender only).
struct SenderBoard {
  std::uint64_t issued = 0;    // distinct messages submitted (warm-up included)
  std::uint64_t ok = 0;        // completions Ok (warm-up included)
  std::uint64_t busy = 0;      // completions Busy (main senders retry them)
  std::uint64_t timeouts = 0;  // completions Timeout
  std::uint64_t measured = 0;  // latency samples written
  std::uint64_t double_completions = 0;
  std::atomic<std::uint8_t> done{0};  // set before the 'd' report byte
  std::uint8_t failed = 0;
  std::uint8_t last_bad_status = 0;
  char error[190] = {};
};

// What one receiver process reports (written by that receiver only).
struct ReceiverBoard {
  std::uint64_t delivered = 0;  // messages that passed every check
  std::uint64_t bytes = 0;
  std::uint64_t corrupt = 0;     // checksum, length, magic or stream mismatch
  std::uint64_t duplicates = 0;  // a (stream, seq) seen twice
  std::uint8_t failed = 0;
  char error[190] = {};
};

// The board: one MAP_SHARED anonymous mapping made before any fork.
struct IncastBoard {
  std::atomic<std::uint32_t> main_done{0};       // parent: the measured senders finished
  std::atomic<std::uint32_t> stop_receivers{0};  // parent: drain to expected[] and exit
  std::atomic<std::uint64_t> expected[2]{};      // deliveries each receiver drains to
  SenderBoard senders[kIncastMaxStreams];
  ReceiverBoard receivers[2];  // 0: the measured service, 1: the stalled one
};

// The plan every process works from (copied into each child by fork).
struct IncastPlan {
  std::vector<std::string> sender_sockets;  // daemons the senders attach to, round-robin
  std::string receiver_socket;
  std::string target_prefix;        // "HOST:PORT/" or "" (receiver on the senders' daemon)
  std::uint32_t senders = 16;       // to kIncastService, streams [0, senders)
  std::uint32_t stall_senders = 0;  // to kIncastStallService, streams [senders, senders + stall_senders)
  std::uint32_t concurrency = 8;    // Sends outstanding per sender
  std::size_t size = 0;
  std::uint64_t warmup = 2;             // per sender
  std::vector<std::uint64_t> measured;  // per main sender
  std::uint64_t max_seq = 0;            // bitmap bits per stream
  bool busy_poll = false;

  std::uint32_t streams() const { return senders + stall_senders; }
  bool stalled_stream(std::uint32_t s) const { return s >= senders; }
};

// The shared mapping: the board, then one bitmap per stream (bit seq set
// when the receiver accepted it), then each main sender's latency samples.
class IncastShared {
 public:
  Error map(const IncastPlan& plan);
  ~IncastShared();
  IncastBoard& board() const { return *board_; }
  std::uint64_t* bitmap(std::uint32_t stream) const { return bitmaps_ + stream * bitmap_words_; }
  std::uint64_t* samples(std::uint32_t sender) const { return samples_ + offsets_[sender]; }
  std::uint64_t bits_set(std::uint32_t stream, std::uint64_t below) const;

 private:
  void* base_ = nullptr;
  std::size_t bytes_ = 0;
  IncastBoard* board_ = nullptr;
  std::uint64_t* bitmaps_ = nullptr;
  std::uint64_t bitmap_words_ = 0;
  std::uint64_t* samples_ = nullptr;
  std::vector<std::uint64_t> offsets_;
};

// Sender process body: attach, open, warm up, report 'r' on report_fd,
// wait for EOF on go_fd, send, report 'd' (or 'f' on failure), wait for EOF
// on exit_fd (so its CPU can still be read), return the exit code.
int run_incast_sender(const IncastPlan& plan, const IncastShared& shared, std::uint32_t stream, int report_fd,
                      int go_fd, int exit_fd);

// Receiver process body (stalled = serves kIncastStallService with a small
// rx arena). Verifies every message, releases it; once board.stop_receivers
// is set, drains to board.expected[index] and returns. (A flag, not the
// ReadyNotifier's stop pipe: every later child inherits that pipe's write
// end, so its EOF would wait for all of them.)
int run_incast_receiver(const IncastPlan& plan, const IncastShared& shared, bool stalled, ReadyNotifier& ready);

// Flow-control counters summed over daemons (control sockets), read
// before and after the measured phase.
struct FlowCounters {
  bool read_ok = true;
  std::uint64_t rnr_naks = 0, credit_stalls = 0, window_stalls = 0, busy_rejects = 0, timeouts = 0, staged = 0,
                parked = 0;
};
FlowCounters read_flow_counters(const std::vector<std::string>& control_paths);
FlowCounters operator-(const FlowCounters& after, const FlowCounters& before);
std::string to_json_fields(const FlowCounters& c);

// After every process finished: ok when every measured message was
// delivered once, checked and completed Ok exactly once, and every
// stalled-service Send completed exactly once with a defined status and
// was delivered iff it completed Ok; otherwise ProtocolError saying what
// went wrong.
Error check_incast_results(const IncastPlan& plan, const IncastShared& shared);
// The incast-only fields appended to the --json line (each ",\"key\":v").
std::string incast_json_fields(const IncastPlan& plan, const IncastShared& shared, const FlowCounters& delta);

}  // namespace ferry::bench
