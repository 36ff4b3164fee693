// Worker: the operation table, completions, deadlines and waiting.
// Routing and the entry points live in worker_encode.cpp, splitting and
// sending in worker_send.cpp.
#include <algorithm>
#include <string>

#include "client/ps/worker_op.h"

namespace ferry::ps {

namespace {

using Clock = std::chrono::steady_clock;
constexpr std::size_t kDoneBatch = 64;
constexpr std::uint32_t kMaxOps = 1u << 16;  // the slot number's 16 bits
constexpr std::chrono::milliseconds kNoWait{0};

}  // namespace

Error Worker::create(std::unique_ptr<ShardLink> link, const WorkerOptions& options, std::unique_ptr<Worker>* out) {
  if (!link) return Error::bad_request("a worker needs a shard link");
  if (link->shards() == 0 || link->shards() > kMaxShards) return Error::bad_request("a worker needs 1 to 256 shards");
  if (options.max_ops == 0 || options.max_ops > kMaxOps) return Error::bad_request("max_ops must be in [1, 65536]");
  if (options.max_calls == 0) return Error::bad_request("max_calls must be at least 1");
  if (options.timeout.count() <= 0) return Error::bad_request("timeout must be positive");
  if (Error bad = check_tables(options.tables); bad.failed()) return bad;
  out->reset(new Worker(std::move(link), options));
  return {};
}

Worker::Worker(std::unique_ptr<ShardLink> link, const WorkerOptions& options)
    : link_(std::move(link)), options_(options), scratch_(std::make_unique<Scratch>()) {
  shards_ = link_->shards();
  for (const TableSpec& t : options_.tables) {
    if (t.id >= by_id_.size()) by_id_.resize(std::size_t{t.id} + 1, nullptr);
    by_id_[t.id] = &t;
  }
  max_count_ = options_.max_count != 0 ? std::min(options_.max_count, kMaxCount)
                                       : default_max_count(options_.tables, link_->max_message_bytes());
  scratch_->fill.resize(shards_);
  scratch_->done.resize(kDoneBatch);
  ops_.reserve(options_.max_ops);
}

Worker::~Worker() {
  // ferryd may still write into the buffers of calls in flight: wait for
  // their completions (each comes: Ok, Timeout, or DaemonGone at worst).
  const auto deadline = Clock::now() + options_.timeout + std::chrono::seconds(2);
  sending_.clear();  // nothing more goes out
  while (calls_ != 0 && link_->state() == Status::Ok && Clock::now() < deadline)
    progress(std::chrono::milliseconds(50));
  for (auto& op : ops_) {
    if (op->state == Op::State::Free) continue;
    for (Chunk& c : op->chunks) {
      if (c.request) op->link->free(c.request);
      if (c.staged) op->link->free(c.staged);
    }
    if (op->block) op->link->free(op->block);
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
  if (options_.relink && link_->state() == Status::DaemonGone) {
    if (const Status st = relink(); st != Status::Ok) {
      last_refusal_ = OpError{st, PsStatus::Ok, 0};
      return Result<Ticket>::fail(st);
    }
  }
  std::uint32_t slot;
  if (!free_ops_.empty()) {
    slot = free_ops_.back();
    free_ops_.pop_back();
  } else if (ops_.size() < options_.max_ops) {
    slot = static_cast<std::uint32_t>(ops_.size());
    ops_.push_back(std::make_unique<Op>());
    ops_.back()->slot = slot;
    ops_.back()->shard_rows.resize(std::size_t{shards_} + 1);
  } else {
    return Result<Ticket>::fail(Status::Busy);  // every slot is in flight or unreleased
  }
  Op& op = *ops_[slot];
  op.state = Op::State::Flight;
  op.released = false;
  op.table = &t;
  op.link = link_.get();
  op.opt_state = false;
  op.error = OpError{};
  op.outstanding = 0;
  op.rows = 0;
  op.deadline = Clock::now() + options_.timeout;
  std::fill(op.shard_rows.begin(), op.shard_rows.end(), 0);
  op.keys.clear();
  op.index.clear();
  op.chunks.clear();
  op.next_chunk = 0;
  op.answered = 0;
  op.values = nullptr;
  op.staged = false;
  op.held = false;
  op.free_acks.clear();
  ++live_;
  *out = &op;
  return Result<Ticket>::ok(make_ticket(slot, op.generation));
}

Result<Ticket> Worker::abort(Op& op, Ticket ticket, Status why) noexcept {
  (void)ticket;
  op.state = Op::State::Done;
  op.error.status = why;
  last_refusal_ = op.error;
  op.released = true;  // the caller never sees this ticket
  recycle(op);
  return Result<Ticket>::fail(why);
}

void Worker::on_done(const LinkDone& d) noexcept {
  const Ticket ticket = d.tag >> kChunkBits;
  const auto c = static_cast<std::uint32_t>(d.tag & (kMaxChunks - 1));
  Op* op = find(ticket);
  if (op == nullptr || c >= op->chunks.size() || op->chunks[c].state != Chunk::State::Flight) return;  // not ours
  finish_chunk(*op, c, d);
  if (op->outstanding == 0 && op->released && op->state != Op::State::Flight) recycle(*op);
}

void Worker::expire() noexcept {
  const auto now = Clock::now();
  const Status current = link_->state();
  for (auto& p : ops_) {
    Op& op = *p;
    if (op.state != Op::State::Flight) continue;
    const Status link = op.link == link_.get() ? current : op.link->state();
    if (link != Status::Ok && op.outstanding == 0) {
      op.state = Op::State::Done;
      op.error.status = link;
    } else if (now > op.deadline) {
      op.state = Op::State::Done;  // its calls still come back (ferryd's timeout); memory waits for them
      op.error.status = Status::Timeout;
    }
    if (op.state == Op::State::Done && op.released && op.outstanding == 0) recycle(op);
  }
}

std::size_t Worker::collect(ShardLink& link, std::chrono::milliseconds timeout) noexcept {
  const std::size_t n = link.wait(scratch_->done, timeout);
  for (std::size_t i = 0; i < n; ++i) on_done(scratch_->done[i]);
  return n;
}

std::size_t Worker::progress(std::chrono::milliseconds timeout) noexcept {
  std::size_t n = 0;
  // Earlier links (ferryd went away): whatever of theirs is left to come, DaemonGone.
  for (std::size_t i = 0; i < scratch_->retired.size(); ++i) n += collect(*scratch_->retired[i], kNoWait);
  n += collect(*link_, n != 0 ? kNoWait : timeout);
  if (!sending_.empty()) pump();  // answered calls gave back memory and call slots
  expire();
  if (scratch_->drop_due) drop_retired();
  return n;
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
  const float* rows = op->staged ? op->heap.get() : reinterpret_cast<const float*>(op->block.data);
  r.rows = {rows, rows == nullptr ? 0 : std::size_t{op->rows} * op->table->dim};
  r.keys = op->keys;
  r.index = op->index;
  r.shard_rows = op->shard_rows;
  r.block = op->block;
  r.staged = op->staged;
  return r;
}

void Worker::release(Ticket t) noexcept {
  Op* op = find(t);
  if (op == nullptr || op->released) return;
  op->released = true;
  // A pull nobody will read stops here; a push or assign still goes out whole.
  if (op->state == Op::State::Flight && op->wire == ps::Op::Pull) {
    op->state = Op::State::Done;
    op->error.status = Status::Cancelled;
  }
  if (op->outstanding == 0 && op->state != Op::State::Flight) recycle(*op);
  if (scratch_->drop_due) drop_retired();  // that was the last operation of an earlier link
}

namespace {

// Gives back what one very large operation grew, so it is not kept for the next.
template <typename V>
void trim(V& v) {
  if (v.capacity() > (std::size_t{1} << 20)) V().swap(v);
}

}  // namespace

void Worker::recycle(Op& op) noexcept {
  for (Chunk& c : op.chunks) {
    if (c.request) op.link->free(c.request);
    if (c.staged) op.link->free(c.staged);
  }
  op.chunks.clear();
  if (op.block) op.link->free(op.block);
  op.block = Buffer{};
  op.heap.reset();
  trim(op.chunks);
  trim(op.owned);
  trim(op.keys);
  trim(op.index);
  op.state = Op::State::Free;
  ++op.generation;
  if (op.generation >= (1u << 24)) op.generation = 1;  // a tag (ticket << 8) stays under 2^48
  --live_;
  free_ops_.push_back(op.slot);
  if (op.link != link_.get()) scratch_->drop_due = true;  // maybe its link's last: drop_retired()
}

// A new link once ferryd is back (WorkerOptions::relink); the failure's
// status while it is not, tried again after a pause that doubles to 2 s.
Status Worker::relink() noexcept {
  Scratch& x = *scratch_;
  if (Clock::now() < x.relink_at) return x.relink_failure;
  std::unique_ptr<ShardLink> next;
  const Error made = options_.relink(&next);
  Status failure = made.status();
  if (!made.failed() && (!next || next->shards() != shards_)) failure = Status::BadRequest;  // not the same shards
  if (failure != Status::Ok) {
    x.relink_failure = failure;
    x.relink_at = Clock::now() + x.relink_pause.next();
    return failure;
  }
  // Every call still in flight on the old link completes now (DaemonGone):
  // collected here (progress() takes what a batch left).
  while (collect(*link_, kNoWait) != 0) {
  }
  expire();
  x.retired.push_back(std::move(link_));
  link_ = std::move(next);
  x.relink_pause.reset();
  x.relink_at = {};
  ++reattached_;
  drop_retired();
  return Status::Ok;
}

// Destroys the earlier links no operation holds any more (their memory with them).
void Worker::drop_retired() noexcept {
  scratch_->drop_due = false;
  auto& retired = scratch_->retired;
  std::erase_if(retired, [this](const std::unique_ptr<ShardLink>& l) {
    return std::none_of(ops_.begin(), ops_.end(),
                        [&](const auto& op) { return op->state != Op::State::Free && op->link == l.get(); });
  });
}

}  // namespace ferry::ps
