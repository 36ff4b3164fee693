// The processes of one ferry-ps run: M shard processes (ForkedServer from
// ferry-bench, each reporting ready, and its TCP address for tcp) and N
// worker processes, all released at once by closing a shared "go" pipe.
// Each worker reports its latencies and own CPU back over a pipe. A process
// that fails says why in text, so its failure comes back PeerUnreachable
// with its words (Timeout when it did not answer in time).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ferry/error.h"
#include "ferry/ps/worker.h"
#include "forked_server.h"
#include "ps_options.h"

namespace ferry::ps::tool {

struct WorkerReport {
  bool ok = false;
  std::string error;
  std::uint64_t cpu_us = 0;  // measured phase only
  std::uint64_t maxrss_kb = 0;
  std::uint64_t keys_pulled = 0;
  std::vector<std::uint64_t> pull_ns;
  std::vector<std::uint64_t> push_ns;
};

class Fleet {
 public:
  explicit Fleet(const PsOptions& o) : o_(o) {}
  ~Fleet();

  Error start_shards();
  Error start_workers();  // forks, waits until all warmed up and ready
  void go();              // release the workers
  // Every worker's report into *reports; fails naming the first worker
  // that failed.
  Error collect(std::vector<WorkerReport>* reports);
  // Peak RSS of every live shard (VmHWM), in kB.
  std::uint64_t shards_rss_kb() const;
  std::vector<pid_t> shard_pids() const;
  const std::vector<std::string>& shard_addresses() const { return addresses_; }
  Error stop_shards();

 private:
  const PsOptions& o_;
  std::vector<std::unique_ptr<bench::ForkedServer>> shards_;
  std::vector<std::string> addresses_;
  std::vector<pid_t> workers_;
  std::vector<int> report_fds_;
  int go_write_fd_ = -1;
};

// A Worker over the run's transport (ferry: the daemon at --socket and the
// shards at --target; tcp: one connection per shard address) into *out.
// Fails when it cannot reach every shard.
Error make_worker(const PsOptions& o, const std::vector<std::string>& shard_addresses, const std::string& name,
                  std::unique_ptr<Worker>* out);

// Enter network namespace /var/run/netns/NAME (empty: stay). For the netns head-to-head.
Error enter_netns(const std::string& name);
// VmHWM of a live process, kB (0 when unreadable).
std::uint64_t peak_rss_kb(pid_t pid);

}  // namespace ferry::ps::tool
