// The parameter-server wire format: what a worker sends a shard and what
// comes back, identical over ferry calls and over framed kernel TCP.
// Versioned and validated by the shard: a malformed request gets an error
// record, never a crash or a partial update.
//
// Requests (native little-endian; every ferry host is x86-64 or arm64):
//   Pull   embedding: Header | u64 keys[count]
//   Pull   dense:     Header                              (elements [offset, offset + count))
//   Push   embedding: Header | u64 keys[count] | f32 grads[count][dim]
//   Push   dense:     Header | f32 grads[count]
//   Assign embedding: Header | u64 keys[count] | f32 values[count][dim]   (overwrite; optimizer state reset)
//   Assign dense:     Header | f32 values[count]
//   Save:             Header | name[length - 32]   (count: rows this step, offset: the first; below)
// Responses carry no header when they succeed, so that a worker can lay the
// responses of every shard side by side in one buffer and use them as one
// tensor where they landed:
//   Pull  Ok:  f32 rows[count][dim] (dense: f32 values[count]); length 4 * count * dim
//   Push / Assign Ok: u32 rows_applied (distinct keys, or elements); length 4
//   Save Ok:   u32 rows_written; fewer than count: the table's part is complete on disk
//   Error: ErrorRecord, 3 bytes. A success length is always a multiple of 4,
//   so a response of 3 bytes is an error and nothing else is.
// A push that names a key twice is coalesced by the shard: the gradients of
// a key are summed and applied once (the optimizer sees one gradient per
// key per request, as a dense autograd backward gives). An assign that
// names a key twice keeps the last value.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "ferry/ps/table.h"
#include "ferry/visibility.h"

namespace ferry::ps {

static_assert(std::endian::native == std::endian::little, "ferry ps messages are little-endian");

inline constexpr std::uint32_t kMagic = 0x32535046;  // "FPS2"
inline constexpr std::uint16_t kVersion = 2;
// Largest key (or element) count one message may carry; bounds every size computation.
inline constexpr std::uint32_t kMaxCount = 1u << 20;

enum class Op : std::uint8_t { Pull = 1, Push = 2, Assign = 3, Save = 4 };
FERRY_API std::string_view to_string(Op op) noexcept;

enum class PsStatus : std::uint8_t {
  Ok = 0,
  BadLength = 1,  // shorter than a header, or the length does not match the counts
  BadMagic = 2,
  BadVersion = 3,
  BadOp = 4,
  BadField = 5,     // a reserved field or flag is not 0, an unknown dtype, or a negative optimizer state
  BadTable = 6,     // no such table on this shard
  BadDim = 7,       // dim differs from the table's
  BadKey = 8,       // key out of the table's range, or owned by another shard
  BadRange = 9,     // dense range outside this shard's slice
  TooLarge = 10,    // the response would not fit the response buffer
  TableFull = 11,   // the push or assign would create rows past the table's max_rows on this shard
  NonFinite = 12,   // a pushed gradient or assigned value is NaN or infinite (ShardSpec::allow_non_finite)
  Forbidden = 13,   // the table's access list does not name this caller for this op
  NotEnabled = 14,  // Save: this shard was started without a checkpoint directory
  Exists = 15,      // Save: this checkpoint name holds this table's part already
  IoFailed = 16,    // Save: writing the files failed (the shard's log says why); nothing was kept
};
inline constexpr std::uint8_t kMaxPsStatus = static_cast<std::uint8_t>(PsStatus::IoFailed);
FERRY_API std::string_view to_string(PsStatus s) noexcept;

struct Header {
  std::uint32_t magic = kMagic;
  std::uint16_t version = kVersion;
  std::uint8_t op = 0;     // Op
  std::uint8_t flags = 0;  // kFlagState or 0
  TableId table = 0;
  std::uint8_t dtype = 0;  // 0: float32 (the only one so far)
  std::uint8_t reserved0 = 0;
  std::uint32_t count = 0;   // keys (embedding) or elements (dense)
  std::uint32_t dim = 0;     // floats per row; 1 for a dense table
  std::uint32_t offset = 0;  // dense: first element; embedding: 0
  std::uint32_t request_id = 0;
  std::uint32_t reserved1 = 0;
};
inline constexpr std::size_t kHeaderBytes = sizeof(Header);
static_assert(kHeaderBytes == 32, "the header keeps the keys 8-byte and the rows 32-byte aligned");
static_assert(offsetof(Header, table) == 8 && offsetof(Header, count) == 12 && offsetof(Header, request_id) == 24);

// Header::flags: a Pull or Assign of a table whose optimizer keeps state
// (Adagrad's accumulators, one per float) reads or writes that state
// instead of the values, in the same layout (checkpoints); a negative state
// is BadField, and so is the flag on a push or on a table without state.
inline constexpr std::uint8_t kFlagState = 1;

inline constexpr std::uint8_t kErrorMark = 0xE7;
struct ErrorRecord {
  std::uint8_t mark = kErrorMark;
  std::uint8_t status = 0;  // PsStatus
  std::uint8_t op = 0;      // the request's op byte, echoed
};
inline constexpr std::size_t kErrorBytes = sizeof(ErrorRecord);
static_assert(kErrorBytes == 3 && kErrorBytes % 4 != 0);
inline constexpr std::size_t kAckBytes = 4;

// Save (shard-side checkpoints, docs/ps.md): the shard writes its part of
// the table into CHECKPOINT_DIR/NAME/ (ShardSpec::checkpoint_dir), rows
// [offset, offset + count) of the rows it holds, in the order they were
// created (dense: the elements of its slice), a step at a time so that no
// step holds the shard, or its caller, for long (ShardServer writes steps
// in the background: Shard::begin_save). A step at offset 0 starts the part
// (again, dropping any unfinished one); each later step must start where
// the last one ended (else BadRange); each step's rows are synced to disk
// before it is answered; the step that writes fewer than `count` rows
// renames the files into place. `dim` is the
// table's; flags 0. NAME: 1 to kMaxSaveName of [A-Za-z0-9._-], not
// starting with '.' (else BadField). Allowed to whoever may pull the table.
inline constexpr std::size_t kMaxSaveName = 128;

// Exact lengths of well-formed messages (64-bit: no overflow for bounded
// fields). A Save request is its header and its name instead.
constexpr std::uint64_t request_bytes(Op op, TableKind kind, std::uint64_t count, std::uint64_t dim) noexcept {
  const std::uint64_t keys = kind == TableKind::Embedding ? 8 * count : 0;
  const std::uint64_t values = op == Op::Pull ? 0 : 4 * count * dim;
  return kHeaderBytes + keys + values;
}
constexpr std::uint64_t response_bytes(Op op, std::uint64_t count, std::uint64_t dim) noexcept {
  return op == Op::Pull ? 4 * count * dim : kAckBytes;
}

// What a response of `length` bytes says, for a request of op `op` that
// expected `expected` bytes back: Ok, the shard's error, or BadLength.
[[nodiscard]] FERRY_API PsStatus classify_response(const std::byte* data, std::size_t length, std::size_t expected,
                                                   Op op) noexcept;

}  // namespace ferry::ps
