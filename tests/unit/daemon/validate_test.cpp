// Every rejection validate_entry can make, and the edges that must pass.
#include <catch2/catch.hpp>

#include "daemon/session/validate.h"

using namespace ferry;
using namespace ferry::daemon;
using shm::Op;

namespace {

constexpr ArenaBounds kB{0x10000, 0x100000, 0x110000, 0x100000, 4096};

shm::SqEntry entry(Op op) {
  shm::SqEntry e{};
  e.op = static_cast<std::uint8_t>(op);
  e.handle = 1;
  e.offset = kB.tx_offset;
  e.length = 16;
  return e;
}

}  // namespace

TEST_CASE("valid entries of every op pass") {
  for (Op op : {Op::Nop, Op::Serve, Op::Unserve, Op::Open, Op::Close, Op::Send, Op::Call, Op::Reply}) {
    CHECK(validate_entry(entry(op), kB) == Reject::None);
  }
  auto rel = entry(Op::ReleaseRx);
  rel.offset = kB.rx_offset;
  rel.flags = shm::kSqFlagQuiet;
  CHECK(validate_entry(rel, kB) == Reject::None);
}

TEST_CASE("header fields") {
  auto e = entry(Op::Nop);
  e.op = shm::kMaxOp + 1;
  CHECK(validate_entry(e, kB) == Reject::UnknownOp);
  e.op = 255;
  CHECK(validate_entry(e, kB) == Reject::UnknownOp);
  e = entry(Op::Nop);
  e.flags = 2;
  CHECK(validate_entry(e, kB) == Reject::UnknownFlags);
  e.flags = shm::kSqFlagQuiet;
  CHECK(validate_entry(e, kB) == Reject::QuietNotAllowed);
  e = entry(Op::Send);
  e.flags = shm::kSqFlagQuiet;
  CHECK(validate_entry(e, kB) == Reject::QuietNotAllowed);
  e = entry(Op::Nop);
  e.reserved0 = 1;
  CHECK(validate_entry(e, kB) == Reject::ReservedNonZero);
  e = entry(Op::Nop);
  e.reserved2 = 1;
  CHECK(validate_entry(e, kB) == Reject::ReservedNonZero);
  e = entry(Op::Nop);
  e.reserved1 = 1;
  CHECK(validate_entry(e, kB) == Reject::ReservedNonZero);
}

TEST_CASE("a timeout only on a Call, and at most an hour") {
  shm::SqEntry e = entry(Op::Send);
  e.timeout_ms = 1;
  CHECK(validate_entry(e, kB) == Reject::ReservedNonZero);
  e = entry(Op::Call);
  e.timeout_ms = shm::kMaxCallTimeoutMs;
  CHECK(validate_entry(e, kB) == Reject::None);
  e.timeout_ms = shm::kMaxCallTimeoutMs + 1;
  CHECK(validate_entry(e, kB) == Reject::TimeoutRange);
}

TEST_CASE("zero handles") {
  for (Op op : {Op::Unserve, Op::Close, Op::Send, Op::Call}) {
    auto e = entry(op);
    e.handle = 0;
    CHECK(validate_entry(e, kB) == Reject::ZeroHandle);
  }
}

TEST_CASE("serve and open lengths and ranges") {
  auto e = entry(Op::Serve);
  e.length = 0;
  CHECK(validate_entry(e, kB) == Reject::NameLength);
  e.length = kMaxServiceNameBytes + 1;
  CHECK(validate_entry(e, kB) == Reject::NameLength);
  e.length = kMaxServiceNameBytes;
  CHECK(validate_entry(e, kB) == Reject::None);
  e.offset = kB.tx_offset + kB.tx_bytes - 10;
  CHECK(validate_entry(e, kB) == Reject::PayloadOutsideTx);

  e = entry(Op::Open);
  e.length = 0;
  CHECK(validate_entry(e, kB) == Reject::TargetLength);
  e.length = kMaxTargetBytes + 1;
  CHECK(validate_entry(e, kB) == Reject::TargetLength);
  e.length = kMaxTargetBytes;
  e.offset = kB.rx_offset;  // rx arena is not a payload source
  CHECK(validate_entry(e, kB) == Reject::PayloadOutsideTx);
}

TEST_CASE("send/call payloads") {
  for (Op op : {Op::Send, Op::Call}) {
    auto e = entry(op);
    e.length = 0;
    CHECK(validate_entry(e, kB) == Reject::PayloadLength);
    e.length = kB.max_message_bytes + 1;
    CHECK(validate_entry(e, kB) == Reject::PayloadLength);
    e.length = kB.max_message_bytes;
    CHECK(validate_entry(e, kB) == Reject::None);
    e.offset = 0;  // segment header
    CHECK(validate_entry(e, kB) == Reject::PayloadOutsideTx);
    e.offset = UINT64_MAX - 10;  // overflow
    CHECK(validate_entry(e, kB) == Reject::PayloadOutsideTx);
    e.offset = kB.tx_offset + kB.tx_bytes - e.length + 1;  // one byte over the end
    CHECK(validate_entry(e, kB) == Reject::PayloadOutsideTx);
    e.offset = kB.tx_offset + kB.tx_bytes - e.length;  // exactly at the end
    CHECK(validate_entry(e, kB) == Reject::None);
  }
}

TEST_CASE("call response buffer") {
  auto e = entry(Op::Call);
  e.resp_offset = kB.rx_offset;
  e.resp_length = 64;
  CHECK(validate_entry(e, kB) == Reject::ResponseOutsideTx);
  e.resp_offset = UINT64_MAX;
  CHECK(validate_entry(e, kB) == Reject::ResponseOutsideTx);
  e.resp_length = 0;  // no response wanted: offset unused
  CHECK(validate_entry(e, kB) == Reject::None);
  e.resp_offset = kB.tx_offset;
  e.resp_length = static_cast<std::uint32_t>(kB.tx_bytes);
  CHECK(validate_entry(e, kB) == Reject::None);
}

TEST_CASE("reply payload") {
  auto e = entry(Op::Reply);
  e.length = 0;
  e.offset = UINT64_MAX;  // ignored when empty
  CHECK(validate_entry(e, kB) == Reject::None);
  e.length = 8;
  CHECK(validate_entry(e, kB) == Reject::PayloadOutsideTx);
  e.offset = kB.tx_offset;
  e.length = kB.max_message_bytes + 1;
  CHECK(validate_entry(e, kB) == Reject::PayloadLength);
}

TEST_CASE("release must name the rx arena") {
  auto e = entry(Op::ReleaseRx);
  e.offset = kB.tx_offset;
  CHECK(validate_entry(e, kB) == Reject::ReleaseOutsideRx);
  e.offset = kB.rx_offset + kB.rx_bytes;
  CHECK(validate_entry(e, kB) == Reject::ReleaseOutsideRx);
  e.offset = kB.rx_offset + kB.rx_bytes - 1;
  CHECK(validate_entry(e, kB) == Reject::None);
}

TEST_CASE("service names") {
  CHECK(valid_service_name("echo"));
  CHECK(valid_service_name("a.b_c-D9"));
  CHECK(valid_service_name(std::string(64, 'x')));
  CHECK_FALSE(valid_service_name(""));
  CHECK_FALSE(valid_service_name(std::string(65, 'x')));
  CHECK_FALSE(valid_service_name("a b"));
  CHECK_FALSE(valid_service_name("a/b"));
  CHECK_FALSE(valid_service_name(std::string_view("a\0b", 3)));
  CHECK(to_string(Reject::PayloadOutsideTx) == "PayloadOutsideTx");
}
