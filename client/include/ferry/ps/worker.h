// The worker side of the parameter server: pull rows of embedding tables
// (or a whole dense table) and push gradients back, each an asynchronous
// operation (a ticket) so a trainer can pull the next batch while the model
// computes. An operation sends one request to each shard that owns any of
// its rows, or, when that would not fit one message (or exceeds the shards'
// max_count), several, in flight together as far as the worker's memory and
// max_calls allow (the rest go out as earlier ones are answered). It is one
// ticket either way and completes when every request has been answered.
//
// Pulls coalesce duplicate keys: each distinct key is pulled once, and the
// rows of all shards land side by side in one response block, grouped by
// shard (shard 0's keys first, each shard's in first-seen order). rows()
// gives that block (the rows, zero-copy), the distinct keys in the same
// order, and for every requested key the index of its row. Rows too large
// for one block of the arena land in process memory instead (each request's
// response is copied there once it arrived; PulledRows::staged). push() sums the
// gradients of duplicate keys; push_rows() pushes gradients for the rows of
// an earlier pull, in its row order, without hashing again.
//
// Error convention: starting an operation returns Result<Ticket> (a bad
// argument, a full table of operations, a row larger than any message
// (ResponseTooLarge): nothing was sent); wait() returns
// the operation's Status: Ok, a transport status (Timeout, ServiceGone,
// PeerReset, DaemonGone, ...) or BadRequest when a shard refused the
// request (error() names the shard and its PsStatus). A ticket stays valid
// until release(); a failed operation's buffers are freed once every
// shard's call has come back, never earlier (ferryd may still write them).
//
// After this host's ferryd went away (an upgrade's restart, a crash), the
// operations in flight end DaemonGone. A worker given a way to make its
// link again (WorkerOptions::relink, e.g. ferry_relink()) attaches again
// at the start of its next operation, once ferryd and the shards are
// back, and goes on (reattached() counts it); until then each operation is
// refused at once with what the last try said (DaemonGone, ServiceNotFound),
// tried at most every 100 ms doubling to 2 s. Rows pulled before stay
// readable, and push_rows() of them works on the new link: the old link
// and its memory stay until the last operation that began on it is
// released. event_fd() and link() are the new link's from then on.
//
// Not thread safe: one thread at a time (the Python binding locks).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "ferry/ps/shard_link.h"
#include "ferry/ps/table.h"
#include "ferry/ps/wire.h"
#include "ferry/visibility.h"

namespace ferry::ps {

using Ticket = std::uint64_t;

struct WorkerOptions {
  std::vector<TableSpec> tables;
  // How long an operation may take before it fails Timeout (ferryd's call
  // timeout should be at most this: the link's call_timeout).
  std::chrono::milliseconds timeout{10000};
  std::uint32_t max_ops = 64;  // operations in flight or unreleased at once
  // Most keys (dense: elements) one request carries: at most the shards'
  // own max_count (ShardSpec). 0: as many as a push of the widest table fits
  // in one message (default_max_count(), the Python shard server's default).
  std::uint32_t max_count = 0;
  // Calls in flight at once over all operations (their requests and staged
  // responses also need room in the arena: an operation waits for either).
  std::uint32_t max_calls = 256;
  // Makes a new link to the same shards after ferryd went away (see the
  // top of this file); empty: the worker stays with its link, and every
  // operation fails DaemonGone from then on. It runs on the thread that
  // starts an operation, so an open of a shard not back yet should not
  // wait long (ferry_relink: at most 500 ms). It must not throw.
  std::function<Error(std::unique_ptr<ShardLink>*)> relink{};
};

// The most keys one request may carry so that a push of the widest of
// `tables` fits a message of `max_message_bytes` (at least 1).
std::uint32_t default_max_count(std::span<const TableSpec> tables, std::size_t max_message_bytes) noexcept;

struct OpError {
  Status status = Status::Ok;
  PsStatus ps = PsStatus::Ok;  // when a shard refused the request
  std::uint32_t shard = 0;
};

struct PulledRows {
  std::span<const float> rows;                // distinct keys x dim (dense: the table)
  std::span<const Key> keys;                  // the distinct keys, in row order (empty for dense)
  std::span<const std::int64_t> index;        // per requested key: its row (empty for dense)
  std::span<const std::uint32_t> shard_rows;  // per shard: its first row; shards()+1 entries
  Buffer block;                               // the memory the rows live in (empty when staged)
  bool staged = false;                        // rows copied into process memory (too large for the arena)
};

class FERRY_API Worker {
 public:
  // A worker reaching its shards through `link`. BadRequest, with the
  // reason, for options that cannot work (a bad table spec, limits out of
  // range, no link); `out` is then untouched. Configuration time.
  [[nodiscard]] static Error create(std::unique_ptr<ShardLink> link, const WorkerOptions& options,
                                    std::unique_ptr<Worker>* out);
  // Waits (bounded by the operation timeout) for calls still in flight.
  ~Worker();
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  [[nodiscard]] Result<Ticket> pull(TableId table, std::span<const Key> keys) noexcept;
  [[nodiscard]] Result<Ticket> pull_dense(TableId table) noexcept;
  // grads: keys.size() x dim floats.
  [[nodiscard]] Result<Ticket> push(TableId table, std::span<const Key> keys, std::span<const float> grads) noexcept;
  // grads: one row per row of the (completed, unreleased) pull `pulled`, in its row order.
  [[nodiscard]] Result<Ticket> push_rows(Ticket pulled, std::span<const float> grads) noexcept;
  [[nodiscard]] Result<Ticket> push_dense(TableId table, std::span<const float> grads) noexcept;
  // push_rows in two steps, for gradients that are not in process memory
  // yet (on a GPU): prepare makes every request in the arena with its keys
  // and room for its gradient rows (prepared() says where), commit() sends
  // them. NoMemory when the arena cannot hold all of them now (use push_rows).
  [[nodiscard]] Result<Ticket> push_rows_prepare(Ticket pulled) noexcept;
  struct PreparedRows {
    std::uint32_t first = 0;  // the pull's first row this request carries
    std::uint32_t count = 0;
    float* values = nullptr;  // count x dim floats to fill, in the request buffer
  };
  std::vector<PreparedRows> prepared(Ticket t) const;
  [[nodiscard]] Status commit(Ticket t) noexcept;
  // Overwrites parameters (and resets their optimizer state); the last value of a duplicate key wins.
  [[nodiscard]] Result<Ticket> assign(TableId table, std::span<const Key> keys, std::span<const float> values) noexcept;
  [[nodiscard]] Result<Ticket> assign_dense(TableId table, std::span<const float> values) noexcept;
  // The optimizer state of rows instead of their values (checkpoints; wire
  // flag kFlagState): a table whose optimizer keeps some (Adagrad: its
  // accumulators, one per float), else BadRequest. Pull as pull() and
  // pull_dense(); the assigns set the state and leave the values.
  [[nodiscard]] Result<Ticket> pull_state(TableId table, std::span<const Key> keys) noexcept;
  [[nodiscard]] Result<Ticket> assign_state(TableId table, std::span<const Key> keys,
                                            std::span<const float> values) noexcept;
  [[nodiscard]] Result<Ticket> pull_dense_state(TableId table) noexcept;
  [[nodiscard]] Result<Ticket> assign_dense_state(TableId table, std::span<const float> values) noexcept;

  // One step of a shard-side checkpoint (wire Op::Save) on every shard at
  // once: shard s writes `count` rows of the table from its row first[s]
  // into its checkpoint directory's NAME (first[s] == kSaveSkip: shard s
  // is not asked). saved() then gives, per shard, the rows it wrote
  // (fewer than count: its part is complete) or kSaveSkip. A shard that
  // refuses fails the op: NotSupported (a shard without a checkpoint
  // directory), PermissionDenied, or BadRequest (error().ps says why).
  static constexpr std::uint32_t kSaveSkip = 0xFFFFFFFFu;
  [[nodiscard]] Result<Ticket> save(TableId table, std::string_view name, std::span<const std::uint32_t> first,
                                    std::uint32_t count) noexcept;
  std::span<const std::uint32_t> saved(Ticket t) const noexcept;

  // Drives completions until the operation is done or `timeout` passed:
  // the operation's status, or Busy when it is still in flight.
  [[nodiscard]] Status wait(Ticket t, std::chrono::milliseconds timeout) noexcept;
  // Collects whatever completed (waiting at most `timeout`); never blocks longer.
  // Returns how many answers it collected. 0 also means the link is armed:
  // event_fd() becomes readable when the next one arrives. After a call that
  // collected some, call it again before sleeping on event_fd(), or an
  // answer that is already there wakes nobody.
  std::size_t progress(std::chrono::milliseconds timeout) noexcept;
  // Busy while in flight, else the operation's status. BadRequest for an unknown ticket.
  [[nodiscard]] Status status(Ticket t) const noexcept;
  OpError error(Ticket t) const noexcept;
  // Why the last operation that returned no ticket did not start: its
  // status, and the shard whose link refused it when one did.
  OpError last_refusal() const noexcept { return last_refusal_; }
  // A completed pull's rows (empty spans otherwise).
  PulledRows rows(Ticket t) const noexcept;
  // Done with the ticket: its memory goes back once no call of it is in flight.
  void release(Ticket t) noexcept;

  const TableSpec* table(TableId id) const noexcept;
  std::uint32_t shards() const noexcept { return shards_; }
  // Keys (dense: elements) per request (WorkerOptions::max_count, resolved).
  std::uint32_t max_count() const noexcept { return max_count_; }
  std::uint32_t calls_in_flight() const noexcept { return calls_; }
  int event_fd() const noexcept { return link_->event_fd(); }
  ShardLink& link() noexcept { return *link_; }
  // How many times it attached again after ferryd went away (WorkerOptions::relink).
  std::uint64_t reattached() const noexcept { return reattached_; }
  // Operations holding memory (in flight or unreleased), for tests.
  std::uint32_t live_ops() const noexcept { return live_; }

  struct FERRY_LOCAL Op;  // client/ps/worker_op.h

 private:
  FERRY_LOCAL Worker(std::unique_ptr<ShardLink> link, const WorkerOptions& options);  // checked by create()
  FERRY_LOCAL Result<Ticket> begin(const TableSpec& t, Op** op) noexcept;
  FERRY_LOCAL Result<Ticket> start_embedding(TableId table, ps::Op wire, bool state, std::span<const Key> keys,
                                             std::span<const float> values) noexcept;
  FERRY_LOCAL Result<Ticket> embedding_op(Op& op, Ticket ticket, std::span<const Key> keys,
                                          std::span<const float> values) noexcept;
  FERRY_LOCAL Result<Ticket> start_dense(TableId table, ps::Op wire, bool state,
                                         std::span<const float> values) noexcept;
  FERRY_LOCAL Result<Ticket> dense_op(Op& op, Ticket ticket, std::span<const float> values) noexcept;
  // worker_send.cpp: splitting into requests, response memory, sending.
  FERRY_LOCAL Result<Ticket> submit(Op& op, Ticket ticket) noexcept;
  FERRY_LOCAL Buffer encode(Op& op, std::uint32_t c) noexcept;
  FERRY_LOCAL std::uint32_t rows_per_request(const Op& op) const noexcept;
  FERRY_LOCAL Status plan(Op& op) noexcept;
  FERRY_LOCAL Status place_rows(Op& op) noexcept;
  FERRY_LOCAL bool place_acks(Op& op) noexcept;
  FERRY_LOCAL void send_more(Op& op, Ticket ticket) noexcept;
  FERRY_LOCAL bool send_chunk(Op& op, Ticket ticket, std::uint32_t c) noexcept;
  FERRY_LOCAL void pump() noexcept;
  FERRY_LOCAL void finish_chunk(Op& op, std::uint32_t c, const LinkDone& d) noexcept;
  FERRY_LOCAL Result<Ticket> rows_op(Ticket pulled, std::span<const float> grads, Op** out) noexcept;
  FERRY_LOCAL Result<Ticket> abort(Op& op, Ticket ticket, Status why) noexcept;
  FERRY_LOCAL Op* find(Ticket t) noexcept;
  FERRY_LOCAL const Op* find(Ticket t) const noexcept;
  FERRY_LOCAL void on_done(const LinkDone& d) noexcept;
  FERRY_LOCAL void expire() noexcept;
  FERRY_LOCAL void recycle(Op& op) noexcept;
  FERRY_LOCAL Status relink() noexcept;
  FERRY_LOCAL std::size_t collect(ShardLink& link, std::chrono::milliseconds timeout) noexcept;
  FERRY_LOCAL void drop_retired() noexcept;

  std::unique_ptr<ShardLink> link_;
  WorkerOptions options_;
  std::uint32_t shards_;
  std::vector<const TableSpec*> by_id_;
  std::vector<std::unique_ptr<Op>> ops_;
  std::vector<std::uint32_t> free_ops_;
  std::uint32_t live_ = 0;
  std::uint32_t calls_ = 0;  // calls in flight, all operations
  std::uint32_t max_count_ = 1;
  std::vector<Ticket> sending_;  // operations with requests not sent yet, oldest first
  OpError last_refusal_;
  std::uint32_t next_request_id_ = 1;
  std::uint64_t reattached_ = 0;
  struct FERRY_LOCAL Scratch;
  std::unique_ptr<Scratch> scratch_;
};

}  // namespace ferry::ps
