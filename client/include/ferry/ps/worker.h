// The worker side of the parameter server: pull rows of embedding tables
// (or a whole dense table) and push gradients back, each an asynchronous
// operation (a ticket) so a trainer can pull the next batch while the model
// computes. One operation sends at most one request to each shard, all at
// once, and completes when every shard has answered.
//
// Pulls coalesce duplicate keys: each distinct key is pulled once, and the
// rows of all shards land side by side in one response block, grouped by
// shard (shard 0's keys first, each shard's in first-seen order). rows()
// gives that block (the rows, zero-copy), the distinct keys in the same
// order, and for every requested key the index of its row. push() sums the
// gradients of duplicate keys; push_rows() pushes gradients for the rows of
// an earlier pull, in its row order, without hashing again.
//
// Error convention: starting an operation returns Result<Ticket> (a bad
// argument, a full table of operations: nothing was sent); wait() returns
// the operation's Status: Ok, a transport status (Timeout, ServiceGone,
// PeerReset, DaemonGone, ...) or BadRequest when a shard refused the
// request (error() names the shard and its PsStatus). A ticket stays valid
// until release(); a failed operation's buffers are freed once every
// shard's call has come back, never earlier (ferryd may still write them).
//
// Not thread safe: one thread at a time (the Python binding locks).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
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
};

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
  Buffer block;                               // the memory the rows live in
};

class FERRY_API Worker {
 public:
  // Throws std::invalid_argument for a bad table spec (configuration time).
  Worker(std::unique_ptr<ShardLink> link, const WorkerOptions& options);
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
  // Overwrites parameters (and resets their optimizer state); the last value of a duplicate key wins.
  [[nodiscard]] Result<Ticket> assign(TableId table, std::span<const Key> keys, std::span<const float> values) noexcept;
  [[nodiscard]] Result<Ticket> assign_dense(TableId table, std::span<const float> values) noexcept;

  // Drives completions until the operation is done or `timeout` passed:
  // the operation's status, or Busy when it is still in flight.
  [[nodiscard]] Status wait(Ticket t, std::chrono::milliseconds timeout) noexcept;
  // Collects whatever completed (waiting at most `timeout`); never blocks longer.
  void progress(std::chrono::milliseconds timeout) noexcept;
  // Busy while in flight, else the operation's status. BadRequest for an unknown ticket.
  [[nodiscard]] Status status(Ticket t) const noexcept;
  OpError error(Ticket t) const noexcept;
  // A completed pull's rows (empty spans otherwise).
  PulledRows rows(Ticket t) const noexcept;
  // Done with the ticket: its memory goes back once no call of it is in flight.
  void release(Ticket t) noexcept;

  const TableSpec* table(TableId id) const noexcept;
  std::uint32_t shards() const noexcept { return shards_; }
  int event_fd() const noexcept { return link_->event_fd(); }
  ShardLink& link() noexcept { return *link_; }
  // Operations holding memory (in flight or unreleased), for tests.
  std::uint32_t live_ops() const noexcept { return live_; }

  struct FERRY_LOCAL Op;  // client/ps/worker_op.h

 private:
  FERRY_LOCAL Result<Ticket> begin(const TableSpec& t, Op** op) noexcept;
  FERRY_LOCAL Result<Ticket> embedding_op(Op& op, Ticket ticket, std::span<const Key> keys,
                                          std::span<const float> values) noexcept;
  FERRY_LOCAL Result<Ticket> dense_op(Op& op, Ticket ticket, std::span<const float> values) noexcept;
  FERRY_LOCAL Result<Ticket> submit(Op& op, Ticket ticket) noexcept;
  FERRY_LOCAL Result<Ticket> abort(Op& op, Ticket ticket, Status why) noexcept;
  FERRY_LOCAL Op* find(Ticket t) noexcept;
  FERRY_LOCAL const Op* find(Ticket t) const noexcept;
  FERRY_LOCAL void on_done(const LinkDone& d) noexcept;
  FERRY_LOCAL void expire() noexcept;
  FERRY_LOCAL void recycle(Op& op) noexcept;

  std::unique_ptr<ShardLink> link_;
  WorkerOptions options_;
  std::uint32_t shards_;
  std::vector<const TableSpec*> by_id_;
  std::vector<std::unique_ptr<Op>> ops_;
  std::vector<std::uint32_t> free_ops_;
  std::uint32_t live_ = 0;
  std::uint32_t next_request_id_ = 1;
  struct FERRY_LOCAL Scratch;
  std::unique_ptr<Scratch> scratch_;
};

}  // namespace ferry::ps
