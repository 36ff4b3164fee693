// The engine's link with the control thread: two SPSC queues, commands in
// (attach, detach, stop; an eventfd wakes the engine) and events out
// (clients the engine threw out; an eventfd the control thread watches).
// The engine never blocks on either: a full event queue spills into a
// private list sent on later turns.
#pragma once

#include <boost/lockfree/spsc_queue.hpp>
#include <cstdint>
#include <optional>
#include <vector>

namespace ferry::daemon {

class ClientSession;

struct EngineCommand {
  enum class Kind : std::uint8_t { Attach, Detach, Stop };
  Kind kind = Kind::Stop;
  ClientSession* session = nullptr;  // Attach: ownership passes to the engine
  std::uint32_t client_id = 0;       // Detach
};

inline constexpr std::size_t kCommandQueueDepth = 16384;
inline constexpr std::size_t kEventQueueDepth = 4096;

class ControlLink {
 public:
  ControlLink();  // throws at start-up when the eventfds cannot be made
  ~ControlLink();
  ControlLink(const ControlLink&) = delete;
  ControlLink& operator=(const ControlLink&) = delete;

  // Control thread. false when the queue is full (the caller retries).
  [[nodiscard]] bool submit(const EngineCommand& cmd) noexcept;
  // Control thread: the next client the engine detached on its own.
  [[nodiscard]] std::optional<std::uint32_t> pop_event() noexcept;
  int event_fd() const noexcept { return event_fd_; }
  // Any thread: wakes the engine (its sleep watches wake_fd()).
  void wake() const noexcept;
  int wake_fd() const noexcept { return wake_fd_; }

  // Engine thread.
  [[nodiscard]] bool next_command(EngineCommand& out) noexcept { return commands_.pop(out); }
  bool commands_waiting() const noexcept { return commands_.read_available() != 0; }
  void client_thrown_out(std::uint32_t id) { unsent_.push_back(id); }
  void flush_events() noexcept;
  bool events_waiting() const noexcept { return !unsent_.empty(); }
  void drain_wake() const noexcept;  // after a sleep the wake fd woke

 private:
  boost::lockfree::spsc_queue<EngineCommand, boost::lockfree::capacity<kCommandQueueDepth>> commands_;
  boost::lockfree::spsc_queue<std::uint32_t, boost::lockfree::capacity<kEventQueueDepth>> events_;
  std::vector<std::uint32_t> unsent_;  // engine-private spill when events_ is full
  int wake_fd_ = -1;                   // control -> engine
  int event_fd_ = -1;                  // engine -> control
};

}  // namespace ferry::daemon
