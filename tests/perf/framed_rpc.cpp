#include "framed_rpc.h"

#include <string>
#include <vector>

#include "framed_io.h"
#include "payload.h"

namespace ferry::bench {

int serve_framed_echo(int fd) {
  std::vector<std::byte> rx;
  std::vector<std::byte> tx;
  for (;;) {
    std::uint32_t len = 0;
    if (!read_frame_header(fd, &len)) return 0;  // client closed
    if (len > tx.size()) {
      // Grows once per new size (during warm-up), never per operation.
      rx.resize(len);
      tx.resize(len);
      fill_pattern(tx.data(), tx.size(), kResponseSeed);
    }
    if (!read_exact(fd, rx.data(), len)) return 1;
    stamp(tx.data(), len, read_stamp(rx.data(), len));
    if (!write_frame(fd, tx.data(), len)) return 1;
  }
}

namespace {

// One call: returns an empty string on success, else what went wrong.
const char* one_call(int fd, std::byte* req, std::byte* resp, const std::byte* expected, std::size_t size,
                     std::uint64_t seq, bool full_check) {
  stamp(req, size, seq);
  if (!write_frame(fd, req, static_cast<std::uint32_t>(size))) return "write failed (server gone?)";
  std::uint32_t len = 0;
  if (!read_frame_header(fd, &len)) return "read failed (server gone?)";
  if (len != size) return "response length differs from request length";
  if (!read_exact(fd, resp, len)) return "short response";
  if (!stamp_matches(resp, size, seq)) return "response stamp mismatch";
  if (full_check && !payload_matches(resp, expected, size, seq)) return "response payload corrupted";
  return nullptr;
}

}  // namespace

Outcome run_framed_rpc(int fd, ScenarioContext& ctx) {
  const std::size_t size = ctx.size();
  std::vector<std::byte> req(size), resp(size), expected(size);
  fill_pattern(req.data(), size, kRequestSeed);
  fill_pattern(expected.data(), size, kResponseSeed);

  std::uint64_t seq = 0;
  for (std::uint64_t i = 0; i < ctx.warmup_ops(); ++i, ++seq) {
    if (const char* err = one_call(fd, req.data(), resp.data(), expected.data(), size, seq, true))
      return ctx.fail(Outcome::Failed, std::string("warm-up: ") + err);
  }

  ctx.begin_measured();
  for (std::uint64_t i = 0; ctx.more(i); ++i, ++seq) {
    const bool full = (i % kVerifyEvery) == 0;
    const auto t0 = SteadyClock::now();
    const char* err = one_call(fd, req.data(), resp.data(), expected.data(), size, seq, false);
    const auto t1 = SteadyClock::now();
    // The full comparison stays outside the timed region: at 1 MiB it
    // costs tens of microseconds and would land in the tail percentiles.
    if (!err && full && !payload_matches(resp.data(), expected.data(), size, seq)) err = "response payload corrupted";
    if (err) {
      ctx.end_measured();
      return ctx.fail(Outcome::Failed, err);
    }
    ctx.record(t1 - t0);
    if (full) ctx.count_verified();
  }
  ctx.end_measured();
  return Outcome::Ok;
}

}  // namespace ferry::bench
