// One data lane of a channel: its connection, receive credits, sequence
// numbers and acks, and the ring of every WR it carries. Only the lane
// touches these counters; the ChannelManager and the engine ask it to post.
//
// Receive credits (the first layer of flow control, docs/flow-control.md):
// a WR that uses a receive at the peer (Send, RdmaWriteImm) is posted only
// with a credit, so an RNR NAK cannot happen. A lane starts with the peer's
// handshake initial_credits (its receive pool's floor) less the handshake
// message we sent on it. Our side: `lent` counts the receives the peer may
// still use (our initial grant plus grants, less what it used once the
// transport reposted it). Grants are decided only after the NEXT lanes poll
// (the transport reposts consumed receives at the start of poll()): the
// ReceivePool (receive_pool.h) says how many the lane may lend, by its
// recent use (a busy lane borrows up to its share, an idle one returns to
// its floor by granting back less than was used); they go piggybacked on the
// header `credit` of whatever we post next, or in an explicit Credit. One
// credit stays in reserve for Credit messages, so two sides out of credits
// can always unblock each other. Without a pool (unit tests) a lane grants
// back exactly what its peer used.
//
// The ring (lane.cpp posts into it, lane_ring.cpp retires it):
// [unconfirmed: posted, kept until the peer's cumulative ack covers it]
// [backlog: waiting for a credit or for a rebuilt connection]. Both together
// hold at most kCapacity WRs. A kept WR's completion reaches the engine only
// once the peer confirmed it (and the transport finished it), so the memory
// it names (a client's arena) is still there if the lane breaks and the WR
// has to go again on a new connection (replay()).
//
// Engine thread only. Datapath parts allocate nothing: the ring is
// allocated when the channel comes up (open()).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <type_traits>

#include "daemon/counters.h"
#include "daemon/peer/receive_pool.h"
#include "transport/transport.h"
#include "transport/wire/handshake.h"
#include "transport/wire/header.h"

namespace ferry::daemon::peer {

struct LaneStats {
  std::uint64_t tx_msgs = 0;
  std::uint64_t rx_msgs = 0;
  std::uint64_t tx_bytes = 0;
  std::uint64_t rx_bytes = 0;
  std::uint64_t inflight = 0;       // snapshots only: remote ops awaiting an answer on this lane (the sender's books)
  std::uint32_t credits = 0;        // receives the peer has posted for us that we may still use
  std::uint32_t credits_owed = 0;   // receives we consumed and reposted, not yet granted back
  std::uint32_t backlog = 0;        // messages waiting here for a credit
  std::uint64_t credit_stalls = 0;  // messages that had to wait for a credit
  std::uint32_t unconfirmed = 0;    // posted WRs kept until the peer confirms them
  std::uint64_t retransmits = 0;    // messages posted again after a rebuild
  std::uint64_t rebuilds = 0;       // times this lane's connection was replaced
  // Snapshots only (Lane::snapshot fills them).
  std::uint32_t tx_seq = 0, rx_seq = 0, acked = 0;
};

// Serial-number order for lane_seq/ack (RFC 1982 style, 32 bits).
constexpr bool seq_before(std::uint32_t a, std::uint32_t b) noexcept { return static_cast<std::int32_t>(a - b) < 0; }
constexpr bool seq_at_most(std::uint32_t a, std::uint32_t b) noexcept { return !seq_before(b, a); }

// Where a lane reports the WRs it retires. The ChannelManager's events
// implement it; a lane's completion may post on the lane again, or end the
// channel (close()), and the lane copes with both.
class LaneCompletions {
 public:
  virtual ~LaneCompletions() = default;
  virtual void on_send_done(std::uint64_t user_data, Status status) = 0;
};

// What a lane does with the next message received on it (accept_seq).
enum class RxOrder : std::uint8_t { Next, Duplicate, Gap };

// Outcome of posting the backlog.
enum class Flush : std::uint8_t {
  Done,     // everything postable went (or nothing waits)
  Busy,     // the transport's send queue is full: a later flush retries
  Refused,  // the transport refused for good: the connection is closing; the lane must break
};

class Lane {
 public:
  // WRs a lane holds at most: posted and unconfirmed plus waiting.
  static constexpr std::uint32_t kCapacity = 1024;
  // Credits a data WR leaves unused: kept for an explicit Credit message.
  static constexpr std::uint32_t kCreditReserve = 1;
  static_assert((kCapacity & (kCapacity - 1)) == 0, "ring index is masked");

  Lane() = default;
  ~Lane() { release_lent(); }
  Lane(const Lane&) = delete;
  Lane& operator=(const Lane&) = delete;

  // Where posts go, where completions are told, what is counted. Before any
  // other call; the three outlive the lane.
  // `pool` (may be null: grant back what was used) decides our grants.
  void attach(transport::Transport& t, LaneCompletions& done, Counters& counters,
              ReceivePool* pool = nullptr) noexcept {
    transport_ = &t;
    done_ = &done;
    counters_ = &counters;
    pool_ = pool;
  }
  // Control path: allocates the ring (the channel came up). Idempotent.
  void open();
  // Whether the ring exists (open() and not yet close()d).
  bool is_open() const noexcept { return slots_ != nullptr; }
  // Completes every kept and queued WR with PeerReset, once, and frees the
  // ring. The connection must be closed already (no NIC still reads what
  // these WRs name).
  void close() noexcept;

  // The connection and its handshake.
  transport::ConnId conn() const noexcept { return conn_; }
  // Several rails: the peer's rail at the far end of the connection
  // (kNoPeerRail: unknown, or the peer has one). An RDMA READ or WRITE
  // takes its remote key from the WR's remote_rail_rkey entry of that rail,
  // at every post, so a WR replayed on a connection to another of the
  // peer's rails uses that rail's key (docs/rails.md).
  static constexpr std::uint8_t kNoPeerRail = 0xFF;
  void set_peer_rail(std::uint8_t r) noexcept { peer_rail_ = r; }
  std::uint8_t peer_rail() const noexcept { return peer_rail_; }
  void set_conn(transport::ConnId c) noexcept {
    if (c != conn_) peer_rail_ = kNoPeerRail;
    conn_ = c;
  }
  bool joined() const noexcept { return joined_; }
  void join() noexcept { joined_ = true; }
  // The peer's initial credits on this connection (acceptor: from its Hello,
  // which used one of our receives; initiator: from its HelloAck). Once per
  // connection. Our own handshake messages on it (`sent`: the Hello or the
  // HelloAck, and with auth the acceptor's Challenge before it) used as
  // many of the peer's. `pooled`: both sides grant from a pool
  // (wire::kCapCreditPool): our grants may exceed what the peer used, and
  // so may the peer's.
  void credits_from(std::uint32_t peer_initial, bool hello_received, std::uint32_t sent = 1,
                    bool pooled = false) noexcept;
  std::uint32_t peer_credits() const noexcept { return peer_credits_; }
  bool pooled() const noexcept { return pooled_; }

  // Posting. Accepted means it will go: a WR without a credit, behind a
  // non-empty backlog, on a broken lane or refused by the transport at once
  // is queued and posted by a later flush(). Busy only when the ring is full
  // (or not open).
  [[nodiscard]] transport::PostResult post(const transport::SendWr& wr, std::uint64_t now_ns) noexcept;
  bool has_room() const noexcept { return is_open() && stats_.unconfirmed + stats_.backlog < kCapacity; }
  // Posts what the backlog can send now (credits, a live connection).
  [[nodiscard]] Flush flush(std::uint64_t now_ns) noexcept;
  bool waiting() const noexcept { return stats_.backlog != 0; }
  // Nothing kept and nothing queued.
  bool settled() const noexcept { return stats_.unconfirmed == 0 && stats_.backlog == 0; }

  // Receiving. Every message received on the lane used one of our receives;
  // its header may grant credits back. False: the grant exceeds what the
  // peer could owe us (it miscounts; the channel must fail).
  [[nodiscard]] bool on_received(bool is_credit, std::uint32_t grant) noexcept;
  // Receives used since the last lanes poll; that poll reposted them, so
  // the lane may grant again: the pool says how many (without a pool, what
  // was used). True when a grant is owed now.
  bool reposted(std::uint64_t now_ns = 0) noexcept;
  std::uint32_t owed() const noexcept { return stats_.credits_owed; }
  // Receives the peer may still use on this connection by our books (owed
  // grants included; used ones until they are reposted).
  std::uint32_t lent() const noexcept { return lent_; }
  // Whether an explicit Credit should go now: `threshold` owed, or the peer
  // holds no more than we owe it (it may be waiting for them).
  bool grant_due(std::uint32_t threshold) const noexcept {
    const std::uint32_t held = lent_ > stats_.credits_owed ? lent_ - stats_.credits_owed : 0;
    return stats_.credits_owed != 0 && (stats_.credits_owed >= threshold || held <= stats_.credits_owed);
  }
  // Whether data (not the peer's Credit messages alone) used what we owe:
  // an idle lane grants that at a tick, never a Credit for a Credit.
  bool owes_for_data() const noexcept { return stats_.credits_owed > owed_by_credit_; }
  // An explicit Credit carrying what we owe and our ack (may use the
  // reserve credit); false when it owes neither or cannot go now.
  bool post_credit() noexcept;
  // Delayed ack, asked once per tick: true when a message received in order
  // has waited unacknowledged since the previous tick. A pooled receiver may
  // grant nothing back for the last messages of a burst (the sender holds
  // more than an idle lane is lent), so no Credit would carry the ack and
  // the sender's lane would never settle. Credits are not numbered, so an
  // ack never asks for an ack.
  [[nodiscard]] bool ack_overdue() noexcept;
  // The in-order check of a numbered message: Next advances rx_seq.
  [[nodiscard]] RxOrder accept_seq(std::uint32_t got) noexcept;
  std::uint32_t rx_seq() const noexcept { return rx_seq_; }
  std::uint32_t tx_seq() const noexcept { return tx_seq_; }
  std::uint32_t acked() const noexcept { return acked_; }

  // Retiring (lane_ring.cpp). The peer's cumulative ack; false: it acks
  // what we never sent (the channel must fail).
  [[nodiscard]] bool take_ack(std::uint32_t ack) noexcept;
  // A transport SendDone (Ok) of a WR on this lane's connection.
  void send_done(std::uint64_t user_data) noexcept;
  // The posting time of the oldest numbered WR the peer has not acked;
  // nullopt when none (the retransmission timeout watches it).
  std::optional<std::uint64_t> oldest_unacked_ns() const noexcept;

  // Rebuilds (LaneFlow drives them: lane_flow.h). The connection is gone or
  // untrustworthy: keep the ring, forget the connection and its credits.
  void break_conn(std::uint64_t now_ns, std::uint64_t redial_ns) noexcept;
  bool broken() const noexcept { return broken_; }
  std::uint64_t broken_ns() const noexcept { return broken_ns_; }
  std::uint64_t redial_ns() const noexcept { return redial_ns_; }
  void set_redial_ns(std::uint64_t t) noexcept { redial_ns_ = t; }
  // A new connection took the lane's place.
  void rejoin(transport::ConnId c) noexcept {
    if (c != conn_) peer_rail_ = kNoPeerRail;
    conn_ = c;
    joined_ = true;
    broken_ = false;
  }
  // After a rejoin: the peer got up to peer_rx. What it confirmed
  // completes, the rest becomes the front of the backlog with its old
  // numbers; the caller flushes. False: peer_rx is outside what we sent.
  [[nodiscard]] bool replay(std::uint32_t peer_rx) noexcept;

  // Bytes and messages that did not go through post() (handshake, receives).
  LaneStats& traffic() noexcept { return stats_; }
  const LaneStats& stats() const noexcept { return stats_; }
  LaneStats snapshot() const noexcept;

 private:
  static bool uses_receive(transport::WrOp op) noexcept {
    return op == transport::WrOp::Send || op == transport::WrOp::RdmaWriteImm;
  }
  struct Slot {
    transport::SendWr wr;
    std::uint64_t posted_ns = 0;
    std::uint32_t seq = 0;  // lane_seq it went with; 0: unnumbered (RDMA READ)
    bool done = false;      // the transport completed it Ok
  };
  static constexpr std::uint32_t kMask = kCapacity - 1;
  Slot& at(std::uint32_t i) noexcept { return slots_[i & kMask]; }
  const Slot& at(std::uint32_t i) const noexcept { return slots_[i & kMask]; }
  // Posts the first n backlog WRs (they become unconfirmed); numbers them,
  // piggybacks ack and owed credits.
  [[nodiscard]] transport::PostResult post_backlog(std::uint32_t n, std::uint64_t now_ns) noexcept;
  // Hands confirmed WRs at the front of the ring to the completions.
  void report_confirmed() noexcept;
  // What the lane lent goes back to its pool (the connection is gone).
  void release_lent() noexcept {
    if (pool_ != nullptr) pool_->give_back(lent_, 0);
    lent_ = 0;
  }
  void note_used(bool by_credit) noexcept {
    ++recv_unposted_;
    if (by_credit) ++unposted_by_credit_;
  }
  void note_ack_sent() noexcept {
    ack_sent_ = rx_seq_;
    ack_waiting_ = false;
  }

  transport::Transport* transport_ = nullptr;
  LaneCompletions* done_ = nullptr;
  Counters* counters_ = nullptr;

  transport::ConnId conn_ = transport::kInvalidConn;
  std::uint8_t peer_rail_ = kNoPeerRail;
  bool joined_ = false;  // handshake on this connection done
  LaneStats stats_;
  // Receives a lane lends at most while it has no pool (tests): any grant
  // the peer may hold is within it.
  static constexpr std::uint32_t kNoPoolLent = wire::kMaxInitialCredits;
  // Demand (receive_pool.h): receives the peer used in the current and the
  // previous window; a busy lane lends up to its share.
  static constexpr std::uint64_t kDemandWindowNs = 1'000'000;
  std::uint32_t target_lent(std::uint64_t now_ns, std::uint32_t used) noexcept;

  ReceivePool* pool_ = nullptr;
  std::uint32_t lent_ = 0;                // receives the peer may still use by our books (see lent())
  bool pooled_ = false;                   // both sides grant from a pool (credits_from)
  std::uint64_t window_ns_ = 0;           // start of the current demand window
  std::uint32_t used_now_ = 0;            // receives used (and reposted) in it
  std::uint32_t used_prev_ = 0;           // ... in the window before
  std::uint32_t peer_credits_ = 0;        // the peer's initial_credits here; 0 until its Hello/HelloAck
  std::uint32_t recv_unposted_ = 0;       // receives used since the last lanes poll: not reposted yet
  std::uint32_t unposted_by_credit_ = 0;  // ... of them used by pure Credit messages
  std::uint32_t owed_by_credit_ = 0;      // part of stats_.credits_owed used by pure Credit messages
  // Sequence numbers (header lane_seq/ack; serial arithmetic, they wrap).
  std::uint32_t tx_seq_ = 0;    // lane_seq of the last numbered WR posted
  std::uint32_t rx_seq_ = 0;    // lane_seq of the last message received in order
  std::uint32_t acked_ = 0;     // the peer's cumulative ack
  std::uint32_t ack_sent_ = 0;  // the ack the last message we posted carried
  bool ack_waiting_ = false;    // rx_seq_ was unacked at the last ack_overdue()
  bool broken_ = false;         // the connection died while the channel lives on
  std::uint64_t broken_ns_ = 0;
  std::uint64_t redial_ns_ = 0;  // initiator, broken, no connect under way: dial again then

  // The ring's storage: pages of its own (transport/sparse_pages.h), written
  // by post() before anything reads them, so an idle lane's ring costs
  // address space, not resident memory. From the heap it did not: the
  // rings landed in transparent huge pages, and one write committed 2 MiB
  // (7 idle rdma peers in the VM: 2 MiB more per huge page crossed). Slot is
  // an aggregate, so the mapping itself creates its objects; an empty ring
  // starts again at slot 0 (lane_ring.cpp), so a lane that sends one message
  // at a time touches one page.
  static constexpr std::size_t kRingBytes = sizeof(Slot) * kCapacity;
  struct RingFree {
    void operator()(Slot* p) const noexcept;
  };
  using Ring = std::unique_ptr<Slot[], RingFree>;
  static_assert(std::is_trivially_destructible_v<Slot>);
  Ring slots_;  // kCapacity, from open() to close()
  std::uint32_t head_ = 0;
};

}  // namespace ferry::daemon::peer
