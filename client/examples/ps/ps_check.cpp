// ferry-ps check: the deterministic mode. Workers run a fixed schedule
// (seeded key streams, gradients that are a pure function of (worker,
// iteration, key, column)); then this process sends malformed requests
// (each must get its error status back, and a rejected push must change
// nothing), pulls every parameter and compares it bit for bit with a
// sequential reference computed here. ps_model.h explains why equality is exact.
#include <cstdio>
#include <cstring>

#include "ps_commands.h"
#include "ps_fleet.h"

namespace ferry::ps {

namespace {

struct Reference {
  std::vector<double> table;  // keys x dim
  std::vector<double> dense;  // shards x dense
};

Reference compute_reference(const PsOptions& o) {
  const Workload& w = o.workload;
  Reference ref;
  ref.table.resize(w.keys * w.dim);
  for (std::uint64_t k = 0; k < w.keys; ++k)
    for (std::uint32_t j = 0; j < w.dim; ++j) ref.table[k * w.dim + j] = initial_value(k, j);
  ref.dense.resize(std::size_t{w.shards} * w.dense);
  for (std::size_t e = 0; e < ref.dense.size(); ++e) ref.dense[e] = initial_dense(e);
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

bool exchange_one(PsTransport& t, std::uint32_t shard, std::uint32_t len, std::uint32_t* resp_len, std::string* error) {
  std::vector<std::uint32_t> req(t.shards(), 0), resp(t.shards(), 0);
  req[shard] = len;
  if (!t.exchange(req, resp, error)) return false;
  *resp_len = resp[shard];
  return true;
}

// Malformed requests to shard 0; each must come back with `want`.
bool probe_bad_requests(PsTransport& t, const PsOptions& o, std::string* error) {
  const Workload& w = o.workload;
  struct Probe {
    const char* name;
    PsStatus want;
  };
  const Probe probes[] = {
      {"bad magic", PsStatus::BadMagic},
      {"bad version", PsStatus::BadVersion},
      {"bad op", PsStatus::BadOp},
      {"bad dim", PsStatus::BadDim},
      {"short keys", PsStatus::BadLength},
      {"truncated header", PsStatus::BadLength},
      {"foreign key push", PsStatus::BadKey},
      {"dense out of range", PsStatus::BadDense},
      {"status set", PsStatus::BadField},
  };
  std::byte* msg = t.request(0).data();
  for (std::size_t p = 0; p < std::size(probes); ++p) {
    MsgHeader h;
    h.op = static_cast<std::uint8_t>(PsOp::Pull);
    h.count = 1;
    h.dim = w.dim;
    h.request_id = 1000 + p;
    std::uint32_t len = static_cast<std::uint32_t>(pull_request_bytes(1));
    const std::uint64_t good_key = 0;  // shard 0 owns key 0
    std::uint64_t keys[2] = {good_key, good_key};
    switch (p) {
      case 0: h.magic = 0xdeadbeef; break;
      case 1: h.version = kVersion + 1; break;
      case 2: h.op = 9; break;
      case 3: h.dim = w.dim + 1; break;
      case 4: h.count = 2; break;  // length says one key
      case 5: len = 10; break;
      case 6:  // a valid key then a key shard 0 does not own (or out of range): nothing may apply
        h.op = static_cast<std::uint8_t>(PsOp::Push);
        h.count = 2;
        h.dense_count = 0;
        keys[1] = w.shards > 1 ? 1 : w.keys;
        len = static_cast<std::uint32_t>(push_request_bytes(2, w.dim, 0));
        break;
      case 7:
        h.dense_offset = w.dense;
        h.dense_count = 1;
        break;
      case 8: h.status = 1; break;
    }
    std::memcpy(msg, &h, sizeof(h));
    std::memcpy(msg + kHeaderBytes, keys, h.count <= 2 ? 8 * std::min<std::uint32_t>(h.count, 2) : 0);
    if (p == 6) {
      float* g = grads_of(msg, 2);
      for (std::uint32_t j = 0; j < 2 * w.dim; ++j) g[j] = 1000.0f;  // would be visible in the final check
    }
    std::uint32_t resp_len = 0;
    if (!exchange_one(t, 0, len, &resp_len, error)) {
      *error = std::string("probe '") + probes[p].name + "': " + *error;
      return false;
    }
    MsgHeader r{};
    if (resp_len >= kHeaderBytes) std::memcpy(&r, t.response(0).data(), sizeof(r));
    if (resp_len != kHeaderBytes || r.magic != kMagic || r.status != static_cast<std::uint8_t>(probes[p].want)) {
      *error = std::string("probe '") + probes[p].name + "': expected " + std::string(to_string(probes[p].want)) +
               ", got status " + std::to_string(r.status) + " in " + std::to_string(resp_len) + " bytes";
      return false;
    }
    std::printf("  probe %-20s -> %s\n", probes[p].name, std::string(to_string(probes[p].want)).c_str());
  }
  return true;
}

// Pulls every key and dense element and compares with the reference.
bool compare_all(PsTransport& t, const PsOptions& o, const Reference& ref, std::uint64_t* checked, std::string* error) {
  const Workload& w = o.workload;
  std::uint64_t mismatches = 0;
  std::uint64_t id = 1u << 30;
  for (std::uint32_t s = 0; s < w.shards; ++s) {
    bool dense_done = w.dense == 0;
    for (std::uint64_t first = s; first < w.keys || !dense_done;) {
      std::uint32_t count = 0;
      std::uint64_t* keys = keys_of(t.request(s).data());
      for (; count < w.batch && first < w.keys; first += w.shards) keys[count++] = first;
      const std::uint32_t dense = dense_done ? 0 : w.dense;
      const std::uint32_t len = encode_pull_header(t.request(s), count, w.dim, 0, dense, ++id);
      std::uint32_t resp_len = 0;
      if (!exchange_one(t, s, len, &resp_len, error)) return false;
      const PsStatus st = check_response(t.response(s).data(), resp_len, PsOp::Pull, id);
      if (st != PsStatus::Ok || resp_len != pull_response_bytes(count, w.dim, dense)) {
        *error = "final pull from shard " + std::to_string(s) + ": " + std::string(to_string(st));
        return false;
      }
      const float* rows = rows_of(t.response(s).data());
      for (std::uint32_t i = 0; i < count; ++i) {
        for (std::uint32_t j = 0; j < w.dim; ++j) {
          const double want = ref.table[keys[i] * w.dim + j];
          const float got = rows[std::size_t{i} * w.dim + j];
          ++*checked;
          if (static_cast<double>(got) != want && ++mismatches <= 5)
            std::fprintf(stderr, "  key %llu col %u: got %.9g want %.9g\n", static_cast<unsigned long long>(keys[i]), j,
                         got, want);
        }
      }
      for (std::uint32_t d = 0; d < dense; ++d) {
        const double want = ref.dense[std::size_t{s} * w.dense + d];
        const float got = rows[std::size_t{count} * w.dim + d];
        ++*checked;
        if (static_cast<double>(got) != want && ++mismatches <= 5)
          std::fprintf(stderr, "  shard %u dense %u: got %.9g want %.9g\n", s, d, got, want);
      }
      dense_done = true;
    }
  }
  if (mismatches) *error = std::to_string(mismatches) + " parameters differ from the reference";
  return mismatches == 0;
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
  std::string error;
  Fleet fleet(o);
  if (!fleet.start_shards(&error) || !fleet.start_workers(&error)) {
    std::fprintf(stderr, "ferry-ps check: %s\n", error.c_str());
    return 1;
  }
  fleet.go();
  std::vector<WorkerReport> reports;
  if (!fleet.collect(&reports, &error)) {
    std::fprintf(stderr, "ferry-ps check: %s\n", error.c_str());
    return 1;
  }
  std::printf("ferry-ps check: %u workers x %u iters done over %s; probing and comparing\n", o.workers, o.iters,
              std::string(to_string(o.transport)).c_str());
  const Reference ref = compute_reference(o);
  std::uint64_t checked = 0;
  bool ok = enter_netns(o.worker_netns, &error);
  if (ok) {
    TransportSpec spec;
    spec.kind = o.transport;
    spec.shards = w.shards;
    spec.request_bytes = worker_request_bytes(w);
    spec.response_bytes = worker_response_bytes(w);
    spec.socket = o.socket;
    spec.target = o.transport == TransportKind::Ferry ? o.target : "";
    spec.name = "ferry-ps checker";
    spec.shard_addresses = fleet.shard_addresses();
    auto t = make_transport(spec, &error);
    ok = t && probe_bad_requests(*t, o, &error) && compare_all(*t, o, ref, &checked, &error);
  }
  std::string stop_error;
  const bool stopped = fleet.stop_shards(&stop_error);
  if (!ok || !stopped) {
    std::fprintf(stderr, "ferry-ps check: FAIL: %s\n", ok ? stop_error.c_str() : error.c_str());
    return 1;
  }
  std::printf("ferry-ps check: OK: %llu parameters equal the sequential reference exactly\n",
              static_cast<unsigned long long>(checked));
  return 0;
}

}  // namespace ferry::ps
