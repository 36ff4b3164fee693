// The tag every work request of the engine carries in user_data, so that
// its completion (the transport's SendDone) is routed without guessing:
// two bits of kind, then that kind's slot and generation. 0 is no tag.
//
//   63..62  kind        RemoteOp, Reply, ZeroCopy, Read
//   61..32  generation  RemoteOp, Reply: its table slot's generation (30 bits);
//                       Read: the chunk of a READ split over rails (rendezvous.h)
//   31..0   slot        RemoteOp, Reply: table index + 1; ZeroCopy, Read: slot index
//
// A RemoteOp's tag is its wire token (kind 0); a Reply's is its token in
// the replier's own table with kind 1. The tables keep generations within
// 30 bits (remote_ops.h), so a token never reaches the kind bits. (Before this layout the kinds were single marker bits
// above a token whose generation was not masked: a hot slot reused 2^30 times made a Reply's completion look like an
// RDMA READ's.)
#pragma once

#include <cstdint>

namespace ferry::daemon {

// The field's values are RemoteOp..Read; None is the all-zero tag.
enum class WrKind : std::uint8_t { RemoteOp = 0, Reply = 1, ZeroCopy = 2, Read = 3, None = 4 };

struct WrTag {
  static constexpr unsigned kSlotBits = 32;
  static constexpr unsigned kGenerationBits = 30;
  static constexpr unsigned kKindBits = 2;
  static constexpr unsigned kKindShift = kSlotBits + kGenerationBits;
  static constexpr std::uint64_t kSlotMask = (std::uint64_t{1} << kSlotBits) - 1;
  static constexpr std::uint32_t kGenerationMask = (std::uint32_t{1} << kGenerationBits) - 1;
  static_assert(kSlotBits + kGenerationBits + kKindBits == 64, "the fields fill user_data exactly");
  static_assert(static_cast<unsigned>(WrKind::Read) < (1u << kKindBits), "every kind fits its field");
  static_assert(static_cast<unsigned>(WrKind::None) == (1u << kKindBits), "None is no field value");

  WrKind kind = WrKind::None;
  std::uint32_t generation = 0;  // RemoteOp only
  std::uint32_t slot = 0;

  // A RemoteOp's wire token (generation << 32 | index + 1) as a tag; the
  // token must be one the table made (generation within its 30 bits).
  static constexpr std::uint64_t remote_op(std::uint64_t token) noexcept { return of(WrKind::RemoteOp, token); }
  static constexpr std::uint64_t reply(std::uint64_t token) noexcept { return of(WrKind::Reply, token); }
  static constexpr std::uint64_t zero_copy(std::uint32_t slot) noexcept { return of(WrKind::ZeroCopy, slot); }
  static constexpr std::uint64_t read(std::uint32_t slot, std::uint32_t chunk = 0) noexcept {
    return of(WrKind::Read, std::uint64_t{chunk & kGenerationMask} << kSlotBits | slot);
  }
  static constexpr WrTag decode(std::uint64_t user_data) noexcept {
    WrTag t;
    t.kind = user_data == 0 ? WrKind::None : static_cast<WrKind>(user_data >> kKindShift);
    t.generation = static_cast<std::uint32_t>(user_data >> kSlotBits) & kGenerationMask;
    t.slot = static_cast<std::uint32_t>(user_data & kSlotMask);
    return t;
  }
  // RemoteOp, Reply: the table's token again.
  constexpr std::uint64_t token() const noexcept { return (std::uint64_t{generation} << kSlotBits) | slot; }

 private:
  static constexpr std::uint64_t of(WrKind k, std::uint64_t payload) noexcept {
    return (std::uint64_t{static_cast<std::uint8_t>(k)} << kKindShift) | payload;
  }
};

static_assert(WrTag::decode(WrTag::read(7)).kind == WrKind::Read && WrTag::decode(WrTag::read(7)).slot == 7);
static_assert(WrTag::decode(WrTag::remote_op((std::uint64_t{WrTag::kGenerationMask} << 32) | 5)).kind ==
              WrKind::RemoteOp);
static_assert(WrTag::decode(WrTag::read(7, 3)).kind == WrKind::Read && WrTag::decode(WrTag::read(7, 3)).slot == 7 &&
              WrTag::decode(WrTag::read(7, 3)).generation == 3);
static_assert(WrTag::decode(0).kind == WrKind::None);
static_assert(WrTag::decode(WrTag::reply(1)).kind == WrKind::Reply);

}  // namespace ferry::daemon
