// FERRY_FAULT_TCP parsing (tcp_fault.h). Start-up only.
#include "transport/tcp/tcp_fault.h"

#include "transport/fault_spec.h"
#include "transport/tcp/tcp_transport.h"

#include <cstdlib>

#include <spdlog/spdlog.h>

namespace ferry::transport::tcp {

Result<TcpFault> parse_tcp_fault(std::string_view spec) noexcept {
  TcpFault f;
  std::optional<std::uint64_t> after;
  if ((after = parse_fault_count(spec, "drop-after="))) {
    f.kind = TcpFaultKind::Drop;
  } else if ((after = parse_fault_count(spec, "corrupt-after="))) {
    f.kind = TcpFaultKind::Corrupt;
  } else {
    return Result<TcpFault>::fail(Status::BadRequest);
  }
  f.after = *after;
  return Result<TcpFault>::ok(f);
}

Result<TcpFault> tcp_fault_from_env() {
  if constexpr (!kFaultInjection) return Result<TcpFault>::ok(TcpFault{});  // ferryd logs that it is ignored
  const char* v = std::getenv(kTcpFaultEnv);
  if (v == nullptr || *v == '\0') return Result<TcpFault>::ok(TcpFault{});
  auto f = parse_tcp_fault(v);
  if (!f) {
    spdlog::error("tcp transport: {}='{}' is malformed: expected drop-after=N or corrupt-after=N (N in 1..{})",
                  kTcpFaultEnv, v, kMaxFaultAfter);
    return f;
  }
  spdlog::warn(
      "tcp transport: TEST-ONLY FAULT INJECTION ARMED ({}={}): data frame #{} (Send/Call/Response) "
      "this transport sends will be {}",
      kTcpFaultEnv, v, f.value.after,
      f.value.kind == TcpFaultKind::Drop ? "silently dropped" : "sent with a corrupted header");
  return f;
}

void TcpTransport::inject_fault(TcpConnection& c, PendingWr& p, std::uint32_t slot, wire::MsgType type) noexcept {
  if constexpr (!kFaultInjection) return;
  if (!is_data_frame(type)) return;
  if (fault_.seen < fault_.after) ++fault_.seen;
  if (fault_.seen < fault_.after) return;
  if (fault_.kind == TcpFaultKind::Corrupt) {
    p.header[wire::kOffMagicVersion] ^= std::byte{0xFF};
  } else {
    // Only a frame with no unwritten bytes ahead of it can vanish without
    // breaking the byte stream; otherwise the next data frame is tried.
    if (c.sq_written + 1 != c.sq_tail) return;
    ++c.sq_written;  // as if written: report_sends completes it Ok
    attention_.set(slot);
  }
  fault_.fired = true;
  // Once per process and only under a test switch: the log's cost is fine here.
  spdlog::warn("tcp transport: FAULT INJECTED: {} data frame #{} ({}, connection slot {})", to_string(fault_.kind),
               fault_.seen, wire::to_string(type), slot);
}

}  // namespace ferry::transport::tcp
