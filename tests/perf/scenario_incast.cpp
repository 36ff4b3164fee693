// incast: N sender processes, spread round-robin over the daemons listed in
// --socket (comma-separated), send one-way messages of --size bytes to ONE
// service served by a forked receiver on the daemon at --server-socket
// (--target = that daemon's --listen; without --target everything runs on
// one daemon). --iters messages in all, split over the senders; each keeps
// --concurrency Sends outstanding. With --stall-senders M, M more senders
// send to a second service on the receiver's daemon whose process is
// SIGSTOPped for the measured phase (a consumer that stops reading) and
// resumed after it: the slow-consumer run.
//
// Reported: completion time of each measured message (first submission to
// its Ok OpDone) as p50/p99/p999, goodput (bytes_per_s: every message was
// delivered and checked by the receiver), the daemons' flow-control
// counters (deltas over the measured phase, summed) and what the stalled
// service's senders saw. Fails when a message is lost, corrupted,
// delivered twice, completes twice or with a status the flow-control design
// does not define (sender file), or a process fails.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <set>

#include "daemon_cpu.h"
#include "forked_server.h"
#include "scenario_incast.h"
#include "scenarios.h"

namespace ferry::bench {

namespace {

using Clock = std::chrono::steady_clock;

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= text.size()) {
    const auto comma = text.find(',', start);
    const std::string item = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (!item.empty()) out.push_back(item);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

// The forked senders and the three pipes that pace them: report (children
// write 'r' ready, 'd' done, 'f' failed), go and exit (EOF = proceed).
class SenderGroup {
 public:
  ~SenderGroup() {
    for (const pid_t p : pids_) ::kill(p, SIGKILL);
    for (const pid_t p : pids_) ::waitpid(p, nullptr, 0);
    for (const int fd : {report_[0], go_[1], exit_[1]})
      if (fd >= 0) ::close(fd);
  }

  // Forks the senders. NoMemory when a pipe or a process cannot be had.
  Error start(const IncastPlan& plan, const IncastShared& shared) {
    if (::pipe2(report_, O_CLOEXEC) != 0 || ::pipe2(go_, O_CLOEXEC) != 0 || ::pipe2(exit_, O_CLOEXEC) != 0)
      return Error(Status::NoMemory, "pipe failed");
    std::fflush(nullptr);
    for (std::uint32_t s = 0; s < plan.streams(); ++s) {
      const pid_t pid = ::fork();
      if (pid < 0) return Error(Status::NoMemory, "fork failed");
      if (pid == 0) {
        ::prctl(PR_SET_PDEATHSIG, SIGKILL);
        ::close(report_[0]);
        ::close(go_[1]);
        ::close(exit_[1]);
        const int rc = run_incast_sender(plan, shared, s, report_[1], go_[0], exit_[0]);
        std::fflush(nullptr);
        ::_exit(rc);
      }
      pids_.push_back(pid);
    }
    for (int* fd : {&report_[1], &go_[0], &exit_[0]}) {
      ::close(*fd);
      *fd = -1;
    }
    return {};
  }

  // Reads report bytes until `until()` holds. Fails on an 'f' or an early
  // EOF (PeerUnreachable: the board says why) or at the deadline (Timeout).
  template <typename Until>
  Error await(char expect, Clock::duration within, Until until) {
    const auto deadline = Clock::now() + within;
    while (!until()) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
      if (left <= 0) return Error(Status::Timeout, std::string("senders did not report '") + expect + "' in time");
      pollfd p{report_[0], POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(std::min<long>(left, 1000))) <= 0) continue;
      char c = 0;
      const ssize_t n = ::read(report_[0], &c, 1);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return Error(Status::PeerUnreachable, "a sender exited without reporting");
      if (c == 'f') return Error(Status::PeerUnreachable, "a sender failed");
      if (c == expect) ++count_;
    }
    return {};
  }

  std::uint32_t count() const { return count_; }
  void reset_count() { count_ = 0; }
  void go() { close_fd(&go_[1]); }
  void release() { close_fd(&exit_[1]); }
  const std::vector<pid_t>& pids() const { return pids_; }

  // Reaps every sender (after release()); fails when one exited non-zero
  // (the last such one is named).
  Error reap() {
    Error error;
    for (const pid_t p : pids_) {
      int st = 0;
      ::waitpid(p, &st, 0);
      if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        error = Error(Status::PeerUnreachable, "a sender exited with status " + std::to_string(st));
    }
    pids_.clear();
    return error;
  }

 private:
  static void close_fd(int* fd) {
    if (*fd >= 0) ::close(*fd);
    *fd = -1;
  }

  int report_[2] = {-1, -1};
  int go_[2] = {-1, -1};
  int exit_[2] = {-1, -1};
  std::vector<pid_t> pids_;
  std::uint32_t count_ = 0;
};

// First recorded error of a process board, for the failure message.
std::string board_errors(const IncastShared& shared, const IncastPlan& plan) {
  std::string out;
  for (std::uint32_t s = 0; s < plan.streams(); ++s)
    if (shared.board().senders[s].failed) out += std::string(shared.board().senders[s].error) + "; ";
  for (const auto& r : shared.board().receivers)
    if (r.failed) out += std::string(r.error) + "; ";
  return out;
}

}  // namespace

Outcome run_incast(ScenarioContext& ctx) {
  const BenchOptions& o = ctx.options();
  IncastPlan plan;
  plan.size = ctx.size();
  plan.sender_sockets = split_list(o.socket);
  plan.senders = o.senders;
  plan.stall_senders = o.stall_senders;
  plan.concurrency = o.concurrency;
  plan.busy_poll = o.busy_poll;
  if (plan.size < kIncastMinSize) return ctx.fail(Outcome::BadUsage, "incast needs --size >= 64 (header + checksums)");
  if (o.duration_s > 0) return ctx.fail(Outcome::BadUsage, "incast counts messages: use --iters, not --duration");
  if (plan.sender_sockets.empty()) return ctx.fail(Outcome::BadUsage, "incast needs --socket");
  if (plan.senders == 0 || plan.streams() > kIncastMaxStreams)
    return ctx.fail(Outcome::BadUsage,
                    "incast: --senders + --stall-senders must be 1.." + std::to_string(kIncastMaxStreams));
  if (o.iters < plan.senders) return ctx.fail(Outcome::BadUsage, "incast: --iters must be at least --senders");
  plan.receiver_socket = o.server_socket;
  if (plan.receiver_socket.find(',') != std::string::npos)
    return ctx.fail(Outcome::BadUsage, "incast with several --socket daemons needs --server-socket");
  if (!o.target.empty()) {
    plan.target_prefix = o.target + "/";
  } else {
    for (const auto& s : plan.sender_sockets)
      if (s != plan.receiver_socket)
        return ctx.fail(Outcome::BadUsage,
                        "incast: senders on another daemon need --target (the receiver daemon's --listen)");
  }
  plan.warmup = std::max<std::uint64_t>(1, ctx.warmup_ops() / plan.senders);
  std::uint64_t most = 0;
  for (std::uint32_t s = 0; s < plan.senders; ++s) {
    plan.measured.push_back(o.iters / plan.senders + (s < o.iters % plan.senders ? 1 : 0));
    most = std::max(most, plan.measured.back());
  }
  plan.max_seq = plan.warmup + 4 * most + 64;  // the stalled service's senders stop here at the latest

  IncastShared shared;
  if (const Error e = shared.map(plan); e.failed()) return ctx.fail(Outcome::Failed, e.message());

  ForkedServer receiver, stalled;
  Error error = receiver.start([&](ReadyNotifier& r) { return run_incast_receiver(plan, shared, false, r); });
  if (error.ok()) error = receiver.wait_ready(std::chrono::seconds(15), nullptr);
  if (error.failed()) return ctx.fail(Outcome::Failed, "incast receiver: " + error.message());
  if (plan.stall_senders > 0) {
    error = stalled.start([&](ReadyNotifier& r) { return run_incast_receiver(plan, shared, true, r); });
    if (error.ok()) error = stalled.wait_ready(std::chrono::seconds(15), nullptr);
    if (error.failed()) return ctx.fail(Outcome::Failed, "incast stalled receiver: " + error.message());
  }
  // A failure while the stalled receiver is stopped must not leave it so.
  struct Resume {
    pid_t pid;
    ~Resume() {
      if (pid > 0) ::kill(pid, SIGCONT);
    }
  } resume{plan.stall_senders > 0 ? stalled.pid() : -1};

  SenderGroup group;
  auto failed = [&](const std::string& what) {
    return ctx.fail(Outcome::Failed, what + ": " + board_errors(shared, plan));
  };
  if (const Error e = group.start(plan, shared); e.failed()) return failed(e.message());
  if (const Error e = group.await('r', std::chrono::seconds(60), [&] { return group.count() == plan.streams(); });
      e.failed())
    return failed("warm-up: " + e.message());

  std::vector<std::string> controls;
  for (const auto& s : plan.sender_sockets) controls.push_back(control_path_for(s));
  controls.push_back(control_path_for(plan.receiver_socket));
  std::sort(controls.begin(), controls.end());
  controls.erase(std::unique(controls.begin(), controls.end()), controls.end());
  for (const auto& c : controls) ctx.cpu().add_daemon(c);
  for (const pid_t p : group.pids()) ctx.cpu().add_process(p);
  ctx.cpu().add_process(receiver.pid());
  const FlowCounters before = read_flow_counters(controls);

  if (plan.stall_senders > 0) {
    int st = 0;
    ::kill(stalled.pid(), SIGSTOP);
    ::waitpid(stalled.pid(), &st, WUNTRACED);  // stopped before anything is measured
  }
  ctx.begin_measured();
  group.go();
  group.reset_count();
  auto main_done = [&] {
    for (std::uint32_t s = 0; s < plan.senders; ++s)
      if (!shared.board().senders[s].done.load(std::memory_order_acquire)) return false;
    return true;
  };
  if (const Error e = group.await('d', std::chrono::seconds(300), main_done); e.failed())
    return failed("measured phase: " + e.message());
  ctx.end_measured();
  shared.board().main_done.store(1, std::memory_order_release);
  if (plan.stall_senders > 0) ::kill(stalled.pid(), SIGCONT);
  if (const Error e = group.await('d', std::chrono::seconds(120), [&] { return group.count() == plan.streams(); });
      e.failed())
    return failed("stalled-service senders: " + e.message());
  const FlowCounters delta = read_flow_counters(controls) - before;

  group.release();
  if (const Error e = group.reap(); e.failed()) return failed(e.message());
  std::uint64_t ok[2] = {0, 0};
  for (std::uint32_t s = 0; s < plan.streams(); ++s) ok[plan.stalled_stream(s) ? 1 : 0] += shared.board().senders[s].ok;
  shared.board().expected[0].store(ok[0], std::memory_order_release);
  shared.board().expected[1].store(ok[1], std::memory_order_release);
  shared.board().stop_receivers.store(1, std::memory_order_release);
  if (const int rc = receiver.stop(std::chrono::seconds(20)); rc != 0)
    return failed("receiver exited with " + std::to_string(rc));
  if (plan.stall_senders > 0)
    if (const int rc = stalled.stop(std::chrono::seconds(20)); rc != 0)
      return failed("stalled receiver exited with " + std::to_string(rc));

  if (const Error bad = check_incast_results(plan, shared); bad.failed())
    return ctx.fail(Outcome::Failed, bad.message());
  for (std::uint32_t s = 0; s < plan.senders; ++s) {
    const std::uint64_t* samples = shared.samples(s);
    for (std::uint64_t j = 0; j < plan.measured[s]; ++j) {
      ctx.record(std::chrono::nanoseconds(samples[j]));
      ctx.count_verified();  // the receiver checked every message in full
    }
  }
  ctx.add_json(incast_json_fields(plan, shared, delta));
  return Outcome::Ok;
}

}  // namespace ferry::bench
