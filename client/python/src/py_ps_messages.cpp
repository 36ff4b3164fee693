// What ferry._ferry.ps.Worker's failures say (py_ps_messages.h).
#include "py_ps_messages.h"

#include <cstdint>
#include <string_view>

namespace ferry::py {

namespace {

// What a shard's refusal means for the caller, where it can act on it.
std::string_view refusal_hint(ps::PsStatus ps) noexcept {
  switch (ps) {
    case ps::PsStatus::BadTable:
    case ps::PsStatus::BadDim:
    case ps::PsStatus::BadKey:
    case ps::PsStatus::BadRange:
      return "; the worker's tables or shard count differ from the shard's: start both from one table list and "
             "shard count";
    case ps::PsStatus::TableFull: return "; the shard holds max_rows rows of this table already";
    case ps::PsStatus::NonFinite: return "; a value or gradient is NaN or infinite";
    case ps::PsStatus::Forbidden: return "; the table's access list does not allow this caller that operation";
    case ps::PsStatus::NotEnabled:
      return "; the shard was started without a checkpoint directory (--checkpoint-dir), so it saves nothing";
    case ps::PsStatus::Exists:
      return "; its checkpoint directory holds a checkpoint of that name with this table already: choose another "
             "name";
    case ps::PsStatus::IoFailed: return "; it could not write its files there (its standard error says why)";
    default: return "";
  }
}

// ferry.ps.Worker (worker.py) attaches again when its ferryd went away.
constexpr std::string_view kDaemonGoneHint =
    " (this host's ferryd went away: this worker attaches again at its next operation, once ferryd is back)";

}  // namespace

std::string failed_message(const ps::OpError& e, const char* what, const std::string& target,
                           const std::string& prefix) {
  std::string s = std::string(what) + " failed: " + std::string(to_string(e.status));
  if (e.ps != ps::PsStatus::Ok) {
    s += " (shard " + std::to_string(e.shard) + " refused it: " + std::string(to_string(e.ps)) +
         std::string(refusal_hint(e.ps)) + ")";
  } else if (e.status == Status::ServiceNotFound || e.status == Status::ServiceGone) {
    // A shard that went away (its ferryd restarted, it was stopped) and was not started again.
    s += " (shard " + std::to_string(e.shard) + ": nothing serves '" + ps::shard_target(target, prefix, e.shard) +
         "' now; start that shard again: this worker's next operations find it)";
  } else if (e.status == Status::DaemonGone) {
    s += std::string(kDaemonGoneHint);
  } else if (e.status != Status::Ok && e.status != Status::BadRequest) {
    s += " (shard " + std::to_string(e.shard) + ")";
  }
  return s;
}

std::string not_started_message(const ps::OpError& e, const char* what, const std::string& target,
                                const std::string& prefix) {
  const Status status = e.status;
  std::string why = std::string(what) + " not started: " + std::string(to_string(status));
  if (status == Status::Busy) why += " (too many operations unreleased: drop or release() finished ones)";
  if (status == Status::DaemonGone) why += kDaemonGoneHint;
  if (status == Status::ResponseTooLarge)
    why +=
        " (one row of this table is larger than the largest message ferryd carries, its max-message-bytes: "
        "no split can fit it)";
  if (status == Status::NoMemory)
    why +=
        " (the worker's arena is full and none of its calls is in flight to free any: release pulled rows, "
        "or attach with a larger tx_bytes)";
  if (status == Status::ServiceNotFound || status == Status::ServiceGone || status == Status::PeerUnreachable ||
      status == Status::PeerReset)
    why += " (shard " + std::to_string(e.shard) + ": '" + ps::shard_target(target, prefix, e.shard) +
           (status == Status::ServiceNotFound || status == Status::ServiceGone ? "' is not served now"
                                                                               : "': its ferryd does not answer") +
           "; start that shard again: this worker's next operations find it)";
  return why;
}

std::string key_outside_message(const ps::TableSpec& table, std::span<const ps::Key> keys, const char* what) {
  if (table.kind != ps::TableKind::Embedding || table.rows == 0) return {};
  for (const ps::Key k : keys) {
    if (k < table.rows) continue;
    return std::string(what) + " not started: key " + std::to_string(static_cast<std::int64_t>(k)) +
           " is outside table '" + table.name + "', whose keys are 0.." + std::to_string(table.rows - 1);
  }
  return {};
}

}  // namespace ferry::py
