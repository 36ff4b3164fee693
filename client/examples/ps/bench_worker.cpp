#include "bench_worker.h"

namespace ferry::ps::tool {

namespace {

constexpr std::chrono::milliseconds kOpDeadline{15000};

}  // namespace

std::string describe_failure(const Worker& w, Ticket t, const char* what) {
  const OpError e = w.error(t);
  std::string s = std::string(what) + " failed: " + std::string(to_string(e.status));
  if (e.status == Status::Busy)
    return std::string(what) + " still in flight after " + std::to_string(kOpDeadline.count()) + " ms";
  s += " (shard " + std::to_string(e.shard);
  if (e.ps != PsStatus::Ok) s += " refused it: " + std::string(to_string(e.ps));
  return s + ")";
}

BenchWorker::BenchWorker(Worker& worker, const Workload& workload, std::uint32_t worker_id)
    : w_(worker),
      load_(workload),
      id_(worker_id),
      zipf_(workload.keys, workload.skew),
      rng_(worker_rng(workload.seed, worker_id)),
      keys_(workload.batch),
      grads_(std::size_t{workload.batch} * workload.dim),
      dense_grads_(std::size_t{workload.dense} * workload.shards) {}

Error BenchWorker::finish(Ticket t, const char* what) {
  const Status st = w_.wait(t, kOpDeadline);
  if (st == Status::Ok) return {};
  // wait() says Busy for an operation still in flight at the deadline.
  Error e(st == Status::Busy ? Status::Timeout : st, describe_failure(w_, t, what));
  w_.release(t);
  return e;
}

Error BenchWorker::iterate(std::uint32_t it, bench::LatencyRecorder* pulls, bench::LatencyRecorder* pushes,
                           std::chrono::nanoseconds late) {
  for (auto& k : keys_) k = zipf_(rng_);
  const bool dense = load_.dense > 0;

  auto t0 = bench::SteadyClock::now();
  const auto rows = w_.pull(kRowsTable, keys_);
  const auto dense_rows = dense ? w_.pull_dense(kDenseTable) : Result<Ticket>::ok(0);
  if (!rows || !dense_rows) {
    const Status st = rows ? dense_rows.status : rows.status;
    if (rows) w_.release(rows.value);
    return Error(st, "pull not started: " + std::string(to_string(st)));
  }
  Error pulled = finish(rows.value, "pull");
  if (pulled.ok() && dense) pulled = finish(dense_rows.value, "dense pull");
  auto t1 = bench::SteadyClock::now();
  if (pulled.failed()) return pulled;
  if (pulls) pulls->record(t1 - t0 + late);

  // Use the rows where they landed; the gradient of a row sums those of its
  // key's draws (the model's gradient does not read the values).
  const PulledRows r = w_.rows(rows.value);
  const std::uint32_t dim = load_.dim;
  std::fill_n(grads_.begin(), r.rows.size(), 0.0f);
  for (std::size_t row = 0; row < r.keys.size(); ++row) checksum_ += r.rows[row * dim];
  for (std::size_t i = 0; i < keys_.size(); ++i) {
    float* g = &grads_[static_cast<std::size_t>(r.index[i]) * dim];
    for (std::uint32_t j = 0; j < dim; ++j) g[j] += gradient(id_, it, keys_[i], j);
  }
  keys_pulled_ += r.keys.size();
  if (dense) {
    for (std::size_t e = 0; e < dense_grads_.size(); ++e) dense_grads_[e] = dense_gradient(id_, it, e);
    w_.release(dense_rows.value);
  }
  if (it == skip_push_) {
    w_.release(rows.value);
    return {};
  }

  t0 = bench::SteadyClock::now();
  const auto push = w_.push_rows(rows.value, {grads_.data(), r.rows.size()});
  const auto dense_push = dense ? w_.push_dense(kDenseTable, dense_grads_) : Result<Ticket>::ok(0);
  w_.release(rows.value);  // the push holds its own copy of the keys
  if (!push || !dense_push) {
    const Status st = push ? dense_push.status : push.status;
    if (push) w_.release(push.value);
    return Error(st, "push not started: " + std::string(to_string(st)));
  }
  Error pushed = finish(push.value, "push");
  if (pushed.ok() && dense) pushed = finish(dense_push.value, "dense push");
  t1 = bench::SteadyClock::now();
  if (pushed.failed()) return pushed;
  w_.release(push.value);
  if (dense) w_.release(dense_push.value);
  if (pushes) pushes->record(t1 - t0 + late);
  return {};
}

}  // namespace ferry::ps::tool
