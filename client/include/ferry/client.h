// libferry: the client side of ferry. A process attaches to the local ferryd,
// allocates message buffers inside its shared segment (memory the daemon has
// registered once), serves named services, opens endpoints to services on
// this or another host, and submits one-way sends and calls whose responses
// land in a buffer the caller supplied. Completions are polled in batches or
// waited for on a file descriptor (epoll/asio friendly).
//
// Threading: a Client is owned by one thread at a time; use one Client per
// thread for parallelism. Many processes share the daemon's connections.
//
// fork(): a Client belongs to the process that attached it. In a child of
// fork() the inherited copy refuses everything with Forked (poll and wait
// return 0, alloc an empty Buffer) and never touches the rings or arenas
// it shares with the parent, which goes on unaffected; the child may only
// destroy or detach() it, and attach() a Client of its own.
//
// Lifetimes: a Buffer stays the caller's; after send/call/reply it must stay
// untouched until that operation's OpDone completion. A delivered Message or
// Request points into the rx arena, or (a payload of at most 192 bytes)
// into the client's own memory, and stays valid until release().
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "ferry/result.h"
#include "ferry/status.h"
#include "ferry/visibility.h"

namespace ferry {

using EndpointId = std::uint32_t;
using ServiceId = std::uint32_t;

// A block of the client's tx arena. Empty (data == nullptr) when allocation failed.
struct Buffer {
  std::byte* data = nullptr;
  std::uint32_t capacity = 0;
  std::uint64_t offset = 0;  // segment offset; what travels in ring entries

  explicit operator bool() const noexcept { return data != nullptr; }
  std::span<std::byte> span() const noexcept { return {data, capacity}; }
};

enum class OpKind : std::uint8_t { Nop, Serve, Unserve, Open, Close, Send, Call, Reply, ReleaseRx };
FERRY_API std::string_view to_string(OpKind op) noexcept;

struct Completion {
  enum class Kind : std::uint8_t {
    OpDone,   // a submitted operation finished (status says how)
    Message,  // a one-way message arrived for a service this client serves
    Request,  // a call arrived for a service this client serves: reply(token)
  };
  Kind kind = Kind::OpDone;
  Status status = Status::Ok;
  OpKind op = OpKind::Nop;          // OpDone: which operation
  std::uint64_t user_data = 0;      // OpDone: what the submitter passed
  std::uint32_t handle = 0;         // OpDone: endpoint/service id; Message/Request: service id
  std::uint32_t length = 0;         // Message/Request: payload bytes; Call OpDone: response bytes
  const std::byte* data = nullptr;  // Message/Request: payload (rx arena, or inline: private), valid until release();
                                    // Call OpDone Ok: the caller's response buffer
  std::uint64_t token = 0;          // Request: pass to reply()
  std::uint64_t source = 0;         // Message/Request: opaque sender id
  std::uint64_t rx_offset = 0;      // Message/Request: rx block, for release() (inline: 0)
  std::uint32_t rx_capacity = 0;
  // Message/Request: who sent it, as the daemon knows it: a local client
  // (caller_uid: its uid, from the kernel at attach), one that came through
  // a peer daemon (no uid known here), or Unknown (an older ferryd).
  enum class Caller : std::uint8_t { Unknown, Local, Remote };
  Caller caller = Caller::Unknown;
  std::uint32_t caller_uid = 0;
};
FERRY_API std::string_view to_string(Completion::Kind kind) noexcept;

// What libferry says about a client: a daemon that broke the protocol
// (Error), a completion it had to drop or a release the daemon rejected
// (Warn), the daemon hanging up (Info), attach and detach (Debug). The
// library never writes through a global logger; see AttachOptions::log.
enum class LogLevel : std::uint8_t { Debug = 1, Info = 2, Warn = 3, Error = 4, Off = 5 };
FERRY_API std::string_view to_string(LogLevel level) noexcept;
// Called on the thread that is in the Client's call at the time (poll(),
// wait(), a control operation), never from another thread; it must not
// call back into that Client. What it throws is dropped with the message.
using LogCallback = std::function<void(LogLevel level, std::string_view message)>;

struct AttachOptions {
  std::string socket_path;     // empty: $FERRY_SOCKET, else /run/ferry/ferryd.sock
  std::string name;            // shown by ferryctl clients
  std::uint64_t tx_bytes = 0;  // 0: daemon default
  std::uint64_t rx_bytes = 0;
  std::uint32_t sq_entries = 0;
  std::uint32_t cq_entries = 0;
  // For an application that spins on poll(): an empty poll() then does not
  // ask the daemon to ring the completion doorbell (a syscall on the
  // daemon's side per completion, wasted on a spinner); wait() still does.
  // event_fd() is then readable for a completion only while wait() sleeps,
  // so do not block on event_fd() with this set.
  bool busy_poll = false;
  // The daemon engine to run on (0-based), e.g. one pinned on this
  // process's NUMA node; -1: $FERRY_ENGINE when set, else the daemon puts
  // the client on its least loaded engine. Asking for an engine the daemon
  // does not run fails the attach with BadRequest.
  int engine = -1;
  // Where this client's messages go: log(level, message) for each at or
  // above log_level; empty: one line "ferry: LEVEL: MESSAGE" on stderr.
  LogCallback log;
  // Unset: $FERRY_LOG_LEVEL (debug, info, warn, error or off) when set,
  // else Error: a client that meets no broken daemon writes nothing.
  std::optional<LogLevel> log_level;
};

// What the client refused or deferred (never reset). A well-behaved daemon
// leaves the first and last at 0.
struct ClientStats {
  std::uint64_t dropped_completions = 0;  // CQ entries that failed validation (logged once)
  std::uint64_t deferred_releases = 0;    // release() queued privately because the SQ was full
  std::uint64_t release_failures = 0;     // the daemon rejected a release (e.g. a double release)
  std::uint64_t inline_deliveries = 0;    // deliveries whose payload came inline in the CQ (no rx block)
};

// Default socket path: $FERRY_SOCKET or /run/ferry/ferryd.sock.
FERRY_API std::string default_socket_path();

class FERRY_API Client {
 public:
  // Connects, receives the segment and doorbells, maps and checks the ABI.
  [[nodiscard]] static Result<std::unique_ptr<Client>> attach(const AttachOptions& options = {});
  ~Client();  // detaches; the daemon frees everything the client held
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // tx arena. alloc returns an empty Buffer when the arena or quota is full.
  Buffer alloc(std::size_t bytes) noexcept;
  // A tx block past the largest block alloc() makes (1 MiB): whole arena
  // slabs side by side, where the responses of several calls land next to
  // each other (a large pull's rows). It is never sent as one message.
  // Empty past half the tx arena, when it would leave less than an eighth of
  // the arena (2 MiB at least) free, when no run of free slabs is that long,
  // or when the quota would be passed.
  Buffer alloc_span(std::size_t bytes) noexcept;
  [[nodiscard]] Status free(Buffer buffer) noexcept;
  std::size_t max_message_bytes() const noexcept;

  // Control operations: submit and wait for their own completion (other
  // completions that arrive meanwhile are kept for poll()).
  [[nodiscard]] Result<ServiceId> serve(std::string_view service,
                                        std::chrono::milliseconds timeout = std::chrono::seconds(10));
  [[nodiscard]] Status unserve(ServiceId service, std::chrono::milliseconds timeout = std::chrono::seconds(10));
  // target: "SERVICE" (this host) or "HOST[:PORT]/SERVICE".
  [[nodiscard]] Result<EndpointId> open(std::string_view target,
                                        std::chrono::milliseconds timeout = std::chrono::seconds(10));
  [[nodiscard]] Status close(EndpointId endpoint, std::chrono::milliseconds timeout = std::chrono::seconds(10));

  // Datapath: Ok when submitted (exactly one OpDone follows), Busy when the
  // submission ring is full (poll, then retry), BadRequest for arguments that
  // are invalid on their face.
  [[nodiscard]] Status send(EndpointId endpoint, const Buffer& message, std::uint32_t length,
                            std::uint64_t user_data) noexcept;
  // timeout: how long the call may wait at the server's daemon for its reply
  // (0: ferryd's call-timeout-ms, 60 s unless configured; at most 1 h); past
  // it the call completes Timeout and the server's late reply CallerGone.
  [[nodiscard]] Status call(EndpointId endpoint, const Buffer& request, std::uint32_t length, const Buffer& response,
                            std::uint64_t user_data,
                            std::chrono::milliseconds timeout = std::chrono::milliseconds{0}) noexcept;
  // Its OpDone: Ok; BadRequest (not an open call's token); CallerGone (the
  // caller or its channel went away, or the call timed out);
  // ResponseTooLarge / NotSupported (too large for the caller's buffer, or
  // for one lane message); Busy when a remote caller's lane has no room now:
  // the call stays open, reply again later with the same token (until the
  // call's timeout, when the caller gets Timeout).
  [[nodiscard]] Status reply(std::uint64_t token, const Buffer& response, std::uint32_t length,
                             std::uint64_t user_data) noexcept;
  // Hands a delivered Message/Request block back to the daemon.
  void release(const Completion& delivery) noexcept;

  // Non-blocking: copies up to out.size() completions; returns the count.
  std::size_t poll(std::span<Completion> out) noexcept;
  // Blocks up to timeout for at least one completion.
  std::size_t wait(std::span<Completion> out, std::chrono::milliseconds timeout) noexcept;
  // Readable when completions may be ready or the daemon went away. Call
  // poll() until it returns 0 before waiting on it again.
  int event_fd() const noexcept;
  // AttachOptions::busy_poll, switchable between phases of an application
  // (spinning while traffic flows, sleeping in wait() between bursts).
  void set_busy_poll(bool on) noexcept;

  // Ok while attached; DaemonGone once the daemon hung up (every in-flight
  // operation then completes with DaemonGone, after whatever the daemon had
  // already completed; from then on wait() returns at once and submissions
  // return DaemonGone); Cancelled after detach(); Forked in a child of
  // fork(). It looks at the attach socket itself (at most once a
  // millisecond), so a client that never polls still sees DaemonGone within
  // a few milliseconds of the daemon's death.
  [[nodiscard]] Status state() const noexcept;
  // Hangs up on the daemon now (it frees everything this client held, as
  // when the Client is destroyed) but keeps the segment mapped until the
  // Client is destroyed, so memory something still points into (a Python
  // view, say) stays readable. Afterwards state() is Cancelled,
  // submissions return Cancelled and every operation still in flight
  // completes Cancelled. Idempotent.
  void detach() noexcept;
  ClientStats stats() const noexcept;
  std::uint32_t client_id() const noexcept;
  // The daemon engine this client runs on (AttachOptions::engine).
  std::uint32_t engine() const noexcept;
  std::uint64_t daemon_epoch() const noexcept;

  class Impl;

 private:
  FERRY_LOCAL explicit Client(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace ferry
