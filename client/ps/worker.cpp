// Worker: the operation table, completions, deadlines and waiting.
// Routing and encoding live in worker_encode.cpp.
#include <algorithm>
#include <stdexcept>
#include <string>

#include "client/ps/worker_op.h"

namespace ferry::ps {

namespace {

using Clock = std::chrono::steady_clock;
constexpr std::size_t kDoneBatch = 64;
constexpr std::uint32_t kMaxOps = 1u << 16;  // the slot number's 16 bits

}  // namespace

Worker::Worker(std::unique_ptr<ShardLink> link, const WorkerOptions& options)
    : link_(std::move(link)), options_(options), scratch_(std::make_unique<Scratch>()) {
  if (!link_) throw std::invalid_argument("a worker needs a shard link");
  shards_ = link_->shards();
  if (shards_ == 0 || shards_ > kMaxShards) throw std::invalid_argument("a worker needs 1 to 256 shards");
  if (options_.max_ops == 0 || options_.max_ops > kMaxOps) throw std::invalid_argument("max_ops must be in [1, 65536]");
  if (options_.timeout.count() <= 0) throw std::invalid_argument("timeout must be positive");
  for (const TableSpec& t : options_.tables) {
    if (const std::string why = table_error(t); !why.empty()) throw std::invalid_argument(why);
    if (t.id >= by_id_.size()) by_id_.resize(std::size_t{t.id} + 1, nullptr);
    if (by_id_[t.id] != nullptr) throw std::invalid_argument("table id " + std::to_string(t.id) + " given twice");
    by_id_[t.id] = &t;
  }
  scratch_->fill.resize(shards_);
  scratch_->done.resize(kDoneBatch);
  ops_.reserve(options_.max_ops);
}

Worker::~Worker() {
  // ferryd may still write into the buffers of calls in flight: wait for
  // their completions (each comes: Ok, Timeout, or DaemonGone at worst).
  const auto deadline = Clock::now() + options_.timeout + std::chrono::seconds(2);
  auto in_flight = [this] {
    for (const auto& op : ops_)
      if (op->outstanding != 0) return true;
    return false;
  };
  while (in_flight() && link_->state() == Status::Ok && Clock::now() < deadline)
    progress(std::chrono::milliseconds(50));
  for (auto& op : ops_) {
    for (Buffer& b : op->requests)
      if (b) link_->free(b);
    if (op->block) link_->free(op->block);
  }
}

const TableSpec* Worker::table(TableId id) const noexcept { return id < by_id_.size() ? by_id_[id] : nullptr; }

Worker::Op* Worker::find(Ticket t) noexcept {
  const std::uint64_t slot = t & 0xFFFF;
  if (slot >= ops_.size()) return nullptr;
  Op& op = *ops_[slot];
  if (op.state == Op::State::Free || make_ticket(static_cast<std::uint32_t>(slot), op.generation) != t) return nullptr;
  return &op;
}

const Worker::Op* Worker::find(Ticket t) const noexcept { return const_cast<Worker*>(this)->find(t); }

Result<Ticket> Worker::begin(const TableSpec& t, Op** out) noexcept {
  std::uint32_t slot;
  if (!free_ops_.empty()) {
    slot = free_ops_.back();
    free_ops_.pop_back();
  } else if (ops_.size() < options_.max_ops) {
    slot = static_cast<std::uint32_t>(ops_.size());
    ops_.push_back(std::make_unique<Op>());
    ops_.back()->slot = slot;
    ops_.back()->requests.resize(shards_);
    ops_.back()->request_len.resize(shards_);
    ops_.back()->shard_rows.resize(std::size_t{shards_} + 1);
  } else {
    return Result<Ticket>::fail(Status::Busy);  // every slot is in flight or unreleased
  }
  Op& op = *ops_[slot];
  op.state = Op::State::Flight;
  op.released = false;
  op.table = &t;
  op.error = OpError{};
  op.outstanding = 0;
  op.rows = 0;
  op.deadline = Clock::now() + options_.timeout;
  std::fill(op.request_len.begin(), op.request_len.end(), 0);
  std::fill(op.shard_rows.begin(), op.shard_rows.end(), 0);
  op.keys.clear();
  op.index.clear();
  ++live_;
  *out = &op;
  return Result<Ticket>::ok(make_ticket(slot, op.generation));
}

Result<Ticket> Worker::abort(Op& op, Ticket ticket, Status why) noexcept {
  (void)ticket;
  op.state = Op::State::Done;
  op.error.status = why;
  op.released = true;  // the caller never sees this ticket
  recycle(op);
  return Result<Ticket>::fail(why);
}

Result<Ticket> Worker::submit(Op& op, Ticket ticket) noexcept {
  for (std::uint32_t s = 0; s < shards_; ++s) {
    if (op.request_len[s] == 0) continue;
    const std::size_t expect = response_bytes(op.wire, op.shard_rows[s + 1] - op.shard_rows[s], op.table->dim);
    Buffer resp = op.block;
    if (op.wire == ps::Op::Pull) {
      const std::size_t at = 4 * std::size_t{op.shard_rows[s]} * op.table->dim;
      resp = Buffer{op.block.data + at, static_cast<std::uint32_t>(expect), op.block.offset + at};
    } else {
      resp = Buffer{op.block.data + kAckBytes * s, kAckBytes, op.block.offset + kAckBytes * s};
    }
    Status st;
    while ((st = link_->call(s, op.requests[s], op.request_len[s], resp, make_tag(ticket, s))) == Status::Busy) {
      // Our submission ring is full: let completions drain it, within the deadline.
      if (Clock::now() > op.deadline) break;
      progress(std::chrono::milliseconds(1));
    }
    if (st != Status::Ok) {
      // Shards already called answer into this op's memory: it stays until they have.
      link_->free(op.requests[s]);
      op.requests[s] = Buffer{};
      op.request_len[s] = 0;
      if (op.state == Op::State::Flight) {
        op.state = Op::State::Done;
        op.error = OpError{st, PsStatus::Ok, s};
      }
      continue;
    }
    ++op.outstanding;
  }
  if (op.outstanding == 0 && op.state == Op::State::Flight) op.state = Op::State::Done;  // nothing to send
  return Result<Ticket>::ok(ticket);
}

void Worker::on_done(const LinkDone& d) noexcept {
  const Ticket ticket = d.tag >> 8;
  const std::uint32_t s = static_cast<std::uint32_t>(d.tag & 0xFF);
  Op* found = find(ticket);
  if (found == nullptr || s >= shards_ || found->request_len[s] == 0) return;  // not a call of ours in flight
  Op& op = *found;
  --op.outstanding;
  link_->free(op.requests[s]);
  op.requests[s] = Buffer{};
  const std::uint32_t count = op.shard_rows[s + 1] - op.shard_rows[s];
  op.request_len[s] = 0;
  if (op.state == Op::State::Flight) {
    if (d.status != Status::Ok) {
      op.state = Op::State::Done;
      op.error = OpError{d.status, PsStatus::Ok, s};
    } else {
      const std::size_t expect = response_bytes(op.wire, count, op.table->dim);
      const std::byte* at = op.wire == ps::Op::Pull ? op.block.data + 4 * std::size_t{op.shard_rows[s]} * op.table->dim
                                                    : op.block.data + kAckBytes * s;
      const PsStatus ps = classify_response(at, d.length, expect, op.wire);
      if (ps != PsStatus::Ok) {
        op.state = Op::State::Done;
        // The refusals a caller can act on get their own status; the rest are bad requests.
        const Status why = ps == PsStatus::Forbidden   ? Status::PermissionDenied
                           : ps == PsStatus::TableFull ? Status::NoMemory
                                                       : Status::BadRequest;
        op.error = OpError{why, ps, s};
      } else if (op.outstanding == 0) {
        op.state = Op::State::Done;
      }
    }
  }
  if (op.outstanding == 0 && op.released) recycle(op);
}

void Worker::expire() noexcept {
  const auto now = Clock::now();
  const Status link = link_->state();
  for (auto& p : ops_) {
    Op& op = *p;
    if (op.state != Op::State::Flight) continue;
    if (link != Status::Ok && op.outstanding == 0) {
      op.state = Op::State::Done;
      op.error.status = link;
    } else if (now > op.deadline) {
      op.state = Op::State::Done;  // its calls still come back (ferryd's timeout); memory waits for them
      op.error.status = Status::Timeout;
    }
  }
}

void Worker::progress(std::chrono::milliseconds timeout) noexcept {
  const std::size_t n = link_->wait(scratch_->done, timeout);
  for (std::size_t i = 0; i < n; ++i) on_done(scratch_->done[i]);
  expire();
}

Status Worker::status(Ticket t) const noexcept {
  const Op* op = find(t);
  if (op == nullptr || op->released) return Status::BadRequest;
  return op->state == Op::State::Flight ? Status::Busy : op->error.status;
}

Status Worker::wait(Ticket t, std::chrono::milliseconds timeout) noexcept {
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    const Status s = status(t);
    if (s != Status::Busy) return s;
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) return Status::Busy;
    progress(std::min(left, std::chrono::milliseconds(100)));
  }
}

OpError Worker::error(Ticket t) const noexcept {
  const Op* op = find(t);
  return op == nullptr ? OpError{Status::BadRequest, PsStatus::Ok, 0} : op->error;
}

PulledRows Worker::rows(Ticket t) const noexcept {
  const Op* op = find(t);
  if (op == nullptr || op->released || op->state != Op::State::Done || op->error.status != Status::Ok ||
      op->wire != ps::Op::Pull)
    return {};
  PulledRows r;
  r.rows = {reinterpret_cast<const float*>(op->block.data), std::size_t{op->rows} * op->table->dim};
  r.keys = op->keys;
  r.index = op->index;
  r.shard_rows = op->shard_rows;
  r.block = op->block;
  return r;
}

void Worker::release(Ticket t) noexcept {
  Op* op = find(t);
  if (op == nullptr || op->released) return;
  op->released = true;
  if (op->outstanding == 0) recycle(*op);
}

void Worker::recycle(Op& op) noexcept {
  for (Buffer& b : op.requests) {
    if (b) link_->free(b);
    b = Buffer{};
  }
  if (op.block) link_->free(op.block);
  op.block = Buffer{};
  op.state = Op::State::Free;
  ++op.generation;
  if (op.generation >= (1u << 24)) op.generation = 1;  // a tag (ticket << 8) stays under 2^48
  --live_;
  free_ops_.push_back(op.slot);
}

}  // namespace ferry::ps
