// Work-request tags (daemon/remote/wr_tag.h): a completion is routed by the tag's
// kind, never by guessing from a token's bits.
#include <catch2/catch.hpp>

#include "daemon/remote/remote_ops.h"
#include "daemon/remote/wr_tag.h"

using namespace ferry::daemon;

TEST_CASE("a remote op's tag keeps its kind when its slot's generation passes 2^30", "[wr_tag]") {
  // One hot slot, reused: its generation starts just below 2^30 here, as it
  // would after ~2^30 sequential replies (about 90 minutes at 200k/s).
  RemoteOpTable table(4, (1u << 30) - 3);
  std::uint32_t wraps = 0, last_generation = 0;
  for (int i = 0; i < 6; ++i) {
    RemoteOp op;
    op.kind = RemoteOpKind::Reply;
    op.user_data = 100 + static_cast<std::uint64_t>(i);
    const std::uint64_t token = table.insert(op);
    const std::uint64_t user_data = WrTag::remote_op(token);
    const WrTag tag = WrTag::decode(user_data);
    INFO("insert " << i << " token " << std::hex << token);
    // The old table let the generation reach bit 62 (kReadTag) and 63
    // (kZcTag) of the token, which the engine then read as those tags.
    REQUIRE((token >> WrTag::kKindShift) == 0);
    REQUIRE(tag.kind == WrKind::RemoteOp);  // the old encoding read bit 62 as an RDMA READ here
    REQUIRE(tag.token() == token);
    REQUIRE(tag.slot == 1);
    REQUIRE(tag.generation != 0);
    if (tag.generation < last_generation) ++wraps;
    last_generation = tag.generation;
    RemoteOp* found = table.find(tag.token());
    REQUIRE(found != nullptr);
    REQUIRE(found->user_data == op.user_data);
    table.erase(token);
    REQUIRE(table.find(token) == nullptr);  // used: a late completion finds nothing
  }
  REQUIRE(wraps == 1);  // the generation wrapped to 1 instead of reaching 2^30
}

TEST_CASE("tags of each kind decode to what was encoded", "[wr_tag]") {
  REQUIRE(WrTag::decode(0).kind == WrKind::None);
  for (std::uint32_t slot : {0u, 1u, 65535u, 0xFFFF'FFFFu}) {
    const WrTag z = WrTag::decode(WrTag::zero_copy(slot));
    REQUIRE(z.kind == WrKind::ZeroCopy);
    REQUIRE(z.slot == slot);
    const WrTag r = WrTag::decode(WrTag::read(slot));
    REQUIRE(r.kind == WrKind::Read);
    REQUIRE(r.slot == slot);
  }
  const std::uint64_t token = (std::uint64_t{WrTag::kGenerationMask} << 32) | 0xFFFF'FFFFu;
  const WrTag t = WrTag::decode(WrTag::remote_op(token));
  REQUIRE(t.kind == WrKind::RemoteOp);
  REQUIRE(t.generation == WrTag::kGenerationMask);
  REQUIRE(t.token() == token);
}
