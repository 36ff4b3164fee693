// ferry-ps wire format: the request and response messages a worker and a
// shard exchange, identical over both transports (ferry calls and kernel
// TCP frames). Versioned and validated by the shard: a malformed request
// gets a response carrying a PsStatus, never a crash or a partial update.
//
// Layout (native little-endian; every ferry host is x86-64 or arm64):
//   Pull request : MsgHeader | u64 keys[count]
//   Pull response: MsgHeader | f32 rows[count][dim] | f32 dense[dense_count]
//   Push request : MsgHeader | u64 keys[count] | f32 grads[count][dim] | f32 dense_grads[dense_count]
//   Push response: MsgHeader
// Rows start right after the 32-byte header, so a worker's response buffer
// *is* its destination array (offset kHeaderBytes): nothing is copied again.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace ferry::ps {

static_assert(std::endian::native == std::endian::little, "ferry-ps messages are little-endian");

inline constexpr std::uint32_t kMagic = 0x31535046;  // "FPS1"
inline constexpr std::uint16_t kVersion = 1;
// Largest key count one message may carry (bounds every size computation).
inline constexpr std::uint32_t kMaxKeysPerMessage = 1u << 16;
inline constexpr std::uint32_t kMaxDim = 4096;
inline constexpr std::uint32_t kMaxDense = 1u << 20;

enum class PsOp : std::uint8_t { Pull = 1, Push = 2 };
std::string_view to_string(PsOp op) noexcept;

enum class PsStatus : std::uint8_t {
  Ok = 0,
  BadLength = 1,  // shorter than a header, or length does not match the counts
  BadMagic = 2,
  BadVersion = 3,
  BadOp = 4,
  BadField = 5,  // a reserved/status field is not 0 in a request
  BadDim = 6,    // dim differs from the shard's
  BadKey = 7,    // key out of range or owned by another shard
  BadDense = 8,  // dense range outside the shard's slice
  TooLarge = 9,  // the response would not fit the response buffer
};
std::string_view to_string(PsStatus s) noexcept;

struct MsgHeader {
  std::uint32_t magic = kMagic;
  std::uint16_t version = kVersion;
  std::uint8_t op = 0;      // PsOp; a response echoes the request's op
  std::uint8_t status = 0;  // PsStatus in responses; must be 0 in requests
  std::uint32_t count = 0;  // keys
  std::uint32_t dim = 0;    // floats per row
  std::uint32_t dense_offset = 0;
  std::uint32_t dense_count = 0;
  std::uint64_t request_id = 0;  // echoed
};
inline constexpr std::size_t kHeaderBytes = sizeof(MsgHeader);
static_assert(kHeaderBytes == 32);
static_assert(offsetof(MsgHeader, count) == 8 && offsetof(MsgHeader, request_id) == 24);

// Exact sizes of well-formed messages (64-bit: no overflow for bounded fields).
constexpr std::uint64_t pull_request_bytes(std::uint64_t count) { return kHeaderBytes + 8 * count; }
constexpr std::uint64_t pull_response_bytes(std::uint64_t count, std::uint64_t dim, std::uint64_t dense) {
  return kHeaderBytes + 4 * (count * dim + dense);
}
constexpr std::uint64_t push_request_bytes(std::uint64_t count, std::uint64_t dim, std::uint64_t dense) {
  return kHeaderBytes + 8 * count + 4 * (count * dim + dense);
}
constexpr std::uint64_t push_response_bytes() { return kHeaderBytes; }

// Views into a message buffer; the caller has checked the length.
inline std::uint64_t* keys_of(std::byte* msg) { return reinterpret_cast<std::uint64_t*>(msg + kHeaderBytes); }
inline const std::uint64_t* keys_of(const std::byte* msg) {
  return reinterpret_cast<const std::uint64_t*>(msg + kHeaderBytes);
}
inline float* rows_of(std::byte* msg) { return reinterpret_cast<float*>(msg + kHeaderBytes); }
inline const float* rows_of(const std::byte* msg) { return reinterpret_cast<const float*>(msg + kHeaderBytes); }
// Push request: gradients follow the keys.
inline float* grads_of(std::byte* msg, std::uint32_t count) {
  return reinterpret_cast<float*>(msg + kHeaderBytes + 8 * std::size_t{count});
}
inline const float* grads_of(const std::byte* msg, std::uint32_t count) {
  return reinterpret_cast<const float*>(msg + kHeaderBytes + 8 * std::size_t{count});
}

// Which shard owns a key, and its row inside that shard.
constexpr std::uint32_t shard_of(std::uint64_t key, std::uint32_t shards) {
  return static_cast<std::uint32_t>(key % shards);
}
constexpr std::uint64_t row_of(std::uint64_t key, std::uint32_t shards) { return key / shards; }

// Checks a response header: magic, version, op echo, request id echo.
// Returns the response's status, or BadMagic/BadVersion/BadOp/BadLength
// when the response itself is malformed.
PsStatus check_response(const std::byte* msg, std::size_t len, PsOp op, std::uint64_t request_id) noexcept;

}  // namespace ferry::ps
