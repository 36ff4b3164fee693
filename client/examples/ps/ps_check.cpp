// ferry-ps check: the deterministic mode. Workers run a fixed schedule
// (seeded key streams, gradients that are a pure function of (worker,
// iteration, key, column)); then this process sends malformed requests
// (each must get its error status back, and a rejected push must change
// nothing), pulls every parameter and compares it bit for bit with a
// sequential reference computed here. ps_model.h explains why equality is exact.
#include <cstdio>
#include <cstring>

#include "bench_worker.h"
#include "ps_commands.h"
#include "ps_fleet.h"

namespace ferry::ps::tool {

namespace {

constexpr std::chrono::milliseconds kDeadline{10000};

struct Reference {
  std::vector<double> table;  // keys x dim
  std::vector<double> dense;  // shards x dense
};

Reference compute_reference(const PsOptions& o) {
  const Workload& w = o.workload;
  const auto tables = workload_tables(w, o.lr);
  Reference ref;
  ref.table.resize(w.keys * w.dim);
  for (std::uint64_t k = 0; k < w.keys; ++k)
    for (std::uint32_t j = 0; j < w.dim; ++j) ref.table[k * w.dim + j] = initial_value(tables[kRowsTable], k, j);
  ref.dense.resize(std::size_t{w.shards} * w.dense);
  for (std::size_t e = 0; e < ref.dense.size(); ++e) ref.dense[e] = initial_value(tables[kDenseTable], e, 0);
  const ZipfSampler zipf(w.keys, w.skew);
  for (std::uint32_t id = 0; id < o.workers; ++id) {
    auto rng = worker_rng(w.seed, id);
    for (std::uint32_t it = 0; it < o.warmup + o.iters; ++it) {
      for (std::uint32_t i = 0; i < w.batch; ++i) {
        const std::uint64_t key = zipf(rng);
        for (std::uint32_t j = 0; j < w.dim; ++j) ref.table[key * w.dim + j] -= o.lr * gradient(id, it, key, j);
      }
      for (std::size_t e = 0; e < ref.dense.size(); ++e) ref.dense[e] -= o.lr * dense_gradient(id, it, e);
    }
  }
  return ref;
}

// One raw request to shard 0 through the worker's link; *got gets the
// error it got back (Ok for none) and *length the response's size.
Error raw_call(ShardLink& link, const std::vector<std::byte>& msg, std::size_t resp_cap, PsStatus* got,
               std::uint32_t* length) {
  Buffer req = link.alloc(std::max<std::size_t>(msg.size(), 1));
  Buffer resp = link.alloc(resp_cap);
  if (!req || !resp) return Error(Status::NoMemory, "no memory for a probe");
  std::memcpy(req.data, msg.data(), msg.size());
  Error error;
  LinkDone d;
  if (const Status called = link.call(0, req, static_cast<std::uint32_t>(msg.size()), resp, 1); called != Status::Ok) {
    error = Error(called, "probe call rejected");
  } else {
    const auto deadline = std::chrono::steady_clock::now() + kDeadline;
    std::size_t n = 0;
    while (n == 0 && std::chrono::steady_clock::now() < deadline)
      n = link.wait({&d, 1}, std::chrono::milliseconds(100));
    if (n != 1) {
      error = Error(Status::Timeout, "probe timed out");
    } else if (d.status != Status::Ok) {
      error = Error(d.status, "probe call failed: " + std::string(to_string(d.status)));
    }
  }
  if (error.ok()) {
    *length = d.length;
    *got = PsStatus::Ok;
    if (d.length == kErrorBytes) {
      ErrorRecord e;
      std::memcpy(&e, resp.data, kErrorBytes);
      *got = e.mark == kErrorMark ? static_cast<PsStatus>(e.status) : PsStatus::BadMagic;
    }
  }
  link.free(req);
  link.free(resp);
  return error;
}

// Malformed requests to shard 0; each must come back with `want`
// (ProtocolError when one does not).
Error probe_bad_requests(Worker& worker, const PsOptions& o) {
  const Workload& w = o.workload;
  Key mine = 0, foreign = w.keys;  // foreign: out of range when there is one shard
  while (shard_of(kRowsTable, mine, w.shards) != 0) ++mine;
  for (Key k = 0; w.shards > 1 && k < w.keys; ++k) {
    if (shard_of(kRowsTable, k, w.shards) != 0) {
      foreign = k;
      break;
    }
  }
  struct Probe {
    const char* name;
    PsStatus want;
  };
  std::vector<Probe> probes = {
      {"bad magic", PsStatus::BadMagic},
      {"bad version", PsStatus::BadVersion},
      {"bad op", PsStatus::BadOp},
      {"bad dim", PsStatus::BadDim},
      {"short keys", PsStatus::BadLength},
      {"truncated header", PsStatus::BadLength},
      {"foreign key push", PsStatus::BadKey},
      {"unknown table", PsStatus::BadTable},
      {"flags set", PsStatus::BadField},
      {"dense out of range", PsStatus::BadRange},
  };
  if (w.dense == 0) probes.pop_back();
  for (std::size_t p = 0; p < probes.size(); ++p) {
    Header h;
    h.op = static_cast<std::uint8_t>(Op::Pull);
    h.table = kRowsTable;
    h.count = 1;
    h.dim = w.dim;
    h.request_id = static_cast<std::uint32_t>(1000 + p);
    std::vector<Key> keys = {mine};
    std::size_t len = request_bytes(Op::Pull, TableKind::Embedding, 1, w.dim);
    switch (p) {
      case 0: h.magic = 0xdeadbeef; break;
      case 1: h.version = kVersion + 1; break;
      case 2: h.op = 9; break;
      case 3: h.dim = w.dim + 1; break;
      case 4: h.count = 2; break;  // the length says one key
      case 5: len = 10; break;
      case 6:  // a valid key, then one shard 0 does not own: nothing may apply
        h.op = static_cast<std::uint8_t>(Op::Push);
        h.count = 2;
        keys = {mine, foreign};
        len = request_bytes(Op::Push, TableKind::Embedding, 2, w.dim);
        break;
      case 7: h.table = 7; break;
      case 8: h.flags = 1; break;
      case 9:
        h.table = kDenseTable;
        h.dim = 1;
        h.offset = w.dense;  // shard 0 holds [0, dense)
        len = request_bytes(Op::Pull, TableKind::Dense, 1, 1);
        break;
    }
    std::vector<std::byte> msg(std::max<std::size_t>(len, kHeaderBytes + 8 * keys.size()));
    std::memcpy(msg.data(), &h, sizeof h);
    if (p != 9) std::memcpy(msg.data() + kHeaderBytes, keys.data(), 8 * keys.size());
    if (p == 6) {
      auto* g = reinterpret_cast<float*>(msg.data() + kHeaderBytes + 16);
      for (std::uint32_t j = 0; j < 2 * w.dim; ++j) g[j] = 1000.0f;  // would be visible in the final check
    }
    msg.resize(len);
    PsStatus got = PsStatus::Ok;
    std::uint32_t resp_len = 0;
    if (const Error e = raw_call(worker.link(), msg, 4 * w.dim + 64, &got, &resp_len); e.failed())
      return Error(e.status(), std::string("probe '") + probes[p].name + "': " + e.message());
    if (resp_len != kErrorBytes || got != probes[p].want) {
      return Error(Status::ProtocolError,
                   std::string("probe '") + probes[p].name + "': expected " + std::string(to_string(probes[p].want)) +
                       ", got " + std::string(to_string(got)) + " in " + std::to_string(resp_len) + " bytes");
    }
    std::printf("  probe %-20s -> %s\n", probes[p].name, std::string(to_string(probes[p].want)).c_str());
  }
  return {};
}

// The Error of a final pull that did not come back Ok: its status (Timeout
// when still in flight at the deadline, the start's status when it never
// started) and what failed.
Error pull_error(const Worker& worker, const Result<Ticket>& t, Status waited, const char* what) {
  if (!t) return Error(t.status, std::string(what) + " not started");
  return Error(waited == Status::Busy ? Status::Timeout : waited, describe_failure(worker, t.value, what));
}

// Pulls every key and dense element and compares with the reference
// (ProtocolError when a parameter differs).
Error compare_all(Worker& worker, const PsOptions& o, const Reference& ref, std::uint64_t* checked) {
  const Workload& w = o.workload;
  std::uint64_t mismatches = 0;
  auto note = [&](double got, double want, const std::string& what) {
    ++*checked;
    if (got != want && ++mismatches <= 5) std::fprintf(stderr, "  %s: got %.9g want %.9g\n", what.c_str(), got, want);
  };
  std::vector<Key> keys;
  for (Key first = 0; first < w.keys; first += w.batch) {
    keys.clear();
    for (Key k = first; k < std::min<Key>(w.keys, first + w.batch); ++k) keys.push_back(k);
    const auto t = worker.pull(kRowsTable, keys);
    const Status waited = t ? worker.wait(t.value, kDeadline) : t.status;
    if (waited != Status::Ok) return pull_error(worker, t, waited, "final pull");
    const PulledRows r = worker.rows(t.value);
    for (std::size_t row = 0; row < r.keys.size(); ++row)
      for (std::uint32_t j = 0; j < w.dim; ++j)
        note(r.rows[row * w.dim + j], ref.table[r.keys[row] * w.dim + j],
             "key " + std::to_string(r.keys[row]) + " col " + std::to_string(j));
    worker.release(t.value);
  }
  if (w.dense > 0) {
    const auto t = worker.pull_dense(kDenseTable);
    const Status waited = t ? worker.wait(t.value, kDeadline) : t.status;
    if (waited != Status::Ok) return pull_error(worker, t, waited, "final dense pull");
    const PulledRows r = worker.rows(t.value);
    for (std::size_t e = 0; e < r.rows.size(); ++e) note(r.rows[e], ref.dense[e], "dense " + std::to_string(e));
    worker.release(t.value);
  }
  if (mismatches)
    return Error(Status::ProtocolError, std::to_string(mismatches) + " parameters differ from the reference");
  return {};
}

}  // namespace

int run_check(const PsOptions& o) {
  const Workload& w = o.workload;
  if (!lr_is_power_of_two(o.lr)) {
    std::fprintf(stderr, "ferry-ps check: --lr must be a power of two (2^-k) for an exact check\n");
    return 2;
  }
  if (!exact_bound_ok(o.lr, std::uint64_t{o.workers} * o.iters * w.batch)) {
    std::fprintf(stderr, "ferry-ps check: workers x iters x batch too large for exact float sums at this --lr\n");
    return 2;
  }
  Fleet fleet(o);
  Error error = fleet.start_shards();
  if (error.ok()) error = fleet.start_workers();
  if (error.failed()) {
    std::fprintf(stderr, "ferry-ps check: %s\n", error.message().c_str());
    return 1;
  }
  fleet.go();
  std::vector<WorkerReport> reports;
  if (const Error e = fleet.collect(&reports); e.failed()) {
    std::fprintf(stderr, "ferry-ps check: %s\n", e.message().c_str());
    return 1;
  }
  std::printf("ferry-ps check: %u workers x %u iters done over %s; probing and comparing\n", o.workers, o.iters,
              std::string(to_string(o.transport)).c_str());
  const Reference ref = compute_reference(o);
  std::uint64_t checked = 0;
  error = enter_netns(o.worker_netns);
  if (error.ok()) {
    std::unique_ptr<Worker> worker;  // gone before the shards are stopped
    error = make_worker(o, fleet.shard_addresses(), "ferry-ps checker", &worker);
    if (error.ok()) error = probe_bad_requests(*worker, o);
    if (error.ok()) error = compare_all(*worker, o, ref, &checked);
  }
  const Error stopped = fleet.stop_shards();
  if (error.failed() || stopped.failed()) {
    std::fprintf(stderr, "ferry-ps check: FAIL: %s\n",
                 error.failed() ? error.message().c_str() : stopped.message().c_str());
    return 1;
  }
  std::printf("ferry-ps check: OK: %llu parameters equal the sequential reference exactly\n",
              static_cast<unsigned long long>(checked));
  return 0;
}

}  // namespace ferry::ps::tool
