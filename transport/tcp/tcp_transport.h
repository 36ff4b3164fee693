// The kernel-TCP backend: the fallback where no RDMA device exists and the
// data path every test runs. One non-blocking TCP socket per connection,
// TCP_NODELAY, wire frames (header then payload) sent with one writev per
// batch and received with large reads into a per-connection buffer;
// readiness through one epoll fd (event_fd()). Up to kMaxConnections
// (1,024) connections; their buffers are reserved address space, committed
// only while a connection uses them (tcp_slot_memory.h).
//
// Construction, the slot table and close are in tcp_transport.cpp,
// dialling in tcp_dial.cpp, listening and accepting in tcp_listen.cpp, the
// datapath (post_send/poll) in tcp_transport_datapath.cpp.
#pragma once

#include <sys/epoll.h>
#include <sys/uio.h>

#include <array>
#include <cstdint>
#include <memory>

#include "transport/accept_guard.h"
#include "transport/attention_mask.h"
#include "transport/log_limiter.h"
#include "transport/owner_thread.h"
#include "transport/tcp/tcp_config.h"
#include "transport/tcp/tcp_connection.h"
#include "transport/tcp/tcp_fault.h"
#include "transport/tcp/tcp_slot_memory.h"
#include "transport/transport.h"

namespace ferry::transport::tcp {

// Datapath counters (compiled in with the datapath_stats option).
struct TcpStats {
  std::uint64_t writev_calls = 0;
  std::uint64_t partial_writes = 0;  // writev that wrote less than offered
  std::uint64_t bytes_sent = 0;
  std::uint64_t read_calls = 0;
  std::uint64_t bytes_received = 0;
  std::uint64_t accepts_refused = 0;  // no free connection slot
  std::uint64_t accept_pauses = 0;    // accept() failed for want of descriptors: the listener paused
};

class TcpTransport final : public Transport {
 public:
  // Reserves every buffer the datapath will use. BadRequest for an invalid
  // config; NoMemory if the epoll fd or the buffers' address space cannot
  // be had.
  static Result<std::unique_ptr<TcpTransport>> create(const TcpConfig& config);
  ~TcpTransport() override;

  TransportCaps caps() const noexcept override;
  int event_fd() const noexcept override { return epoll_fd_; }

  [[nodiscard]] Result<std::uint16_t> listen(std::string_view host, std::uint16_t port) override;
  // Blocking for at most connect_timeout_ms.
  [[nodiscard]] Result<ConnId> connect(std::string_view host, std::uint16_t port) override;
  // The socket connects in the background: poll() reports
  // Connected, or Closed with PeerUnreachable when it is refused or
  // connect_timeout_ms passes. Fails at once with BadRequest (not a numeric
  // address), Busy (no free slot), NoMemory (no socket) or PeerUnreachable
  // (refused locally).
  [[nodiscard]] Result<ConnId> connect_async(std::string_view host, std::uint16_t port) override;
  // The numeric address of a connection's peer (getpeername), "" when unknown.
  std::string peer_address(ConnId conn) const override;
  [[nodiscard]] Status close(ConnId conn) override;
  [[nodiscard]] Result<MemoryHandle> register_memory(void* addr, std::size_t len) override;
  [[nodiscard]] Status deregister_memory(MemoryHandle mr) override;

  [[nodiscard]] PostResult post_send(std::span<const SendWr> wrs) noexcept override;
  std::size_t poll(std::span<Completion> out) noexcept override;

  const TcpConfig& config() const noexcept { return config_; }
  const TcpStats& stats() const noexcept { return stats_; }
  // The socket of an open connection (-1 otherwise), for diagnostics and tests.
  int conn_fd(ConnId conn) const noexcept;
  // Accepted connections leave the unauthenticated limits (transport/accept_guard.h).
  void vouch(ConnId conn) noexcept override;
  AcceptCounts accept_counts() const noexcept override;
  std::uint32_t connections_in_use() const noexcept override;
  // Hands the datapath to another thread (see OwnerThread).
  void release_owner() noexcept override { owner_.release(); }

 private:
  explicit TcpTransport(const TcpConfig& config);

  static constexpr std::uint32_t kAcceptFirstWaitMs = 100;
  static constexpr std::uint32_t kAcceptMaxWaitMs = 2000;
  static constexpr std::uint64_t kListenerTag = ~0ull;
  static constexpr std::uint64_t kTimerTag = ~1ull;  // timer_fd_: a silent connection's deadline

  // core and slot table (tcp_transport.cpp)
  [[nodiscard]] Status configure_socket(int fd) noexcept;
  int alloc_slot() noexcept;
  ConnId install(int slot, int fd) noexcept;
  TcpConnection* lookup(ConnId conn) noexcept;
  void begin_drain(std::uint32_t slot, Status why) noexcept;
  void free_slot(std::uint32_t slot) noexcept;
  // Gives back the receive buffers of slots freed since the last poll
  // (their Recv payloads expire now); at the start of poll().
  void release_freed() noexcept;
  void set_want_write(std::uint32_t slot, bool on) noexcept;
  ConnId id_of(std::uint32_t slot) const noexcept;

  // dialling (tcp_dial.cpp)
  // A socket connecting in the background.
  [[nodiscard]] Result<int> connect_start(std::string_view host, std::uint16_t port);
  static int connect_result(int fd) noexcept;  // 0, the errno of a failed connect, or EINPROGRESS
  void connecting_done(std::uint32_t slot, std::span<Completion> out, std::size_t& n) noexcept;
  void expire_connects() noexcept;

  // the listener (tcp_listen.cpp)
  std::size_t accept_ready(std::span<Completion> out) noexcept;
  // Admits (or refuses) one accepted socket; true when it took a slot.
  bool admit(int fd, const sockaddr_storage& from, Completion& c) noexcept;
  // timer_fd_ fired: closes silent accepted connections past their
  // deadline, ends an accept pause that is over; re-arms timer_fd_.
  void expire_silent() noexcept;
  // accept() failed for want of descriptors or memory (EMFILE, ENFILE,
  // ENOBUFS, ENOMEM): the pending connection stays queued and the listener
  // readable, so the listener leaves the epoll set for a while (100 ms,
  // doubling to 2 s while it goes on) instead of waking the owner on every
  // poll; one log line per 10 s with the count.
  void pause_accepts(int err) noexcept;
  void resume_accepts() noexcept;
  void arm_timer() noexcept;

  // test-only fault injection (tcp_fault.cpp): called for each queued frame
  // while FERRY_FAULT_TCP is armed; may mark `p` as already written (drop)
  // or spoil its header (corrupt).
  void inject_fault(TcpConnection& c, PendingWr& p, std::uint32_t slot, wire::MsgType type) noexcept;

  // datapath (tcp_transport_datapath.cpp)
  void flush(std::uint32_t slot) noexcept;
  std::size_t service(std::uint32_t slot, std::span<Completion> out) noexcept;
  std::size_t report_sends(std::uint32_t slot, std::span<Completion> out) noexcept;
  std::size_t receive(std::uint32_t slot, std::span<Completion> out) noexcept;
  // Hands out the whole frames of buf[begin, end) as Recv completions while
  // `out` has room, advancing begin; false when a header is invalid (the
  // connection then drains with the reason).
  bool take_frames(std::uint32_t slot, std::byte* buf, std::size_t& begin, std::size_t end, std::span<Completion> out,
                   std::size_t& n) noexcept;
  bool needs_attention(const TcpConnection& c) const noexcept;

  TcpConfig config_;
  int epoll_fd_ = -1;
  int listen_fd_ = -1;
  // The listen address when it names one interface (not a wildcard): our
  // dials leave from it, so the peer sees the address it knows us by.
  sockaddr_storage source_{};
  socklen_t source_len_ = 0;
  int timer_fd_ = -1;  // in the epoll set: wakes a sleeping owner for a deadline
  bool timer_due_ = false;
  AcceptGuard guard_;
  bool accept_pending_ = false;
  bool accept_paused_ = false;  // the listener is out of the epoll set until accept_resume_ns_
  std::uint64_t accept_resume_ns_ = 0;
  std::uint32_t accept_wait_ms_ = kAcceptFirstWaitMs;  // the next pause
  LogLimiter accept_log_;                              // pause_accepts' line
  AttentionMask<kMaxConnections> attention_;           // bit per slot: work that epoll will not signal
  AttentionMask<kMaxConnections> touched_;             // post_send: slots to flush once the batch is queued
  AttentionMask<kMaxConnections> freed_;               // slots whose receive buffer is given back at the next poll
  std::uint32_t next_slot_ = 0;                        // where the next service sweep starts (fairness)
  std::uint32_t connecting_ = 0;                       // slots in Connecting (their deadlines are looked at in poll)
  SlotMemory memory_;                                  // every slot's send queue and receive buffer
  std::unique_ptr<std::byte[]> landing_;               // kLandingBytes: first reads of one poll (receive())
  std::size_t landing_used_ = 0;                       // reset at the start of each poll
  std::unique_ptr<TcpConnection[]> conns_;             // config_.max_connections of them
  std::array<epoll_event, kEpollBatch> events_{};
  std::array<iovec, kMaxIov> iov_{};
  TcpStats stats_;
  TcpFault fault_;  // kind None unless FERRY_FAULT_TCP is set (tests only)
  OwnerThread owner_;
};

}  // namespace ferry::transport::tcp
