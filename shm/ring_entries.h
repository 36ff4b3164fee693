// The entries that travel through a client's rings. Both are 64 bytes,
// standard layout, with static_assert'ed offsets: they are ABI.
//
// Submission (client -> daemon): one operation per entry. Offsets name bytes
// in this client's own segment (tx arena for payloads and response buffers,
// rx arena for RELEASE_RX); the daemon bounds-checks every one.
//
// Completion (daemon -> client): one per submitted operation (kind OpDone,
// exactly once, whatever happens), plus unsolicited deliveries (Message,
// Request) that point into the client's rx arena until it releases them,
// or, for a payload of at most kInlineMaxBytes, carry it inline: the entry
// (kCqFlagInline) is followed in the ring by inline_slots(length) slots of
// raw payload bytes, published with it. The client copies them out and
// releases the delivery by counting it in the CQ's RingHeader::released
// (no ReleaseRx): the daemon keeps at most inline_window(cq_entries)
// inline deliveries unreleased, and uses rx blocks beyond that.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <type_traits>

#include "ferry/status.h"

namespace ferry::shm {

enum class Op : std::uint8_t {
  Nop = 0,        // completes at once; liveness probe
  Serve = 1,      // payload = service name; completion.handle = service id
  Unserve = 2,    // handle = service id
  Open = 3,       // payload = "HOST[:PORT]/SERVICE" or "SERVICE"; completion.handle = endpoint id
  Close = 4,      // handle = endpoint id
  Send = 5,       // handle = endpoint id; payload = message
  Call = 6,       // handle = endpoint id; payload = request; resp_* = response buffer
  Reply = 7,      // token = request token; payload = response
  ReleaseRx = 8,  // offset/length = an rx-arena block the daemon delivered
};
inline constexpr std::uint8_t kMaxOp = static_cast<std::uint8_t>(Op::ReleaseRx);

// SqEntry::flags. Any other bit set is a BadRequest.
inline constexpr std::uint8_t kSqFlagQuiet = 1;  // ReleaseRx only: no OpDone on success
inline constexpr std::uint8_t kSqFlagsKnown = kSqFlagQuiet;

constexpr std::string_view to_string(Op op) noexcept {
  switch (op) {
    case Op::Nop: return "Nop";
    case Op::Serve: return "Serve";
    case Op::Unserve: return "Unserve";
    case Op::Open: return "Open";
    case Op::Close: return "Close";
    case Op::Send: return "Send";
    case Op::Call: return "Call";
    case Op::Reply: return "Reply";
    case Op::ReleaseRx: return "ReleaseRx";
  }
  return "Unknown";
}

struct SqEntry {
  std::uint8_t op;            // Op
  std::uint8_t flags;         // reserved, must be 0
  std::uint16_t reserved0;    // must be 0
  std::uint32_t handle;       // endpoint id or service id, per op
  std::uint64_t user_data;    // returned untouched in the OpDone completion
  std::uint64_t offset;       // payload: segment offset (tx arena; rx arena for ReleaseRx)
  std::uint32_t length;       // payload length in bytes
  std::uint32_t resp_length;  // Call: capacity of the response buffer
  std::uint64_t resp_offset;  // Call: segment offset of the response buffer (tx arena)
  std::uint64_t token;        // Reply: the request token from the Request delivery
  // Call: how long it may take from reaching the server's daemon to the
  // server's reply (waiting for room at the server included), in ms (0:
  // ferryd's call-timeout-ms); past it the call completes Timeout and a late
  // reply gets CallerGone. At most kMaxCallTimeoutMs; 0 on other ops.
  std::uint32_t timeout_ms;
  std::uint32_t reserved2;
  std::uint64_t reserved1;
};
inline constexpr std::uint32_t kMaxCallTimeoutMs = 3'600'000;
static_assert(std::is_standard_layout_v<SqEntry> && std::is_trivially_copyable_v<SqEntry>);
static_assert(sizeof(SqEntry) == 64);
static_assert(offsetof(SqEntry, timeout_ms) == 48);
static_assert(offsetof(SqEntry, handle) == 4);
static_assert(offsetof(SqEntry, user_data) == 8);
static_assert(offsetof(SqEntry, offset) == 16);
static_assert(offsetof(SqEntry, length) == 24);
static_assert(offsetof(SqEntry, resp_length) == 28);
static_assert(offsetof(SqEntry, resp_offset) == 32);
static_assert(offsetof(SqEntry, token) == 40);

enum class CqKind : std::uint8_t {
  OpDone = 0,   // completion of a submitted op (user_data echoes it)
  Message = 1,  // one-way message for a served service (rx arena block)
  Request = 2,  // incoming call for a served service; reply with `token`
};

constexpr std::string_view to_string(CqKind k) noexcept {
  switch (k) {
    case CqKind::OpDone: return "OpDone";
    case CqKind::Message: return "Message";
    case CqKind::Request: return "Request";
  }
  return "Unknown";
}

// CqEntry::flags.
inline constexpr std::uint8_t kCqFlagInline = 1;  // Message/Request: the payload follows in the ring
inline constexpr std::uint32_t kInlineMaxBytes = 192;

struct CqEntry {
  std::uint8_t kind;        // CqKind
  std::uint8_t status;      // ferry::Status
  std::uint8_t op;          // OpDone: the Op that completed
  std::uint8_t flags;       // Message/Request: kCqFlagInline or 0; OpDone: 0
  std::uint32_t handle;     // OpDone: new endpoint/service id (Open/Serve); Message/Request: service id
  std::uint64_t user_data;  // OpDone: the submitter's user_data
  std::uint64_t offset;     // Message/Request: rx arena block (segment offset); inline: 0
  std::uint32_t length;     // Message/Request: payload bytes; Call OpDone: response bytes written
  std::uint32_t capacity;   // Message/Request: block size to hand back in ReleaseRx; inline: 0
  std::uint64_t token;      // Request: reply token
  std::uint64_t source;     // Message/Request: opaque sender id (for logs/tests)
  // Message/Request: who sent it, as the daemon knows it. kCallerLocal: a
  // client of this daemon, caller_uid its uid (SO_PEERCRED at attach);
  // kCallerRemote: through a peer daemon (uid unknown here); 0: not known
  // (a daemon that predates the field wrote 0 here).
  std::uint32_t caller_uid;
  std::uint32_t caller_flags;
  std::uint64_t reserved1;
};
inline constexpr std::uint32_t kCallerLocal = 1u << 0;
inline constexpr std::uint32_t kCallerRemote = 1u << 1;
static_assert(std::is_standard_layout_v<CqEntry> && std::is_trivially_copyable_v<CqEntry>);
static_assert(sizeof(CqEntry) == 64);
static_assert(offsetof(CqEntry, handle) == 4);
static_assert(offsetof(CqEntry, user_data) == 8);
static_assert(offsetof(CqEntry, offset) == 16);
static_assert(offsetof(CqEntry, length) == 24);
static_assert(offsetof(CqEntry, capacity) == 28);
static_assert(offsetof(CqEntry, token) == 32);
static_assert(offsetof(CqEntry, source) == 40);
static_assert(offsetof(CqEntry, caller_uid) == 48 && offsetof(CqEntry, caller_flags) == 52);

// The ring slots an inline payload of `length` bytes takes after its entry.
constexpr std::uint32_t inline_slots(std::uint32_t length) noexcept {
  return (length + sizeof(CqEntry) - 1) / sizeof(CqEntry);
}
static_assert(inline_slots(kInlineMaxBytes) == 3 && inline_slots(1) == 1);
// How many inline deliveries a client may hold unreleased (the daemon's
// window, and the size of libferry's private store for their payloads).
constexpr std::uint32_t inline_window(std::uint32_t cq_entries) noexcept { return cq_entries / 4; }

}  // namespace ferry::shm
