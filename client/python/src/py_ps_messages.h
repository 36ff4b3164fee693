// What ferry._ferry.ps.Worker's failures say: the status, the shard, and
// what the caller can do about it where it can do something
// (py_ps_worker.cpp and py_ps_op.cpp raise them).
#pragma once

#include <span>
#include <string>

#include "ferry/ps/worker.h"

namespace ferry::py {

// An operation that was started and failed: "pull failed: BadRequest
// (shard 1 refused it: BadDim; ...)". target and prefix name the shards'
// services, for a shard that is gone.
std::string failed_message(const ps::OpError& e, const char* what, const std::string& target,
                           const std::string& prefix);

// An operation the worker refused to start (e.status), naming the shard
// (e.shard) whose link refused it when that is why.
std::string not_started_message(const ps::OpError& e, const char* what, const std::string& target,
                                const std::string& prefix);

// A keyed operation refused as a bad request: the first key outside the
// table's rows, named ("pull not started: key 150 is outside table 'emb',
// whose keys are 0..99"); empty when no key is (the refusal had another reason).
std::string key_outside_message(const ps::TableSpec& table, std::span<const ps::Key> keys, const char* what);

}  // namespace ferry::py
