#include "ferry/ps/wire.h"

#include <cstring>

namespace ferry::ps {

std::string_view to_string(Op op) noexcept {
  switch (op) {
    case Op::Pull: return "pull";
    case Op::Push: return "push";
    case Op::Assign: return "assign";
    case Op::Save: return "save";
  }
  return "unknown";
}

std::string_view to_string(PsStatus s) noexcept {
  switch (s) {
    case PsStatus::Ok: return "Ok";
    case PsStatus::BadLength: return "BadLength";
    case PsStatus::BadMagic: return "BadMagic";
    case PsStatus::BadVersion: return "BadVersion";
    case PsStatus::BadOp: return "BadOp";
    case PsStatus::BadField: return "BadField";
    case PsStatus::BadTable: return "BadTable";
    case PsStatus::BadDim: return "BadDim";
    case PsStatus::BadKey: return "BadKey";
    case PsStatus::BadRange: return "BadRange";
    case PsStatus::TooLarge: return "TooLarge";
    case PsStatus::TableFull: return "TableFull";
    case PsStatus::NonFinite: return "NonFinite";
    case PsStatus::Forbidden: return "Forbidden";
    case PsStatus::NotEnabled: return "NotEnabled";
    case PsStatus::Exists: return "Exists";
    case PsStatus::IoFailed: return "IoFailed";
  }
  return "Unknown";
}

PsStatus classify_response(const std::byte* data, std::size_t length, std::size_t expected, Op op) noexcept {
  if (length == kErrorBytes) {
    ErrorRecord e;
    std::memcpy(&e, data, sizeof e);
    if (e.mark != kErrorMark || e.op != static_cast<std::uint8_t>(op) || e.status == 0 || e.status > kMaxPsStatus)
      return PsStatus::BadLength;
    return static_cast<PsStatus>(e.status);
  }
  return length == expected ? PsStatus::Ok : PsStatus::BadLength;
}

}  // namespace ferry::ps
