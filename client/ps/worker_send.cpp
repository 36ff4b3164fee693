// Worker: an operation's requests. Its rows are split into requests that
// each fit one message and the shards' max_count (usually one per shard);
// pulled rows land zero copy in one arena block (past a message: a span of
// whole slabs, up to half the arena), else each response lands in its own
// block and is copied into process memory.
// Requests go out as far as max_calls and the arena allow; the rest wait in
// `sending_` and go out from progress() as earlier calls are answered.
#include <algorithm>
#include <cstring>
#include <new>

#include "client/ps/worker_op.h"

namespace ferry::ps {

namespace {

using Clock = std::chrono::steady_clock;

void write_header(std::byte* at, const Worker::Op& op, std::uint32_t count, std::uint32_t offset,
                  std::uint32_t request_id) noexcept {
  const TableSpec& t = *op.table;
  Header h;
  h.op = static_cast<std::uint8_t>(op.wire);
  h.flags = op.opt_state ? kFlagState : 0;
  h.table = t.id;
  h.count = count;
  h.dim = t.dim;
  h.offset = offset;
  h.request_id = request_id;
  std::memcpy(at, &h, sizeof h);
}

// A request's bytes: a Save carries its name instead of keys and values.
std::size_t request_length(const Worker::Op& op, const Chunk& ch) noexcept {
  if (op.wire == ps::Op::Save) return kHeaderBytes + op.save_name.size();
  return request_bytes(op.wire, op.table->kind, ch.count, op.table->dim);
}

void fail(Worker::Op& op, Status status, PsStatus ps, std::uint32_t shard) noexcept {
  if (op.state != Worker::Op::State::Flight) return;  // the first failure is the one reported
  op.state = Worker::Op::State::Done;
  op.error = OpError{status, ps, shard};
}

}  // namespace

std::uint32_t default_max_count(std::span<const TableSpec> tables, std::size_t max_message_bytes) noexcept {
  std::uint64_t widest = 1;
  for (const TableSpec& t : tables) widest = std::max<std::uint64_t>(widest, t.kind == TableKind::Dense ? 1 : t.dim);
  const std::uint64_t room = max_message_bytes > 64 ? max_message_bytes - 64 : 0;
  return static_cast<std::uint32_t>(std::clamp<std::uint64_t>(room / (8 + 4 * widest), 1, kMaxCount));
}

std::uint32_t Worker::rows_per_request(const Op& op) const noexcept {
  const std::uint64_t max = op.link->max_message_bytes();
  const std::uint64_t dim = op.table->dim;
  const bool pull = op.wire == ps::Op::Pull;
  const std::uint64_t per_row = (op.table->kind == TableKind::Embedding ? 8 : 0) + (pull ? 0 : 4 * dim);
  std::uint64_t rows = std::min<std::uint64_t>(max_count_, kMaxCount);
  if (per_row != 0) rows = std::min(rows, max > kHeaderBytes ? (max - kHeaderBytes) / per_row : 0);
  if (pull) rows = std::min(rows, max / (4 * dim));
  return static_cast<std::uint32_t>(rows);
}

// The requests: each shard's rows in pieces of at most rows_per_request().
Status Worker::plan(Op& op) noexcept {
  op.chunks.clear();
  if (op.wire == ps::Op::Save) {  // one step on each shard asked
    for (std::uint32_t s = 0; s < shards_; ++s)
      if (op.saved[s] != kSaveSkip) {
        Chunk c;
        c.shard = s;
        c.first = op.saved[s];
        c.count = op.save_count;
        op.chunks.push_back(c);
      }
    return Status::Ok;
  }
  const std::uint32_t per = rows_per_request(op);
  if (op.rows == 0) return Status::Ok;
  if (per == 0) return Status::ResponseTooLarge;  // one row exceeds the largest message
  std::uint64_t need = 0;
  for (std::uint32_t s = 0; s < shards_; ++s) need += (op.shard_rows[s + 1] - op.shard_rows[s] + per - 1) / per;
  if (need >= kMaxChunks) return Status::BadRequest;
  op.chunks.reserve(need);
  for (std::uint32_t s = 0; s < shards_; ++s) {
    for (std::uint32_t first = op.shard_rows[s]; first < op.shard_rows[s + 1];) {
      Chunk c;
      c.shard = s;
      c.first = first;
      c.count = std::min(per, op.shard_rows[s + 1] - first);
      op.chunks.push_back(c);
      first += c.count;
    }
  }
  return Status::Ok;
}

// Where a pull's rows land: in one block (zero copy: a block of the arena,
// or a span of whole slabs for more than a message) or in process memory.
// A push's or assign's acks get their block from place_acks() instead.
Status Worker::place_rows(Op& op) noexcept {
  if (op.chunks.empty() || op.wire != ps::Op::Pull) return Status::Ok;
  const std::size_t floats = std::size_t{op.rows} * op.table->dim;
  op.block = 4 * floats <= op.link->max_message_bytes() ? op.link->alloc(4 * floats) : op.link->alloc_span(4 * floats);
  if (op.block) return Status::Ok;
  op.staged = true;
  op.heap.reset(new (std::nothrow) float[floats]);
  return op.heap ? Status::Ok : Status::NoMemory;
}

Result<Ticket> Worker::submit(Op& op, Ticket ticket) noexcept {
  if (const Status st = plan(op); st != Status::Ok) return abort(op, ticket, st);
  if (const Status st = place_rows(op); st != Status::Ok) return abort(op, ticket, st);
  if (op.chunks.empty()) {
    op.state = Op::State::Done;  // nothing to send
    return Result<Ticket>::ok(ticket);
  }
  send_more(op, ticket);
  if (op.state == Op::State::Done && op.next_chunk == 0 && op.outstanding == 0)
    return abort(op, ticket, op.error.status);  // nothing went out: the caller gets the reason now
  if (op.state == Op::State::Flight && op.next_chunk < op.chunks.size()) {
    // Requests still to send after the caller's memory is gone: keep the values.
    if (op.values != nullptr && op.values != op.owned.data()) {
      const std::size_t n = op.table->kind == TableKind::Dense ? op.table->rows : std::size_t{op.rows} * op.table->dim;
      op.owned.assign(op.values, op.values + n);
      op.values = op.owned.data();
    }
    sending_.push_back(ticket);
  }
  return Result<Ticket>::ok(ticket);
}

// A push's or assign's ack slots: one block, taken when its first request
// goes out rather than when it is submitted, so that an op queued behind
// another that fills the arena waits for memory as its requests do. False
// when the arena has no room for it now.
bool Worker::place_acks(Op& op) noexcept {
  const auto acks = static_cast<std::uint32_t>(std::min<std::size_t>(op.chunks.size(), kMaxAcks));
  op.block = op.link->alloc(kAckBytes * acks);
  if (!op.block) return false;
  op.free_acks.resize(acks);
  for (std::uint32_t i = 0; i < acks; ++i) op.free_acks[i] = static_cast<std::uint16_t>(acks - 1 - i);
  return true;
}

void Worker::send_more(Op& op, Ticket ticket) noexcept {
  while (op.state == Op::State::Flight && op.next_chunk < op.chunks.size() && calls_ < options_.max_calls) {
    if (op.wire != ps::Op::Pull && !op.block && !place_acks(op)) {
      // As for a request: later, when calls in flight give memory back; never, when none are.
      if (calls_ == 0) fail(op, Status::NoMemory, PsStatus::Ok, op.chunks[op.next_chunk].shard);
      break;
    }
    if (op.wire != ps::Op::Pull && op.free_acks.empty()) break;
    if (!send_chunk(op, ticket, op.next_chunk)) break;
    ++op.next_chunk;
  }
}

// Request c in a new arena block: header, keys, and the values when the op
// has them (prepared requests get theirs later). Empty when the arena is full.
Buffer Worker::encode(Op& op, std::uint32_t c) noexcept {
  const Chunk& ch = op.chunks[c];
  const TableSpec& t = *op.table;
  const std::size_t dim = t.dim;
  Buffer request = op.link->alloc(request_length(op, ch));
  if (!request) return request;
  if (op.wire == ps::Op::Save) {
    write_header(request.data, op, ch.count, ch.first, next_request_id_++);
    std::memcpy(request.data + kHeaderBytes, op.save_name.data(), op.save_name.size());
    return request;
  }
  const bool embedding = t.kind == TableKind::Embedding;
  write_header(request.data, op, ch.count, embedding ? 0 : ch.first, next_request_id_++);
  std::byte* at = request.data + kHeaderBytes;
  if (embedding) {
    std::memcpy(at, op.keys.data() + ch.first, 8 * std::size_t{ch.count});
    at += 8 * std::size_t{ch.count};
  }
  if (op.wire != ps::Op::Pull && op.values != nullptr)
    std::memcpy(at, op.values + std::size_t{ch.first} * dim, 4 * std::size_t{ch.count} * dim);
  return request;
}

// Sends request c; false when it could not go now (memory, a full ring:
// it goes later) or ever (the op failed).
bool Worker::send_chunk(Op& op, Ticket ticket, std::uint32_t c) noexcept {
  Chunk& ch = op.chunks[c];
  const TableSpec& t = *op.table;
  const std::size_t dim = t.dim;
  const bool pull = op.wire == ps::Op::Pull;
  const bool prepared = static_cast<bool>(ch.request);
  // Out of arena memory: later, when calls in flight give some back; never,
  // when none are in flight (nothing of this worker will free any).
  auto no_memory = [&] {
    if (calls_ == 0) fail(op, Status::NoMemory, PsStatus::Ok, ch.shard);
    return false;
  };
  Buffer request = prepared ? ch.request : encode(op, c);
  if (!request) return no_memory();
  Buffer response;
  std::uint16_t ack = 0;
  const std::size_t bytes = response_bytes(op.wire, ch.count, dim);
  if (pull && op.staged) {
    ch.staged = op.link->alloc(bytes);
    if (!ch.staged) {
      op.link->free(request);
      return no_memory();
    }
    response = Buffer{ch.staged.data, static_cast<std::uint32_t>(bytes), ch.staged.offset};
  } else if (pull) {
    const std::size_t at = 4 * std::size_t{ch.first} * dim;
    response = Buffer{op.block.data + at, static_cast<std::uint32_t>(bytes), op.block.offset + at};
  } else {
    ack = op.free_acks.back();
    response = Buffer{op.block.data + kAckBytes * ack, kAckBytes, op.block.offset + kAckBytes * ack};
  }
  const auto len = static_cast<std::uint32_t>(request_length(op, ch));
  const Status st = op.link->call(ch.shard, request, len, response, make_tag(ticket, c));
  if (st != Status::Ok) {
    if (ch.staged) op.link->free(ch.staged);
    ch.staged = Buffer{};
    if (st == Status::Busy && prepared) return false;  // our ring is full: the same request goes later
    op.link->free(request);
    ch.request = Buffer{};
    if (st != Status::Busy) fail(op, st, PsStatus::Ok, ch.shard);  // Busy: our ring is full, try later
    return false;
  }
  if (!pull) {
    op.free_acks.pop_back();
    ch.ack = ack;
  }
  ch.request = request;
  ch.state = Chunk::State::Flight;
  ++op.outstanding;
  ++calls_;
  return true;
}

Result<Ticket> Worker::push_rows_prepare(Ticket pulled) noexcept {
  Op* op = nullptr;
  const auto begun = rows_op(pulled, {}, &op);
  if (!begun) return begun;
  if (const Status st = plan(*op); st != Status::Ok) return abort(*op, begun.value, st);
  if (op->chunks.size() > kMaxAcks) return abort(*op, begun.value, Status::NoMemory);  // too many to hold at once
  if (!op->chunks.empty() && !place_acks(*op)) return abort(*op, begun.value, Status::NoMemory);
  for (std::uint32_t c = 0; c < op->chunks.size(); ++c) {
    op->chunks[c].request = encode(*op, c);
    if (!op->chunks[c].request) return abort(*op, begun.value, Status::NoMemory);
  }
  op->held = true;
  return begun;
}

std::vector<Worker::PreparedRows> Worker::prepared(Ticket t) const {
  std::vector<PreparedRows> out;
  const Op* op = find(t);
  if (op == nullptr || !op->held) return out;
  const std::size_t keys = op->table->kind == TableKind::Embedding ? 8 : 0;
  for (const Chunk& ch : op->chunks)
    out.push_back({ch.first, ch.count, reinterpret_cast<float*>(ch.request.data + kHeaderBytes + keys * ch.count)});
  return out;
}

Status Worker::commit(Ticket t) noexcept {
  Op* op = find(t);
  if (op == nullptr || !op->held || op->released) return Status::BadRequest;
  op->held = false;
  if (op->chunks.empty()) {
    op->state = Op::State::Done;
    return Status::Ok;
  }
  send_more(*op, t);
  if (op->state == Op::State::Flight && op->next_chunk < op->chunks.size()) sending_.push_back(t);
  return Status::Ok;
}

void Worker::pump() noexcept {
  std::size_t keep = 0;
  for (const Ticket t : sending_) {
    Op* op = find(t);
    if (op == nullptr || op->state != Op::State::Flight) continue;
    send_more(*op, t);
    if (op->state == Op::State::Flight && op->next_chunk < op->chunks.size()) sending_[keep++] = t;
  }
  sending_.resize(keep);
}

void Worker::finish_chunk(Op& op, std::uint32_t c, const LinkDone& d) noexcept {
  Chunk& ch = op.chunks[c];
  --op.outstanding;
  --calls_;
  op.link->free(ch.request);
  ch.request = Buffer{};
  ch.state = Chunk::State::Answered;
  const bool pull = op.wire == ps::Op::Pull;
  if (op.state == Op::State::Flight) {
    const std::size_t dim = op.table->dim;
    const std::size_t expect = response_bytes(op.wire, ch.count, dim);
    const std::byte* at = !pull       ? op.block.data + kAckBytes * ch.ack
                          : op.staged ? ch.staged.data
                                      : op.block.data + 4 * std::size_t{ch.first} * dim;
    const PsStatus ps = d.status == Status::Ok ? classify_response(at, d.length, expect, op.wire) : PsStatus::Ok;
    if (d.status != Status::Ok) {
      fail(op, d.status, PsStatus::Ok, ch.shard);
    } else if (ps != PsStatus::Ok) {
      // The refusals a caller can act on get their own status; the rest are bad requests.
      const Status why = ps == PsStatus::Forbidden    ? Status::PermissionDenied
                         : ps == PsStatus::TableFull  ? Status::NoMemory
                         : ps == PsStatus::NotEnabled ? Status::NotSupported
                                                      : Status::BadRequest;
      fail(op, why, ps, ch.shard);
    } else {
      if (pull && op.staged) std::memcpy(op.heap.get() + std::size_t{ch.first} * dim, ch.staged.data, expect);
      if (op.wire == ps::Op::Save) std::memcpy(&op.saved[ch.shard], at, kAckBytes);
      op.deadline = Clock::now() + options_.timeout;  // an answer is progress: the timeout counts from here
      if (++op.answered == op.chunks.size()) op.state = Op::State::Done;
    }
  }
  if (ch.staged) op.link->free(ch.staged);
  ch.staged = Buffer{};
  if (!pull) op.free_acks.push_back(ch.ack);
}

}  // namespace ferry::ps
