// How a parameter-server Worker reaches its shards: memory to encode
// requests in and to receive responses into, one asynchronous call per
// shard request, and a completion stream. connect_ferry() gives the ferry
// link (one libferry Client, one endpoint per shard, buffers in its tx
// arena, responses written there by ferryd). Other transports (the
// kernel-TCP baseline of ferry-ps) implement the same interface.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "ferry/client.h"
#include "ferry/error.h"
#include "ferry/visibility.h"

namespace ferry::ps {

struct LinkDone {
  std::uint64_t tag = 0;
  Status status = Status::Ok;
  std::uint32_t length = 0;  // response bytes, when Ok
};

// Exported (its type information) so a program can implement it.
class FERRY_API ShardLink {
 public:
  // Out of line (ferry_link.cpp): the class's vtable and type information
  // then live in libferry-ps once, not in every program that uses them.
  virtual ~ShardLink();
  virtual std::uint32_t shards() const noexcept = 0;
  virtual std::size_t max_message_bytes() const noexcept = 0;
  // Empty when the memory is exhausted.
  virtual Buffer alloc(std::size_t bytes) noexcept = 0;
  virtual void free(const Buffer& buffer) noexcept = 0;
  // Sends request[0, length) to `shard`; its response lands in `response`
  // (which may be a part of an allocated block). Ok: exactly one LinkDone
  // with `tag` follows. Busy: nothing was sent; collect completions, retry.
  [[nodiscard]] virtual Status call(std::uint32_t shard, const Buffer& request, std::uint32_t length,
                                    const Buffer& response, std::uint64_t tag) noexcept = 0;
  // Up to out.size() finished calls, waiting at most `timeout` for the first.
  [[nodiscard]] virtual std::size_t wait(std::span<LinkDone> out, std::chrono::milliseconds timeout) noexcept = 0;
  // Ok while usable; the reason once not (DaemonGone, ...).
  [[nodiscard]] virtual Status state() const noexcept = 0;
  // Readable when wait() may find completions; -1 when the link has no fd.
  virtual int event_fd() const noexcept = 0;
  // Hangs up now (calls in flight end, later calls fail) but keeps the
  // memory alloc() gave valid until the link is destroyed, for views that
  // still point into it. The ferry link detaches its Client.
  virtual void detach() noexcept {}
  // A block past max_message_bytes() that several responses fill side by
  // side (a large pull's rows, zero copy); empty when there is none (the
  // worker then copies each response into process memory). Freed with free().
  virtual Buffer alloc_span(std::size_t bytes) noexcept {
    (void)bytes;
    return {};
  }
};

struct FerryLinkOptions {
  std::string socket;  // the worker's ferryd; empty: $FERRY_SOCKET or the default
  std::string target;  // HOST:PORT of the shards' ferryd; empty: this host
  std::uint32_t shards = 1;
  std::string service_prefix = "ps-shard-";  // shard i serves PREFIX<i>
  // Where each shard is, when they are not all PREFIX<i> behind `target`
  // ("SERVICE" on this host, or "HOST:PORT/SERVICE"): one per shard.
  std::vector<std::string> shard_targets;
  std::string name = "ferry ps worker";
  // How long a call may wait for its shard (ferryd fails it Timeout past it).
  std::chrono::milliseconds call_timeout{10000};
  // How long to wait for every shard's service to appear.
  std::chrono::milliseconds open_timeout{10000};
  std::uint64_t tx_bytes = 0;  // 0: the daemon's default
  bool busy_poll = false;
};

// Attaches and opens every shard into *out. On failure the Error's
// status is the step's (attach, open) and its message says what failed.
[[nodiscard]] FERRY_API Error connect_ferry(const FerryLinkOptions& options, std::unique_ptr<ShardLink>* out);

// WorkerOptions::relink for a worker whose link connect_ferry(options)
// made: the same link again, each shard's open waiting at most 500 ms (a
// shard not back yet is tried again at a later operation).
FERRY_API std::function<Error(std::unique_ptr<ShardLink>*)> ferry_relink(FerryLinkOptions options);

// PREFIX<i>, and the target a worker opens for it ("SERVICE" or "HOST:PORT/SERVICE").
FERRY_API std::string shard_service(std::string_view prefix, std::uint32_t shard);
FERRY_API std::string shard_target(std::string_view target, std::string_view prefix, std::uint32_t shard);

}  // namespace ferry::ps
