// Status codes shared by the public API, the shared-memory ABI and the wire
// protocol. Values are part of the ABI: append only, never renumber.
// [[nodiscard]]: a call that returns a Status and is not looked at is a
// compile error under -Werror (tests/abi/nodiscard_send.cpp holds that true),
// so a dropped Busy or PeerReset cannot pass silently.
#pragma once

#include <cstdint>
#include <string_view>

namespace ferry {

enum class [[nodiscard]] Status : std::uint8_t{
    Ok = 0,
    BadRequest = 1,         // malformed or out-of-range ring entry / argument
    NoMemory = 2,           // arena or quota exhausted
    ServiceNotFound = 3,    // no service of that name at the target daemon
    ServiceExists = 4,      // serve() of a name another client already serves
    EndpointClosed = 5,     // operation on a closed or unknown endpoint
    ResponseTooLarge = 6,   // response did not fit the caller's buffer
    PeerUnreachable = 7,    // could not reach the remote daemon in time
    PeerReset = 8,          // remote daemon died or restarted mid-operation
    ServiceGone = 9,        // the serving process went away mid-call
    CallerGone = 10,        // reply to a caller that no longer exists
    DaemonGone = 11,        // the local ferryd went away
    Timeout = 12,           // operation deadline passed
    NotSupported = 13,      // transport or daemon lacks the operation
    Busy = 14,              // back-pressure: retry later
    ProtocolError = 15,     // peer violated the protocol
    Cancelled = 16,         // endpoint closed or daemon draining before it ran
    VersionMismatch = 17,   // ABI or protocol version not supported
    PermissionDenied = 18,  // credentials or authentication rejected
    Forked = 19,            // a client used in a child of fork(): only its parent may use it
};

constexpr std::string_view to_string(Status s) noexcept {
  switch (s) {
    case Status::Ok: return "Ok";
    case Status::BadRequest: return "BadRequest";
    case Status::NoMemory: return "NoMemory";
    case Status::ServiceNotFound: return "ServiceNotFound";
    case Status::ServiceExists: return "ServiceExists";
    case Status::EndpointClosed: return "EndpointClosed";
    case Status::ResponseTooLarge: return "ResponseTooLarge";
    case Status::PeerUnreachable: return "PeerUnreachable";
    case Status::PeerReset: return "PeerReset";
    case Status::ServiceGone: return "ServiceGone";
    case Status::CallerGone: return "CallerGone";
    case Status::DaemonGone: return "DaemonGone";
    case Status::Timeout: return "Timeout";
    case Status::NotSupported: return "NotSupported";
    case Status::Busy: return "Busy";
    case Status::ProtocolError: return "ProtocolError";
    case Status::Cancelled: return "Cancelled";
    case Status::VersionMismatch: return "VersionMismatch";
    case Status::PermissionDenied: return "PermissionDenied";
    case Status::Forked: return "Forked";
  }
  return "Unknown";
}

// Highest defined value; decoders reject anything above it.
inline constexpr std::uint8_t kMaxStatus = static_cast<std::uint8_t>(Status::Forked);

}  // namespace ferry
