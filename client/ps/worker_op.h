// Worker::Op and the worker's scratch space: private to worker.cpp (the
// operation table, completions, waiting), worker_send.cpp (splitting an
// operation into requests and sending them as memory allows) and
// worker_encode.cpp (routing keys to shards, the operations' entry points).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "client/ps/key_index.h"
#include "ferry/ps/worker.h"
#include "ferry/retry_pause.h"

namespace ferry::ps {

// One request of an operation: `count` rows (dense: elements) of one shard,
// starting at row `first` of the operation (dense: at element `first`).
struct Chunk {
  enum class State : std::uint8_t { Waiting, Flight, Answered };
  std::uint32_t shard = 0;
  std::uint32_t first = 0;
  std::uint32_t count = 0;
  State state = State::Waiting;
  std::uint16_t ack = 0;  // push/assign: its slot in the op's ack block
  Buffer request;         // while in flight
  Buffer staged;          // pull into process memory: the block its response lands in
};

struct Worker::Op {
  enum class State : std::uint8_t { Free, Flight, Done };
  std::uint32_t slot = 0;
  std::uint32_t generation = 1;
  State state = State::Free;
  bool released = false;
  bool staged = false;  // pull: rows in `heap` (no block or span of the arena held them), else zero copy in `block`
  bool held = false;    // push_rows_prepare: requests made, not sent until commit()
  ps::Op wire = ps::Op::Pull;
  bool opt_state = false;  // the rows' optimizer state, not their values (Header::flags kFlagState)
  const TableSpec* table = nullptr;
  ShardLink* link = nullptr;  // the link it began on: its buffers are that link's, its calls go there
  OpError error;
  std::uint32_t outstanding = 0;                   // calls whose LinkDone has not come back
  std::chrono::steady_clock::time_point deadline;  // pushed forward whenever a call of it is answered
  std::uint32_t rows = 0;                          // distinct rows (dense: elements)
  std::vector<std::uint32_t> shard_rows;           // per shard: first row; shards + 1 entries
  std::vector<Key> keys;                           // distinct keys in row order
  std::vector<std::int64_t> index;                 // pull: per requested key, its row
  std::vector<Chunk> chunks;                       // the requests, grouped by shard
  std::uint32_t next_chunk = 0;                    // the first one not sent yet
  std::uint32_t answered = 0;
  // push/assign: the values, in row order (dense: element order): the
  // caller's memory while the operation is being started, `owned` once it
  // returned with requests still to send.
  const float* values = nullptr;
  std::vector<float> owned;
  std::vector<std::uint16_t> free_acks;  // push/assign: ack slots not in use
  std::unique_ptr<float[]> heap;         // staged pull: the rows
  // Save: the checkpoint's name, the rows each step asks for, and per
  // shard the step's first row until the shard answers, then the rows it
  // wrote (kSaveSkip: not asked).
  std::string save_name;
  std::uint32_t save_count = 0;
  std::vector<std::uint32_t> saved;
  Buffer block;  // zero-copy pull: the rows; push/assign: one ack per slot
};

struct Worker::Scratch {
  detail::KeyIndex distinct;
  std::vector<std::uint32_t> first;  // per requested key: its distinct number (first-seen order)
  std::vector<Key> unique;           // per distinct number: the key
  std::vector<std::uint32_t> shard;  // per distinct number: its shard
  std::vector<std::uint32_t> row;    // per distinct number: its row (shard-grouped)
  std::vector<std::uint8_t> seen;    // push: per distinct number, gradient written yet
  std::vector<std::uint32_t> fill;   // per shard
  std::vector<LinkDone> done;
  // Attaching again after ferryd went away (WorkerOptions::relink): the
  // links replaced, each kept while an operation that began on it is
  // (its buffers, rows a caller reads); when the next try may be, and what
  // the last one said.
  std::vector<std::unique_ptr<ShardLink>> retired;
  RetryPause relink_pause;
  std::chrono::steady_clock::time_point relink_at{};
  Status relink_failure = Status::Ok;
  bool drop_due = false;  // an operation of an earlier link was recycled: drop_retired()
};

// A ticket is (generation << 16 | slot), under 2^40; a call's tag adds the
// chunk's number in the 24 bits below it.
constexpr std::uint32_t kChunkBits = 24;
constexpr std::uint64_t kMaxChunks = std::uint64_t{1} << kChunkBits;
constexpr std::uint64_t make_ticket(std::uint32_t slot, std::uint32_t generation) noexcept {
  return (std::uint64_t{generation} << 16) | slot;
}
constexpr std::uint64_t make_tag(std::uint64_t ticket, std::uint32_t chunk) noexcept {
  return (ticket << kChunkBits) | chunk;
}
// Ack slots of one operation: calls of it in flight at once, at most.
constexpr std::uint32_t kMaxAcks = 1024;
static_assert(kMaxAcks <= 65536, "an ack slot is 16 bits");

}  // namespace ferry::ps
