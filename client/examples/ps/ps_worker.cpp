#include "ps_worker.h"

#include <cstring>

namespace ferry::ps {

std::size_t worker_request_bytes(const Workload& w) { return push_request_bytes(w.batch, w.dim, w.dense); }
std::size_t worker_response_bytes(const Workload& w) { return pull_response_bytes(w.batch, w.dim, w.dense); }

std::uint32_t encode_pull_header(std::span<std::byte> msg, std::uint32_t count, std::uint32_t dim,
                                 std::uint32_t dense_offset, std::uint32_t dense_count, std::uint64_t request_id) {
  MsgHeader h;
  h.op = static_cast<std::uint8_t>(PsOp::Pull);
  h.count = count;
  h.dim = dim;
  h.dense_offset = dense_offset;
  h.dense_count = dense_count;
  h.request_id = request_id;
  std::memcpy(msg.data(), &h, sizeof(h));
  return static_cast<std::uint32_t>(pull_request_bytes(count));
}

PsWorker::PsWorker(PsTransport& transport, const Workload& workload, std::uint32_t worker_id)
    : t_(transport),
      w_(workload),
      id_(worker_id),
      zipf_(workload.keys, workload.skew),
      rng_(worker_rng(workload.seed, worker_id)),
      count_(workload.shards),
      request_len_(workload.shards),
      response_len_(workload.shards),
      ids_(workload.shards) {}

bool PsWorker::check(PsOp op, std::string* error) {
  for (std::uint32_t s = 0; s < w_.shards; ++s) {
    if (request_len_[s] == 0) continue;
    const std::byte* resp = t_.response(s).data();
    const PsStatus st = check_response(resp, response_len_[s], op, ids_[s]);
    const std::uint64_t want =
        op == PsOp::Pull ? pull_response_bytes(count_[s], w_.dim, w_.dense) : push_response_bytes();
    if (st != PsStatus::Ok || response_len_[s] != want) {
      *error = std::string(to_string(op)) + " on shard " + std::to_string(s) + ": " + std::string(to_string(st)) +
               " (" + std::to_string(response_len_[s]) + " bytes, expected " + std::to_string(want) + ")";
      return false;
    }
  }
  return true;
}

bool PsWorker::iterate(std::uint32_t it, bench::LatencyRecorder* pulls, bench::LatencyRecorder* pushes,
                       std::string* error) {
  // Draw the batch straight into the per-shard request buffers.
  for (auto& c : count_) c = 0;
  for (std::uint32_t i = 0; i < w_.batch; ++i) {
    const std::uint64_t key = zipf_(rng_);
    const std::uint32_t s = shard_of(key, w_.shards);
    keys_of(t_.request(s).data())[count_[s]++] = key;
  }
  for (std::uint32_t s = 0; s < w_.shards; ++s) {
    ids_[s] = next_id_++;
    request_len_[s] = count_[s] == 0 && w_.dense == 0
                          ? 0
                          : encode_pull_header(t_.request(s), count_[s], w_.dim, 0, w_.dense, ids_[s]);
    response_len_[s] = 0;
  }
  auto t0 = bench::SteadyClock::now();
  if (!t_.exchange(request_len_, response_len_, error)) return false;
  auto t1 = bench::SteadyClock::now();
  if (pulls) pulls->record(t1 - t0);
  if (!check(PsOp::Pull, error)) return false;

  // Use the rows where they landed, then turn each pull request into the
  // push request in place: same header and keys, gradients appended.
  for (std::uint32_t s = 0; s < w_.shards; ++s) {
    if (request_len_[s] == 0) continue;
    const float* rows = rows_of(t_.response(s).data());
    for (std::uint32_t i = 0; i < count_[s]; ++i) checksum_ += rows[std::size_t{i} * w_.dim];
    keys_pulled_ += count_[s];
    std::byte* msg = t_.request(s).data();
    MsgHeader h;
    std::memcpy(&h, msg, sizeof(h));
    h.op = static_cast<std::uint8_t>(PsOp::Push);
    h.request_id = ids_[s] = next_id_++;
    std::memcpy(msg, &h, sizeof(h));
    const std::uint64_t* keys = keys_of(msg);
    float* g = grads_of(msg, count_[s]);
    for (std::uint32_t i = 0; i < count_[s]; ++i)
      for (std::uint32_t j = 0; j < w_.dim; ++j) *g++ = gradient(id_, it, keys[i], j);
    for (std::uint32_t d = 0; d < w_.dense; ++d) *g++ = dense_gradient(id_, it, std::uint64_t{s} * w_.dense + d);
    request_len_[s] = static_cast<std::uint32_t>(push_request_bytes(count_[s], w_.dim, w_.dense));
    response_len_[s] = 0;
  }
  if (it == skip_push_) return true;
  t0 = bench::SteadyClock::now();
  if (!t_.exchange(request_len_, response_len_, error)) return false;
  t1 = bench::SteadyClock::now();
  if (pushes) pushes->record(t1 - t0);
  return check(PsOp::Push, error);
}

}  // namespace ferry::ps
