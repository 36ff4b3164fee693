#include "ps_protocol.h"

#include <cstring>

namespace ferry::ps {

std::string_view to_string(PsOp op) noexcept {
  switch (op) {
    case PsOp::Pull: return "Pull";
    case PsOp::Push: return "Push";
  }
  return "Unknown";
}

std::string_view to_string(PsStatus s) noexcept {
  switch (s) {
    case PsStatus::Ok: return "Ok";
    case PsStatus::BadLength: return "BadLength";
    case PsStatus::BadMagic: return "BadMagic";
    case PsStatus::BadVersion: return "BadVersion";
    case PsStatus::BadOp: return "BadOp";
    case PsStatus::BadField: return "BadField";
    case PsStatus::BadDim: return "BadDim";
    case PsStatus::BadKey: return "BadKey";
    case PsStatus::BadDense: return "BadDense";
    case PsStatus::TooLarge: return "TooLarge";
  }
  return "Unknown";
}

PsStatus check_response(const std::byte* msg, std::size_t len, PsOp op, std::uint64_t request_id) noexcept {
  if (len < kHeaderBytes) return PsStatus::BadLength;
  MsgHeader h;
  std::memcpy(&h, msg, sizeof(h));
  if (h.magic != kMagic) return PsStatus::BadMagic;
  if (h.version != kVersion) return PsStatus::BadVersion;
  if (h.op != static_cast<std::uint8_t>(op) || h.request_id != request_id) return PsStatus::BadOp;
  return static_cast<PsStatus>(h.status);
}

}  // namespace ferry::ps
