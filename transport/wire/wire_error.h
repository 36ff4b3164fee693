// Why a decoder rejected its input. Finer than ferry::Status so logs and
// tests can tell the reasons apart; to_status() maps each onto the status a
// channel fails with.
#pragma once

#include <cstdint>
#include <string_view>

#include "ferry/status.h"

namespace ferry::wire {

enum class [[nodiscard]] WireError : std::uint8_t{
    None = 0,
    Truncated,        // fewer bytes than the fixed part needs
    BadMagic,         // not a ferry frame at all
    BadVersion,       // a ferry frame of a protocol version we do not speak
    BadType,          // MsgType out of range
    BadFlags,         // unknown flag bits, or a flag the type does not allow
    BadStatus,        // status out of range, or not allowed for the type
    BadLength,        // payload length outside the type's limits
    ReservedNonZero,  // a reserved field or aux value the type does not use
    MissingEndpoint,  // a required endpoint id is 0, or a forbidden one is set
    MissingToken,     // a request/response without its correlation token
    BadField,         // a payload field out of its documented range
};

constexpr std::string_view to_string(WireError e) noexcept {
  switch (e) {
    case WireError::None: return "None";
    case WireError::Truncated: return "Truncated";
    case WireError::BadMagic: return "BadMagic";
    case WireError::BadVersion: return "BadVersion";
    case WireError::BadType: return "BadType";
    case WireError::BadFlags: return "BadFlags";
    case WireError::BadStatus: return "BadStatus";
    case WireError::BadLength: return "BadLength";
    case WireError::ReservedNonZero: return "ReservedNonZero";
    case WireError::MissingEndpoint: return "MissingEndpoint";
    case WireError::MissingToken: return "MissingToken";
    case WireError::BadField: return "BadField";
  }
  return "Unknown";
}

[[nodiscard]] constexpr Status to_status(WireError e) noexcept {
  switch (e) {
    case WireError::None: return Status::Ok;
    case WireError::BadVersion: return Status::VersionMismatch;
    default: return Status::ProtocolError;
  }
}

}  // namespace ferry::wire
