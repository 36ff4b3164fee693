#include "ps_fleet.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <random>
#include <thread>

#include "bench_worker.h"
#include "cpu_accounting.h"
#include "ferry/ps/shard_link.h"
#include "framed_io.h"
#include "shard_process.h"
#include "tcp_link.h"

namespace ferry::ps::tool {

namespace {

constexpr auto kReadyDeadline = std::chrono::seconds(60);
constexpr std::uint32_t kReportMagic = 0x50525057;  // "WPRP"

struct ReportHead {
  std::uint32_t magic = kReportMagic;
  std::uint32_t ok = 0;
  std::uint64_t cpu_us = 0;
  std::uint64_t maxrss_kb = 0;
  std::uint64_t keys_pulled = 0;
  std::uint64_t pulls = 0;
  std::uint64_t pushes = 0;
  char error[240] = {};
};

// pipe() or fork() failing: out of descriptors, processes or memory.
Error sys_error(const char* what) {
  const int e = errno;
  return Error(e == EACCES || e == EPERM ? Status::PermissionDenied : Status::NoMemory,
               std::string(what) + ": " + std::strerror(e));
}

// Reads one byte at a time until '\n' with a deadline (the ready line).
bool read_line(int fd, std::chrono::steady_clock::time_point deadline, std::string* line) {
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
    char c = 0;
    const ssize_t n = ::read(fd, &c, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    if (c == '\n') return true;
    line->push_back(c);
  }
}

// --rate: when each iteration is meant to start (Poisson arrivals at
// `per_s` per second from the first call; 0: closed loop, no waiting).
// next() waits for the next arrival and says how late the iteration
// starts; an iteration that could not start on time starts at once.
class OpenLoop {
 public:
  OpenLoop(double per_s, std::uint64_t seed) : on_(per_s > 0), gap_(on_ ? per_s : 1.0), rng_(seed) {}

  std::chrono::nanoseconds next() {
    if (!on_) return std::chrono::nanoseconds{0};
    const auto now = bench::SteadyClock::now();
    if (!started_) {
      started_ = true;
      due_ = now;
    }
    due_ += std::chrono::duration_cast<bench::SteadyClock::duration>(std::chrono::duration<double>(gap_(rng_)));
    if (due_ > now) {
      // Sleep most of the wait, then spin the rest: a timer's wake-up
      // lateness would count as latency.
      if (due_ - now > std::chrono::microseconds(200))
        std::this_thread::sleep_until(due_ - std::chrono::microseconds(100));
      while (bench::SteadyClock::now() < due_) {
      }
      return std::chrono::nanoseconds{0};
    }
    return std::chrono::duration_cast<std::chrono::nanoseconds>(now - due_);
  }

 private:
  bool on_;
  bool started_ = false;
  std::exponential_distribution<double> gap_;
  std::mt19937_64 rng_;
  bench::SteadyClock::time_point due_{};
};

// The worker process body: warm up, say ready, wait for go, run, report.
int worker_main(const PsOptions& o, const std::vector<std::string>& addresses, std::uint32_t id, int report_fd,
                int go_fd) {
  ReportHead head;
  auto fail = [&](const std::string& why) {
    const std::string line = "E " + why + "\n";
    bench::write_exact(report_fd, line.data(), line.size());
    return 1;
  };
  if (const Error e = enter_netns(o.worker_netns); e.failed()) return fail(e.message());
  std::unique_ptr<Worker> ps_worker;
  if (const Error e = make_worker(o, addresses, "ferry-ps worker " + std::to_string(id), &ps_worker); e.failed())
    return fail(e.message());
  BenchWorker worker(*ps_worker, o.workload, id);
  if (id == 0) worker.skip_push_at(o.fault_skip_push);
  for (std::uint32_t it = 0; it < o.warmup; ++it)
    if (const Error e = worker.iterate(it, nullptr, nullptr); e.failed()) return fail("warm-up: " + e.message());
  bench::LatencyRecorder pulls(o.iters), pushes(o.iters);
  bench::write_exact(report_fd, "R\n", 2);
  char c;
  while (::read(go_fd, &c, 1) < 0 && errno == EINTR) {
  }
  const std::uint64_t cpu0 = bench::self_cpu_us();
  Error error;
  OpenLoop arrivals(o.rate / 2.0 / o.workers, o.workload.seed ^ (0x5851F42D4C957F2Dull * (id + 1)));
  for (std::uint32_t it = o.warmup; it < o.warmup + o.iters && error.ok(); ++it)
    error = worker.iterate(it, &pulls, &pushes, arrivals.next());
  const bool ok = error.ok();
  head.cpu_us = bench::self_cpu_us() - cpu0;
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  head.maxrss_kb = static_cast<std::uint64_t>(ru.ru_maxrss);
  head.ok = ok ? 1 : 0;
  head.keys_pulled = worker.keys_pulled();
  head.pulls = pulls.count();
  head.pushes = pushes.count();
  std::strncpy(head.error, error.message().c_str(), sizeof(head.error) - 1);
  bench::write_exact(report_fd, &head, sizeof(head));
  bench::write_exact(report_fd, pulls.samples().data(), 8 * pulls.count());
  bench::write_exact(report_fd, pushes.samples().data(), 8 * pushes.count());
  return ok ? 0 : 1;
}

}  // namespace

Error make_worker(const PsOptions& o, const std::vector<std::string>& shard_addresses, const std::string& name,
                  std::unique_ptr<Worker>* out) {
  const Workload& w = o.workload;
  std::unique_ptr<ShardLink> link;
  if (o.transport == TransportKind::Ferry) {
    FerryLinkOptions f;
    f.socket = o.socket;
    f.target = o.target;
    f.shards = w.shards;
    f.name = name;
    f.busy_poll = o.busy_poll;
    // Room for a pull's rows and a push's requests to every shard, twice
    // over (the allocator's power-of-two classes), plus slack.
    constexpr std::uint64_t kMiB = 1ull << 20;
    const std::uint64_t rows = std::uint64_t{w.batch} * w.dim + std::uint64_t{w.dense} * w.shards;
    const std::uint64_t need = 2 * (4 * rows + 12 * rows + 64 * w.shards) * 2 + 4 * kMiB;
    f.tx_bytes = need > 32 * kMiB ? (need & ~(kMiB - 1)) : 0;
    if (Error e = connect_ferry(f, &link); e.failed()) return e;
  } else {
    if (Error e = connect_tcp(shard_addresses, &link); e.failed()) return e;
  }
  WorkerOptions wo;
  wo.tables = workload_tables(w, o.lr);
  return Worker::create(std::move(link), wo, out);
}

Error enter_netns(const std::string& name) {
  if (name.empty()) return {};
  const std::string path = "/var/run/netns/" + name;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0 || ::setns(fd, CLONE_NEWNET) != 0) {
    const int e = errno;
    if (fd >= 0) ::close(fd);
    // setns needs CAP_SYS_ADMIN; a missing namespace is a bad --*-netns.
    const Status status = e == EACCES || e == EPERM ? Status::PermissionDenied : Status::BadRequest;
    return Error(status, "cannot enter network namespace " + path + ": " + std::strerror(e));
  }
  ::close(fd);
  return {};
}

std::uint64_t peak_rss_kb(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string key;
  while (in >> key) {
    if (key == "VmHWM:") {
      std::uint64_t kb = 0;
      in >> kb;
      return kb;
    }
    std::getline(in, key);
  }
  return 0;
}

Fleet::~Fleet() {
  if (go_write_fd_ >= 0) ::close(go_write_fd_);
  for (const int fd : report_fds_) ::close(fd);
  for (const pid_t pid : workers_) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
  }
  (void)stop_shards();  // nobody is left to tell
}

Error Fleet::start_shards() {
  const Workload& w = o_.workload;
  const std::string host = o_.target.empty() || o_.transport == TransportKind::Ferry
                               ? "127.0.0.1"
                               : o_.target.substr(0, o_.target.rfind(':'));
  for (std::uint32_t s = 0; s < w.shards; ++s) {
    auto server = std::make_unique<bench::ForkedServer>();
    const auto body = [&, s](bench::ReadyNotifier& ready) {
      if (const Error e = enter_netns(o_.shard_netns); e.failed()) {
        ready.failed(e.message());
        return 1;
      }
      std::unique_ptr<Shard> shard;
      if (const Error bad = Shard::create(workload_shard(w, o_.lr, s), &shard); bad.failed()) {
        ready.failed(bad.message());
        return 1;
      }
      ShardProcessSpec spec;
      spec.kind = o_.transport;
      spec.socket = o_.server_socket;
      spec.listen = host + ":0";
      spec.pool = o_.shard_pool != 0 ? o_.shard_pool : 2 * o_.workers + 4;
      spec.busy_poll = o_.busy_poll;
      spec.stop_fd = ready.stop_fd();
      spec.ready = [&](const std::string& info) { ready.ready(info); };
      spec.failed = [&](const std::string& why) { ready.failed(why); };
      return serve_shard(*shard, spec);
    };
    if (Error e = server->start(body); e.failed()) return e;
    std::string info;
    if (Error e = server->wait_ready(kReadyDeadline, &info); e.failed())
      return Error(e.status(), "shard " + std::to_string(s) + ": " + e.message());
    addresses_.push_back(info);
    shards_.push_back(std::move(server));
  }
  return {};
}

Error Fleet::start_workers() {
  int go[2];
  if (::pipe2(go, O_CLOEXEC) != 0) return sys_error("pipe");
  go_write_fd_ = go[1];
  for (std::uint32_t id = 0; id < o_.workers; ++id) {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) return sys_error("pipe");
    std::fflush(stdout);
    std::fflush(stderr);
    const pid_t pid = ::fork();
    if (pid < 0) return sys_error("fork");
    if (pid == 0) {
      ::close(fds[0]);
      ::close(go[1]);
      const int rc = worker_main(o_, addresses_, id, fds[1], go[0]);
      std::fflush(stdout);
      std::fflush(stderr);
      ::_exit(rc);
    }
    ::close(fds[1]);
    workers_.push_back(pid);
    report_fds_.push_back(fds[0]);
  }
  ::close(go[0]);
  const auto deadline = std::chrono::steady_clock::now() + kReadyDeadline;
  for (std::uint32_t id = 0; id < o_.workers; ++id) {
    std::string line;
    if (!read_line(report_fds_[id], deadline, &line) || line != "R") {
      // "E why" from a worker that failed; nothing from one that exited or ran out of time.
      const bool said = line.size() > 2;
      const bool late = !said && std::chrono::steady_clock::now() >= deadline;
      return Error(late ? Status::Timeout : Status::PeerUnreachable,
                   "worker " + std::to_string(id) + ": " +
                       (said ? line.substr(2) : std::string("exited or timed out before it was ready")));
    }
  }
  return {};
}

void Fleet::go() {
  ::close(go_write_fd_);
  go_write_fd_ = -1;
}

Error Fleet::collect(std::vector<WorkerReport>* reports) {
  Error error;
  for (std::uint32_t id = 0; id < report_fds_.size(); ++id) {
    ReportHead head;
    WorkerReport r;
    if (!bench::read_exact(report_fds_[id], &head, sizeof(head)) || head.magic != kReportMagic) {
      r.error = "worker exited without a report";
    } else {
      r.ok = head.ok != 0;
      r.error = head.error;
      r.cpu_us = head.cpu_us;
      r.maxrss_kb = head.maxrss_kb;
      r.keys_pulled = head.keys_pulled;
      r.pull_ns.resize(head.pulls);
      r.push_ns.resize(head.pushes);
      if (!bench::read_exact(report_fds_[id], r.pull_ns.data(), 8 * head.pulls) ||
          !bench::read_exact(report_fds_[id], r.push_ns.data(), 8 * head.pushes))
        r.ok = false;
    }
    if (!r.ok && error.ok()) error = Error(Status::PeerUnreachable, "worker " + std::to_string(id) + ": " + r.error);
    reports->push_back(std::move(r));
  }
  for (const pid_t pid : workers_) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    if (error.ok() && !(WIFEXITED(status) && WEXITSTATUS(status) == 0))
      error = Error(Status::PeerUnreachable, "a worker exited abnormally");
  }
  workers_.clear();
  return error;
}

std::uint64_t Fleet::shards_rss_kb() const {
  std::uint64_t total = 0;
  for (const auto& s : shards_) total += peak_rss_kb(s->pid());
  return total;
}

std::vector<pid_t> Fleet::shard_pids() const {
  std::vector<pid_t> pids;
  for (const auto& s : shards_) pids.push_back(s->pid());
  return pids;
}

Error Fleet::stop_shards() {
  Error error;
  // Reverse order: shard k inherited the stop pipes of shards < k (fork),
  // so it must be gone before their stop pipes can read EOF.
  while (!shards_.empty()) {
    const int rc = shards_.back()->stop(std::chrono::seconds(5));
    if (rc != 0 && error.ok())
      error = Error(Status::PeerUnreachable,
                    "shard " + std::to_string(shards_.size() - 1) + " exited with " + std::to_string(rc));
    shards_.pop_back();
  }
  return error;
}

}  // namespace ferry::ps::tool
