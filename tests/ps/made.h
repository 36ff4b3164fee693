// Shards and workers for the libferry-ps tests: create() with a spec the
// test means to be good, failing the test (with create's reason) when it
// is not.
#pragma once

#include <catch2/catch.hpp>

#include <memory>

#include "ferry/ps/shard.h"
#include "ferry/ps/worker.h"

namespace ferry::ps::test {

inline std::unique_ptr<Shard> made_shard(const ShardSpec& spec) {
  std::unique_ptr<Shard> shard;
  const Error bad = Shard::create(spec, &shard);
  if (bad.failed()) FAIL("Shard::create: " << bad.message());
  return shard;
}

inline std::unique_ptr<Worker> made_worker(std::unique_ptr<ShardLink> link, const WorkerOptions& options) {
  std::unique_ptr<Worker> worker;
  const Error bad = Worker::create(std::move(link), options, &worker);
  if (bad.failed()) FAIL("Worker::create: " << bad.message());
  return worker;
}

}  // namespace ferry::ps::test
