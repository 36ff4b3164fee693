// Counters: one set per engine, written by that engine's thread only
// (relaxed atomics stored by their one writer), read and summed by the
// control thread for status.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <iterator>
#include <string_view>

namespace ferry::daemon {

using Counter = std::atomic<std::uint64_t>;

// One rail of the lane transport (daemon/rails/rail_set.h), copied from the
// rail set with each peer snapshot; status JSON's "rails" shows them.
struct RailCounters {
  Counter up{1};        // 1: in use; 0: taken out (its port is down)
  Counter lanes{0};     // connections open on it
  Counter tx_bytes{0};  // payload bytes posted on it
  Counter failures{0};  // times it was taken out
  Counter returns{0};   // times it came back
};

struct Counters {
  std::array<RailCounters, 4> rails{};  // transport::kMaxRails; status JSON "rails"
  // Real, local datapath.
  Counter attaches{0};
  Counter detaches{0};
  Counter ops_submitted{0};
  Counter ops_completed{0};
  Counter bad_requests{0};
  Counter messages{0};           // Message deliveries
  Counter calls{0};              // Request deliveries
  Counter replies{0};            // responses copied to a caller
  Counter bytes_copied{0};       // payload bytes memcpy'd between clients
  Counter inline_deliveries{0};  // Message/Request deliveries with the payload inline in the CQ (no rx block)
  Counter parked{0};             // deliveries that had to wait for receiver space
  Counter timeouts{0};
  Counter call_timeouts{0};  // calls a server held past their timeout (this daemon's servers)
  Counter key_windows{0};    // per-call remote keys opened (rdma memory windows)
  Counter cq_overflows{0};   // completions that went to a private overflow queue
  Counter engine_sleeps{0};
  // Busy turns and their length (loop/turn_stats.h); max is a high-water mark.
  Counter engine_busy_turns{0};
  Counter engine_busy_ns{0};  // time in busy turns (engines' busy_fraction); not listed among the counters
  Counter engine_turn_max_us{0};
  Counter engine_turns_over_100us{0};
  Counter engine_turns_over_1ms{0};
  Counter engine_turns_over_10ms{0};
  Counter spin_skips{0};           // sleeps without the in-flight spin: answers lately took longer (spin_policy.h)
  Counter spin_large_sleeps{0};    // sleeps without the in-flight spin: a large transfer in flight (spin_policy.h)
  Counter engine_compactions{0};   // times engine 0's thread took this engine's turns over (engines/compaction.h)
  Counter engine_expansions{0};    // times it handed them back to the engine's own thread
  Counter spin_slot_sleeps{0};     // sleeps without a spin: other engines held the spin slots (engines/spin_slots.h)
  Counter engine_yields_lost{0};   // yields that kept the engine off its CPU 500 us or more (loop/yield_watch.h)
  Counter engine_yield_sleeps{0};  // sleeps where the engine would have yielded, after such a yield
  Counter corrupt_rings{0};
  // Channels between daemons.
  Counter peer_connects{0};  // channels that came Up
  Counter peer_failures{0};  // channels that failed (reset, timeout, refused, unreachable)
  // Bootstrap connections refused or abandoned before the peer proved
  // itself: a Hello refused by the auth policy, or a channel opened to us
  // that ended before any lane joined. Not in peer_failures.
  Counter peer_bootstrap_refusals{0};
  Counter remote_sends{0};       // Sends posted to a peer
  Counter remote_calls{0};       // Calls posted to a peer
  Counter remote_delivered{0};   // Message/Request deliveries that came from a peer
  Counter heartbeats_missed{0};  // heartbeat intervals a peer stayed silent
  Counter staged{0};             // remote deliveries staged for a full receiver
  Counter busy_rejects{0};       // remote deliveries refused with Busy (staging full)
  // Peer handshakes refused by shared-secret authentication (either side).
  Counter peer_auth_failures{0};
  // Remote datapath, flow control and recovery (status JSON contract).
  Counter rnr_naks{0};
  Counter retransmits{0};
  Counter recoveries{0};
  Counter credit_stalls{0};
  Counter window_stalls{0};
  Counter reply_stalls{0};   // Replies to a remote caller refused Busy (no room toward it); the call stays open
  Counter answer_stalls{0};  // zero-length answers held for room in their lane (flush_answers)
  // rdma large-message paths (README "Copies per path").
  Counter rendezvous_sends{0};    // our RendezvousReqs (the peer READs the payload)
  Counter rendezvous_reads{0};    // READs we issued and delivered
  Counter split_reads{0};         // rendezvous READs split over several rails (rail-split-bytes)
  Counter split_read_chunks{0};   // the chunks they were posted as
  Counter zero_copy_writes{0};    // replies we RDMA-WROTE into a caller's buffer
  Counter zero_copy_replies{0};   // replies that arrived in our caller's buffer by WRITE
  Counter busy_backoffs{0};       // remote ops the peer refused Busy, held here and sent again after a backoff
  Counter redials_deferred{0};    // Opens refused PeerUnreachable without a dial: the address failed just before
  Counter lane_breaks{0};         // data lane connections lost or dropped (recoveries: those rebuilt)
  Counter rail_moves{0};          // lanes moved back to a rail that came back (each also a lane break)
  Counter rail_keys_sent{0};      // RailKeys messages we sent (several rails: an arena's keys, per channel and lane)
  Counter rail_keys_learned{0};   // RailKeys messages from peers taken into a channel's key table
  Counter rail_keys_refused{0};   // RailKeys messages from peers refused (bad payload; logged)
  Counter rail_keys_used{0};      // RDMA READ/WRITE posts whose key the table changed to the far end rail's
  Counter duplicates_dropped{0};  // lane messages received twice (by lane_seq) and dropped
  // Channels on demand (max-channels).
  Counter channels_opened{0};    // channels that came Up (first or again)
  Counter channels_evicted{0};   // idle channels closed by agreement past the cap (both sides count)
  Counter channels_reopened{0};  // channels dialled to an address whose last channel was evicted
  // Accepted peer connections closed by the tcp transport's admission rules.
  Counter peer_accepts_refused{0};  // no room for a new one
  Counter peer_accepts_evicted{0};  // silent ones closed to make room
  Counter peer_hello_timeouts{0};   // silent past peer-hello-timeout-ms
  Counter peer_dials_refused{0};    // our own dials (bootstrap or lane) with no free slot here
  Counter peer_full_refusals{0};    // our dials a peer turned away: no free slot there (Goodbye Busy, rdma reject)
  Counter peer_connections{0};      // gauge: TCP connections to and from peers now (of peer-max-connections)
  // Per-call remote keys by cause (memory-window binds; each is closed once).
  Counter key_windows_write{0};  // a response buffer the peer RDMA-WRITEs
  Counter key_windows_read{0};   // a rendezvous source the peer RDMA-READs
  Counter eager_responses{0};    // rdma calls sent without a response key: the reply comes as a message
  // The rdma lanes' verbs datapath (datapath-stats builds; 0 otherwise),
  // copied from the transport with each peer snapshot (status requests too).
  Counter rdma_post_calls{0};      // ibv_post_send calls (doorbells)
  Counter rdma_wrs_posted{0};      // send work requests they carried
  Counter rdma_wrs_signaled{0};    // of those, signalled (a completion each)
  Counter rdma_wrs_inline{0};      // of those, inline
  Counter rdma_recvs{0};           // receive completions
  Counter rdma_cq_polls{0};        // ibv_poll_cq calls
  Counter rdma_cq_polls_empty{0};  // of those, found nothing
  // Receive credits (daemon/peer/receive_pool.h), gauges: the pool lanes
  // grant from, what they lend beyond their floors now and at most so far;
  // the rdma lanes' registered receive and send memory (always counted).
  Counter receive_pool{0};
  Counter receive_pool_borrowed{0};
  Counter receive_pool_borrowed_max{0};
  Counter rdma_recv_registered_bytes{0};
  Counter rdma_send_registered_bytes{0};
};

// Each Counters has one writer, its engine's thread: a plain load and store
// (no locked read-modify-write on the datapath); readers on other threads
// see a relaxed value, never a torn one.
inline void bump(Counter& c, std::uint64_t n = 1) noexcept {
  c.store(c.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
}
inline std::uint64_t read(const Counter& c) noexcept { return c.load(std::memory_order_relaxed); }

// Name/pointer pairs so status and counters output list every counter.
// (C: Counters or const Counters.)
template <typename C, typename F>
void for_each_counter(C& c, F&& f) {
  f("attaches", c.attaches);
  f("detaches", c.detaches);
  f("ops_submitted", c.ops_submitted);
  f("ops_completed", c.ops_completed);
  f("bad_requests", c.bad_requests);
  f("messages", c.messages);
  f("calls", c.calls);
  f("replies", c.replies);
  f("bytes_copied", c.bytes_copied);
  f("inline_deliveries", c.inline_deliveries);
  f("parked", c.parked);
  f("timeouts", c.timeouts);
  f("call_timeouts", c.call_timeouts);
  f("key_windows", c.key_windows);
  f("cq_overflows", c.cq_overflows);
  f("engine_sleeps", c.engine_sleeps);
  f("engine_busy_turns", c.engine_busy_turns);
  f("engine_turn_max_us", c.engine_turn_max_us);
  f("engine_turns_over_100us", c.engine_turns_over_100us);
  f("engine_turns_over_1ms", c.engine_turns_over_1ms);
  f("engine_turns_over_10ms", c.engine_turns_over_10ms);
  f("spin_skips", c.spin_skips);
  f("spin_large_sleeps", c.spin_large_sleeps);
  f("spin_slot_sleeps", c.spin_slot_sleeps);
  f("engine_yields_lost", c.engine_yields_lost);
  f("engine_yield_sleeps", c.engine_yield_sleeps);
  f("engine_compactions", c.engine_compactions);
  f("engine_expansions", c.engine_expansions);
  f("corrupt_rings", c.corrupt_rings);
  f("peer_connects", c.peer_connects);
  f("peer_failures", c.peer_failures);
  f("peer_bootstrap_refusals", c.peer_bootstrap_refusals);
  f("peer_auth_failures", c.peer_auth_failures);
  f("remote_sends", c.remote_sends);
  f("remote_calls", c.remote_calls);
  f("remote_delivered", c.remote_delivered);
  f("heartbeats_missed", c.heartbeats_missed);
  f("staged", c.staged);
  f("busy_rejects", c.busy_rejects);
  f("rnr_naks", c.rnr_naks);
  f("retransmits", c.retransmits);
  f("recoveries", c.recoveries);
  f("credit_stalls", c.credit_stalls);
  f("window_stalls", c.window_stalls);
  f("reply_stalls", c.reply_stalls);
  f("answer_stalls", c.answer_stalls);
  f("rendezvous_sends", c.rendezvous_sends);
  f("rendezvous_reads", c.rendezvous_reads);
  f("split_reads", c.split_reads);
  f("split_read_chunks", c.split_read_chunks);
  f("zero_copy_writes", c.zero_copy_writes);
  f("zero_copy_replies", c.zero_copy_replies);
  f("busy_backoffs", c.busy_backoffs);
  f("redials_deferred", c.redials_deferred);
  f("lane_breaks", c.lane_breaks);
  f("rail_moves", c.rail_moves);
  f("rail_keys_sent", c.rail_keys_sent);
  f("rail_keys_learned", c.rail_keys_learned);
  f("rail_keys_refused", c.rail_keys_refused);
  f("rail_keys_used", c.rail_keys_used);
  f("duplicates_dropped", c.duplicates_dropped);
  f("channels_opened", c.channels_opened);
  f("channels_evicted", c.channels_evicted);
  f("channels_reopened", c.channels_reopened);
  f("peer_accepts_refused", c.peer_accepts_refused);
  f("peer_accepts_evicted", c.peer_accepts_evicted);
  f("peer_hello_timeouts", c.peer_hello_timeouts);
  f("peer_dials_refused", c.peer_dials_refused);
  f("peer_full_refusals", c.peer_full_refusals);
  f("peer_connections", c.peer_connections);
  f("key_windows_write", c.key_windows_write);
  f("key_windows_read", c.key_windows_read);
  f("eager_responses", c.eager_responses);
  f("rdma_post_calls", c.rdma_post_calls);
  f("rdma_wrs_posted", c.rdma_wrs_posted);
  f("rdma_wrs_signaled", c.rdma_wrs_signaled);
  f("rdma_wrs_inline", c.rdma_wrs_inline);
  f("rdma_recvs", c.rdma_recvs);
  f("rdma_cq_polls", c.rdma_cq_polls);
  f("rdma_cq_polls_empty", c.rdma_cq_polls_empty);
  f("receive_pool", c.receive_pool);
  f("receive_pool_borrowed", c.receive_pool_borrowed);
  f("receive_pool_borrowed_max", c.receive_pool_borrowed_max);
  f("rdma_recv_registered_bytes", c.rdma_recv_registered_bytes);
  f("rdma_send_registered_bytes", c.rdma_send_registered_bytes);
}

// The same counter of two sets side by side: f(name, Counter& into, const Counter& from).
template <typename F>
void for_each_counter_pair(Counters& into, const Counters& from, F&& f) {
  const Counter* theirs[128];
  std::size_t n = 0;
  for_each_counter(from, [&](std::string_view, const Counter& c) {
    if (n < std::size(theirs)) theirs[n++] = &c;
  });
  std::size_t i = 0;
  for_each_counter(into, [&](std::string_view name, Counter& c) {
    if (i < n) f(name, c, *theirs[i]);
    ++i;
  });
}

}  // namespace ferry::daemon
