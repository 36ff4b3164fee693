// One shard of a parameter server: its part of every table and the request
// handler that both transports (ferry calls, framed TCP) share. handle()
// validates a whole request before it changes anything: a bad push applies
// nothing and is answered with an error record (ferry/ps/wire.h).
//
// Not thread safe: one serving thread owns a Shard (a Save step begun in
// the background is written by the shard's own writer thread, from copies).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ferry/ps/table.h"
#include "ferry/ps/wire.h"
#include "ferry/visibility.h"

namespace ferry::ps {

namespace detail {
class TableStore;
class TableSaver;
class SaveWriter;

// A counter one thread writes and any thread reads: a relaxed load and
// store on the writer's side (no locked instruction on the serving path),
// a relaxed load on the reader's.
class Tally {
 public:
  void add(std::uint64_t n = 1) noexcept {
    v_.store(v_.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
  }
  std::uint64_t get() const noexcept { return v_.load(std::memory_order_relaxed); }

 private:
  std::atomic<std::uint64_t> v_{0};
};
}  // namespace detail

struct ShardSpec {
  std::uint32_t index = 0;
  std::uint32_t shards = 1;
  std::vector<TableSpec> tables;
  std::uint32_t max_count = 4096;  // keys (or elements) per request this shard accepts
  // Create every row this shard owns of each bounded embedding table (rows
  // != 0) at construction, instead of on its first touch: start-up pays
  // for the initial values and the page faults, not the first pulls.
  bool preload = false;
  // Accept NaN and infinite gradients and values. Off: a push or assign
  // carrying one is refused NonFinite, whole, and counted (a diverging
  // worker cannot poison the rows every other worker reads).
  bool allow_non_finite = false;
  // Shard-side checkpoints (wire Op::Save): the directory they go into,
  // on this shard's host; empty: Save is refused NotEnabled. It must exist.
  std::string checkpoint_dir{};
  // A checkpoint's name under checkpoint_dir to start from: every table's
  // part for this shard index and count is read back at construction.
  std::string restore{};
  // A Save step in the background whose writer sits this long in one
  // filesystem call (an open, write, sync or rename that does not return:
  // a hung disk or network filesystem) is answered IoFailed; the writer is
  // left to return on its own, and until it does this shard refuses Save
  // steps IoFailed at once (one stuck thread per shard, not one per
  // attempt). 0: wait for the filesystem however long it takes.
  std::uint32_t save_stall_ms = 60000;
};

struct ShardCounters {
  std::uint64_t requests = 0;
  std::uint64_t rejected = 0;  // answered with an error record
  std::uint64_t pulls = 0;
  std::uint64_t pushes = 0;
  std::uint64_t assigns = 0;
  std::uint64_t saves = 0;  // Save steps written
  std::uint64_t keys = 0;   // keys or elements carried by accepted requests
  // Of `rejected`: the refusals that protect the tables.
  std::uint64_t non_finite = 0;  // NonFinite: a NaN or infinite gradient or value
  std::uint64_t forbidden = 0;   // Forbidden: the caller is not on the table's access list
  std::uint64_t table_full = 0;  // TableFull: new rows past the table's max_rows
  // Save steps that could not be written (IoFailed: a full or failing
  // disk, a writer stalled past save_stall_ms, or refused behind one).
  std::uint64_t save_failed = 0;
};

// What one table holds on one shard (embedding: rows created so far).
struct TableUsage {
  TableId id = 0;
  std::uint64_t rows = 0;
  std::uint64_t bytes = 0;  // heap bytes: values, optimizer state, index
};

class FERRY_API Shard {
 public:
  // A shard serving `spec`'s tables. BadRequest, with the reason, for a
  // spec that cannot be served (`out` untouched). Configuration time.
  [[nodiscard]] static Error create(const ShardSpec& spec, std::unique_ptr<Shard>* out);
  ~Shard();
  Shard(const Shard&) = delete;
  Shard& operator=(const Shard&) = delete;

  // Handles one request and writes its response into `response`; returns
  // the response's length (0 only when `response` cannot hold an error record).
  // `caller`: the uid the request came from, kRemoteCaller or
  // kUnknownCaller (TableAccess).
  [[nodiscard]] std::size_t handle(std::span<const std::byte> request, std::span<std::byte> response,
                                   std::uint32_t caller = kUnknownCaller) noexcept;

  // Save steps in the background, for a server with other requests to
  // answer meanwhile (ShardServer). begin_save() looks at a request: a Save
  // step it can take begins (Began), and a writer thread writes and syncs
  // its rows while this thread serves on, calling save_turn() between
  // requests (and whenever save_event_fd() is readable) to copy the step's
  // rows a piece at a time (about 256 KiB: each row's values and state of
  // one moment) for the writer. Once save_ready(), end_save() writes the
  // step's answer as handle() would have. Wait: a Save step while another
  // is in the background (answer it after end_save()). Handle: anything
  // else, a refused Save step included, for handle() to answer. One step
  // at a time; handle() given a Save step meanwhile runs the background
  // one to its end first. save_turn() also watches the writer: one stuck
  // in a filesystem call for spec().save_stall_ms is given up, and the
  // step is save_ready() with IoFailed for its answer.
  enum class SaveStart : std::uint8_t { Handle, Began, Wait };
  [[nodiscard]] SaveStart begin_save(std::span<const std::byte> request,
                                     std::uint32_t caller = kUnknownCaller) noexcept;
  void save_turn() noexcept;
  bool save_running() const noexcept;
  bool save_ready() const noexcept;
  int save_event_fd() const noexcept;  // -1 before the first step began
  // The answer of the step in the background (only once save_ready()).
  [[nodiscard]] std::size_t end_save(std::span<std::byte> response) noexcept;
  // Gives up a step in the background and drops its answer (a server that
  // stops before it could send it): nothing of its part is kept, unless
  // the step had already ended. A writer that does not stop within 2 s
  // (stuck on a disk that hangs) is left to end on its own, and the shard
  // goes on with a new one.
  void drop_save() noexcept;

  const ShardSpec& spec() const noexcept { return spec_; }
  // A snapshot; safe from any thread while another serves.
  ShardCounters counters() const noexcept {
    const Tallies& t = tallies_;
    return ShardCounters{t.requests.get(),  t.rejected.get(),   t.pulls.get(),      t.pushes.get(),
                         t.assigns.get(),   t.saves.get(),      t.keys.get(),       t.non_finite.get(),
                         t.forbidden.get(), t.table_full.get(), t.save_failed.get()};
  }
  // Rows and bytes of each table on this shard, by table id. Safe from any
  // thread while another serves: gauges the serving thread updates after
  // each write.
  std::vector<TableUsage> usage() const;
  // Largest request / response this shard's tables allow at max_count.
  std::size_t max_request_bytes() const noexcept;
  std::size_t max_response_bytes() const noexcept;
  // A parameter's current values (a row of dim floats, or one dense
  // element), nullptr when this shard never held it. For tests and tools.
  const float* find(TableId table, Key key) const noexcept;

 private:
  FERRY_LOCAL explicit Shard(const ShardSpec& spec);  // spec checked by create()
  FERRY_LOCAL PsStatus run(const Header& h, std::span<const std::byte> request, std::span<std::byte> response,
                           std::uint32_t caller, std::size_t* length) noexcept;
  FERRY_LOCAL PsStatus save(const Header& h, std::span<const std::byte> request, std::span<std::byte> response,
                            std::uint32_t caller, std::size_t* length) noexcept;
  FERRY_LOCAL PsStatus check_save(const Header& h, std::span<const std::byte> request, std::uint32_t caller,
                                  std::string_view* name) noexcept;
  FERRY_LOCAL std::size_t answer(PsStatus st, std::uint8_t op, std::span<std::byte> response,
                                 std::size_t length) noexcept;
  FERRY_LOCAL Error restore();
  // The background step's writer sat in one call past save_stall_ms: give it up.
  FERRY_LOCAL void give_up_stalled() noexcept;
  // Whether a writer given up earlier is still stuck (once it returned, it is let go).
  FERRY_LOCAL bool still_stalled() noexcept;

  ShardSpec spec_;
  FERRY_LOCAL void publish_usage(TableId table) noexcept;

  struct Gauge {
    std::atomic<std::uint64_t> rows{0};
    std::atomic<std::uint64_t> bytes{0};
  };
  std::vector<std::unique_ptr<detail::TableStore>> stores_;  // by table id; null where none
  // By table id; made by a table's first Save. Shared with the writer of a step in the background.
  std::vector<std::shared_ptr<detail::TableSaver>> savers_;
  std::unique_ptr<Gauge[]> gauges_;  // by table id, like stores_
  // Declared after the stores and savers it writes from: destroyed first.
  std::unique_ptr<detail::SaveWriter> writer_;  // made by the first begin_save() that begins
  // A writer given up while stuck in a filesystem call, until it returns
  // (Save steps are refused meanwhile); left to end on its own at exit.
  std::unique_ptr<detail::SaveWriter> stalled_;
  TableId saving_ = 0;     // the table of the step in the background
  bool given_up_ = false;  // that step's writer stalled: end_save() answers IoFailed
  struct Tallies {
    detail::Tally requests, rejected, pulls, pushes, assigns, saves, keys, non_finite, forbidden, table_full,
        save_failed;
  };
  Tallies tallies_;
};

}  // namespace ferry::ps
