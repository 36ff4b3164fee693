// ferry._ferry.ps.Worker: the parameter-server worker for Python, one
// ps::Worker behind a lock (thread safe: operations are serialised). Each
// operation returns an Op (py_ps_op.cpp).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cmath>
#include <mutex>

#include "client_core.h"
#include "errors.h"
#include "ferry/ps/worker.h"
#include "leases.h"
#include "py_ps.h"
#include "py_ps_messages.h"
#include "py_ps_op.h"

namespace ferry::py {

namespace pyb = pybind11;
using namespace pybind11::literals;

namespace {

// Starts an operation under the lock; raises when it could not start.
template <typename Start>
std::shared_ptr<PsOp> start(const std::shared_ptr<WorkerCore>& core, ps::Op kind, const char* what, Start start) {
  Result<ps::Ticket> r;
  ps::OpError refusal;
  {
    auto lk = lock_from_python(core->mu);
    r = start(live(*core));
    if (!r) refusal = core->worker->last_refusal();
  }
  if (!r) {
    if (refusal.status != r.status) refusal = ps::OpError{r.status, ps::PsStatus::Ok, 0};  // refused before any shard
    raise(r.status, not_started_message(refusal, what, core->target, core->prefix));
  }
  auto op = std::make_shared<PsOp>();
  op->core = core;
  op->ticket = r.value;
  op->kind = kind;
  if (kind == ps::Op::Pull) {
    auto lk = lock_from_python(core->mu);
    auto& v = core->ops;
    if (v.size() >= 64 && (v.size() & (v.size() - 1)) == 0)
      v.erase(std::remove_if(v.begin(), v.end(), [](const auto& w) { return w.expired(); }), v.end());
    v.push_back(op);
  }
  return op;
}

std::shared_ptr<WorkerCore> make_worker(const std::vector<ps::TableSpec>& tables, std::uint32_t shards,
                                        const std::string& socket, const std::string& target, const std::string& name,
                                        double timeout, bool busy_poll, const std::string& prefix,
                                        std::uint64_t tx_bytes, std::uint32_t max_ops, std::uint32_t max_count,
                                        std::uint32_t max_calls, const std::vector<std::string>& shard_targets) {
  if (!(timeout > 0) || !std::isfinite(timeout))
    raise(Status::BadRequest, "timeout must be a positive number of seconds");
  ps::FerryLinkOptions f;
  f.socket = socket;
  f.target = target;
  f.shards = shards;
  f.name = name;
  f.service_prefix = prefix;
  f.call_timeout = std::chrono::milliseconds(static_cast<std::int64_t>(timeout * 1000));
  f.open_timeout = std::chrono::milliseconds(static_cast<std::int64_t>(timeout * 1000));
  f.busy_poll = busy_poll;
  f.tx_bytes = tx_bytes;
  f.shard_targets = shard_targets;
  ps::WorkerOptions wo;
  wo.tables = tables;
  wo.timeout = f.call_timeout + std::chrono::seconds(1);  // ferryd's call timeout answers first
  wo.max_ops = max_ops;
  wo.max_count = max_count;
  wo.max_calls = max_calls;
  if (max_ops == 0 || max_ops > 65536) raise(Status::BadRequest, "max_ops must be in [1, 65536]");
  if (max_calls == 0) raise(Status::BadRequest, "max_calls must be at least 1");
  // Checked before connecting (Worker::create checks again): bad options attach nothing.
  if (const Error bad = ps::check_tables(tables); bad.failed()) raise(bad.status(), bad.message());
  if (shards == 0 || shards > ps::kMaxShards) raise(Status::BadRequest, "shards must be in [1, 256]");
  std::unique_ptr<ps::ShardLink> link;
  Error connected;
  {
    pyb::gil_scoped_release nogil;
    connected = ps::connect_ferry(f, &link);
  }
  if (connected.failed()) raise(connected.status(), connected.message());
  auto core = std::make_shared<WorkerCore>();
  if (const Error bad = ps::Worker::create(std::move(link), wo, &core->worker); bad.failed())
    raise(bad.status(), bad.message());
  core->event_fd = core->worker->event_fd();
  core->target = target;
  core->prefix = prefix;
  return core;
}

const ps::TableSpec& table_of(ps::Worker& w, ps::TableId id) {
  const ps::TableSpec* t = w.table(id);
  if (t == nullptr) raise(Status::BadRequest, "no table with id " + std::to_string(id));
  return *t;
}

// A keyed operation the worker refused as a bad request: the usual reason is
// a key outside the table's rows, which the error then names (looked for
// only after the refusal, so a valid call pays nothing for it).
Result<ps::Ticket> name_bad_key(ps::Worker& w, ps::TableId table, std::span<const ps::Key> keys, const char* what,
                                Result<ps::Ticket> r) {
  if (r || r.status != Status::BadRequest) return r;
  const std::string why = key_outside_message(table_of(w, table), keys, what);
  if (!why.empty()) raise(Status::BadRequest, why);
  return r;
}

// pull_state/assign_state and their dense forms: a table whose optimizer keeps state.
void stateful(const ps::TableSpec& t) {
  if (t.optimizer.kind == ps::OptimizerKind::Adagrad) return;
  raise(Status::BadRequest, "table " + std::to_string(t.id) + " keeps no optimizer state (optimizer " +
                                std::string(to_string(t.optimizer.kind)) + "): only Adagrad keeps some");
}

}  // namespace

void bind_ps_worker(pyb::module_& ps) {
  bind_ps_op(ps);

  pyb::class_<WorkerCore, std::shared_ptr<WorkerCore>>(ps, "Worker", R"(
A parameter-server worker: one ferry client with an endpoint to every shard.
Operations are asynchronous (they return an Op); duplicate keys are pulled
once and their gradients summed. Thread safe (operations are serialised).)")
      .def(pyb::init(&make_worker), "tables"_a, "shards"_a, "socket"_a = "", "target"_a = "",
           "name"_a = "ferry ps worker", "timeout"_a = 10.0, "busy_poll"_a = false, "service_prefix"_a = "ps-shard-",
           "tx_bytes"_a = 0, "max_ops"_a = 64, "max_count"_a = 0, "max_calls"_a = 256,
           "shard_targets"_a = std::vector<std::string>{})
      .def(
          "pull",
          [](const std::shared_ptr<WorkerCore>& c, ps::TableId table, const I64& keys) {
            const auto* k = reinterpret_cast<const ps::Key*>(keys.data());
            const std::span<const ps::Key> span(k, static_cast<std::size_t>(keys.size()));
            return start(c, ps::Op::Pull, "pull",
                         [&](ps::Worker& w) { return name_bad_key(w, table, span, "pull", w.pull(table, span)); });
          },
          "table"_a, "keys"_a)
      .def(
          "pull_dense",
          [](const std::shared_ptr<WorkerCore>& c, ps::TableId table) {
            return start(c, ps::Op::Pull, "pull", [&](ps::Worker& w) { return w.pull_dense(table); });
          },
          "table"_a)
      .def(
          "push",
          [](const std::shared_ptr<WorkerCore>& c, ps::TableId table, const I64& keys, const F32& grads) {
            const auto* k = reinterpret_cast<const ps::Key*>(keys.data());
            const std::span<const ps::Key> span(k, static_cast<std::size_t>(keys.size()));
            return start(c, ps::Op::Push, "push", [&](ps::Worker& w) {
              table_of(w, table);
              return name_bad_key(w, table, span, "push",
                                  w.push(table, span, {grads.data(), static_cast<std::size_t>(grads.size())}));
            });
          },
          "table"_a, "keys"_a, "grads"_a)
      .def(
          "push_rows",
          [](const std::shared_ptr<WorkerCore>& c, const PsOp& pulled, const F32& grads) {
            if (pulled.core != c || pulled.released)
              raise(Status::BadRequest, "push_rows(): not a live pull of this worker");
            return start(c, ps::Op::Push, "push", [&](ps::Worker& w) {
              return w.push_rows(pulled.ticket, {grads.data(), static_cast<std::size_t>(grads.size())});
            });
          },
          "pulled"_a, "grads"_a)
      .def(
          "push_dense",
          [](const std::shared_ptr<WorkerCore>& c, ps::TableId table, const F32& grads) {
            return start(c, ps::Op::Push, "push", [&](ps::Worker& w) {
              return w.push_dense(table, {grads.data(), static_cast<std::size_t>(grads.size())});
            });
          },
          "table"_a, "grads"_a)
      .def(
          "assign",
          [](const std::shared_ptr<WorkerCore>& c, ps::TableId table, const I64& keys, const F32& values) {
            const auto* k = reinterpret_cast<const ps::Key*>(keys.data());
            const std::span<const ps::Key> span(k, static_cast<std::size_t>(keys.size()));
            return start(c, ps::Op::Assign, "assign", [&](ps::Worker& w) {
              return name_bad_key(w, table, span, "assign",
                                  w.assign(table, span, {values.data(), static_cast<std::size_t>(values.size())}));
            });
          },
          "table"_a, "keys"_a, "values"_a)
      .def(
          "pull_state",
          [](const std::shared_ptr<WorkerCore>& c, ps::TableId table, const I64& keys) {
            const auto* k = reinterpret_cast<const ps::Key*>(keys.data());
            const std::span<const ps::Key> span(k, static_cast<std::size_t>(keys.size()));
            return start(c, ps::Op::Pull, "pull_state", [&](ps::Worker& w) {
              stateful(table_of(w, table));
              return name_bad_key(w, table, span, "pull_state", w.pull_state(table, span));
            });
          },
          "table"_a, "keys"_a, "The optimizer state (Adagrad's accumulators) of rows, as pull() gives values.")
      .def(
          "assign_state",
          [](const std::shared_ptr<WorkerCore>& c, ps::TableId table, const I64& keys, const F32& values) {
            const auto* k = reinterpret_cast<const ps::Key*>(keys.data());
            const std::span<const ps::Key> span(k, static_cast<std::size_t>(keys.size()));
            return start(c, ps::Op::Assign, "assign_state", [&](ps::Worker& w) {
              stateful(table_of(w, table));
              return name_bad_key(
                  w, table, span, "assign_state",
                  w.assign_state(table, span, {values.data(), static_cast<std::size_t>(values.size())}));
            });
          },
          "table"_a, "keys"_a, "values"_a, "Sets the optimizer state of rows (their values stay).")
      .def(
          "pull_dense_state",
          [](const std::shared_ptr<WorkerCore>& c, ps::TableId table) {
            return start(c, ps::Op::Pull, "pull_state", [&](ps::Worker& w) {
              stateful(table_of(w, table));
              return w.pull_dense_state(table);
            });
          },
          "table"_a,
          "The optimizer state (Adagrad's accumulators) of a whole dense table, as pull_dense() gives values.")
      .def(
          "assign_dense_state",
          [](const std::shared_ptr<WorkerCore>& c, ps::TableId table, const F32& values) {
            return start(c, ps::Op::Assign, "assign_state", [&](ps::Worker& w) {
              stateful(table_of(w, table));
              return w.assign_dense_state(table, {values.data(), static_cast<std::size_t>(values.size())});
            });
          },
          "table"_a, "values"_a, "Sets the optimizer state of a whole dense table (its values stay).")
      .def(
          "assign_dense",
          [](const std::shared_ptr<WorkerCore>& c, ps::TableId table, const F32& values) {
            return start(c, ps::Op::Assign, "assign", [&](ps::Worker& w) {
              return w.assign_dense(table, {values.data(), static_cast<std::size_t>(values.size())});
            });
          },
          "table"_a, "values"_a)
      .def(
          "save",
          [](const std::shared_ptr<WorkerCore>& c, ps::TableId table, const std::string& name,
             const std::vector<std::uint32_t>& first, std::uint32_t count) {
            return start(c, ps::Op::Save, "save", [&](ps::Worker& w) {
              table_of(w, table);
              if (first.size() != w.shards())
                raise(Status::BadRequest, "save(): one first row per shard (" + std::to_string(w.shards()) + ")");
              return w.save(table, name, first, count);
            });
          },
          "table"_a, "name"_a, "first"_a, "count"_a,
          "One step of a shard-side checkpoint: shard s writes `count` rows of the table from its row first[s] "
          "into NAME in its checkpoint directory (first[s] = 0xFFFFFFFF: not asked); ferry.ps.save_shards "
          "drives the steps.")
      .def(
          "push_rows_prepare",
          [](const std::shared_ptr<WorkerCore>& c, const PsOp& pulled) {
            if (pulled.core != c || pulled.released)
              raise(Status::BadRequest, "push_rows_prepare(): not a live pull of this worker");
            return start(c, ps::Op::Push, "push", [&](ps::Worker& w) { return w.push_rows_prepare(pulled.ticket); });
          },
          "pulled"_a,
          "Make push_rows' requests in the arena with room for the gradient (Op.prepared() says where); "
          "commit() sends them.")
      .def(
          "commit",
          [](const std::shared_ptr<WorkerCore>& c, PsOp& op) {
            if (op.core != c || op.released) raise(Status::BadRequest, "commit(): not a live operation of this worker");
            auto lk = lock_from_python(c->mu);
            const Status st = live(*c).commit(op.ticket);
            if (st != Status::Ok) raise(st, "commit(): not a prepared push");
          },
          "op"_a, "Send a prepared push.")
      .def(
          "owns", [](const std::shared_ptr<WorkerCore>& c, const PsOp& op) { return op.core == c; }, "op"_a,
          "Whether op was started by this worker (not by the one before it attached again).")
      .def("wait_all", &wait_all, "ops"_a, "timeout"_a = pyb::none(),
           "Wait for every one of ops (one GIL release per worker they belong to); raises the first failure in "
           "list order.")
      .def_property_readonly("live_ops",
                             [](const std::shared_ptr<WorkerCore>& c) {
                               auto lk = lock_from_python(c->mu);
                               return live(*c).live_ops();
                             })
      .def_property_readonly(
          "daemon_gone",
          [](const std::shared_ptr<WorkerCore>& c) {
            auto lk = lock_from_python(c->mu);
            return live(*c).link().state() == Status::DaemonGone;
          },
          "Whether this worker's ferryd went away (its client looks at the attach socket at most once a "
          "millisecond).")
      .def_property_readonly("max_count",
                             [](const std::shared_ptr<WorkerCore>& c) {
                               auto lk = lock_from_python(c->mu);
                               return live(*c).max_count();
                             })
      .def_property_readonly("max_message_bytes",
                             [](const std::shared_ptr<WorkerCore>& c) {
                               auto lk = lock_from_python(c->mu);
                               return live(*c).link().max_message_bytes();
                             })
      .def_property_readonly(
          "segment",
          [](const std::shared_ptr<WorkerCore>& c) {
            // A block's address less its segment offset is where the segment is mapped.
            auto lk = lock_from_python(c->mu);
            ps::ShardLink& link = live(*c).link();
            const Buffer b = link.alloc(64);
            if (!b) raise(Status::NoMemory, "segment: the arena is full");
            const auto base = reinterpret_cast<std::uintptr_t>(b.data) - b.offset;
            link.free(b);
            return base;
          },
          "The address the worker's shared segment (rings, arenas) is mapped at, for registering it with a GPU.")
      .def("close", [](const std::shared_ptr<WorkerCore>& c) {
        std::unique_ptr<ps::Worker> gone;
        {
          auto lk = lock_from_python(c->mu);
          if (!c->worker) return;
          int viewed = 0;
          for (const auto& w : c->ops)
            if (auto o = w.lock(); o && !o->released && o->exports > 0) ++viewed;
          c->ops.clear();
          if (viewed > 0) {
            // Tensors still view pulled rows: hang up now, unmap when they
            // are gone (the views' tokens hold the ops, the ops the core).
            c->worker->link().detach();
            c->retired = std::move(c->worker);
            return;
          }
          gone = std::move(c->worker);
        }
        pyb::gil_scoped_release nogil;
        gone.reset();  // waits (bounded) for calls in flight, then detaches
      });
}

}  // namespace ferry::py
