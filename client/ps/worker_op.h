// Worker::Op and the worker's scratch space: private to worker.cpp (the
// operation table, completions, waiting) and worker_encode.cpp (routing
// keys to shards and encoding the requests).
#pragma once

#include <chrono>
#include <cstdint>
#include <vector>

#include "client/ps/key_index.h"
#include "ferry/ps/worker.h"

namespace ferry::ps {

struct Worker::Op {
  enum class State : std::uint8_t { Free, Flight, Done };
  std::uint32_t slot = 0;
  std::uint32_t generation = 1;
  State state = State::Free;
  bool released = false;
  ps::Op wire = ps::Op::Pull;
  const TableSpec* table = nullptr;
  OpError error;
  std::uint32_t outstanding = 0;  // calls whose LinkDone has not come back
  std::chrono::steady_clock::time_point deadline;
  std::uint32_t rows = 0;        // pull: distinct rows (dense: elements)
  std::vector<Buffer> requests;  // per shard; empty where that shard gets none
  std::vector<std::uint32_t> request_len;
  std::vector<std::uint32_t> shard_rows;  // per shard: first row; shards + 1 entries
  std::vector<Key> keys;                  // distinct keys in row order
  std::vector<std::int64_t> index;        // pull: per requested key, its row
  Buffer block;                           // pull: the rows; push/assign: one ack per shard
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
};

// A ticket is (generation << 16 | slot); a call's tag adds the shard below it.
constexpr std::uint64_t make_ticket(std::uint32_t slot, std::uint32_t generation) noexcept {
  return (std::uint64_t{generation} << 16) | slot;
}
constexpr std::uint64_t make_tag(std::uint64_t ticket, std::uint32_t shard) noexcept { return (ticket << 8) | shard; }
static_assert(kMaxShards <= 256, "a call's tag keeps the shard in 8 bits");

}  // namespace ferry::ps
