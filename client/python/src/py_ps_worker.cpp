// ferry._ferry.ps.Worker and .Op: the parameter-server worker for Python.
// Operations are tickets of ps::Worker; a pull's Op lends its rows through
// the buffer protocol (torch.frombuffer(op, dtype=torch.float32) is a view
// of the response block in the tx arena: zero copy). The ticket is released
// when the Op object dies, which cannot happen while a view holds it; an
// explicit release() refuses while views are alive.
#include <poll.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cmath>
#include <mutex>
#include <thread>

#include "client_core.h"
#include "errors.h"
#include "ferry/ps/worker.h"
#include "leases.h"
#include "py_ps.h"
#include "py_ps_messages.h"

namespace ferry::py {

namespace pyb = pybind11;
using namespace pybind11::literals;

namespace {

constexpr auto kSlice = std::chrono::milliseconds(50);

struct PsOp;

struct WorkerCore {
  std::mutex mu;
  std::unique_ptr<ps::Worker> worker;   // null once closed
  std::unique_ptr<ps::Worker> retired;  // closed while rows were viewed: detached, mapped until the views die
  int event_fd = -1;
  std::vector<std::weak_ptr<PsOp>> ops;  // to refuse close() while rows are viewed
  std::string target, prefix;            // where the shards are served: messages name them
};

struct PsOp {
  std::shared_ptr<WorkerCore> core;
  ps::Ticket ticket = 0;
  ps::Op kind = ps::Op::Pull;
  bool released = false;
  int exports = 0;
  ~PsOp() {
    if (released || !core) return;
    auto lk = lock_from_python(core->mu);
    if (core->worker) core->worker->release(ticket);
  }
};

ps::Worker& live(WorkerCore& c) {
  if (!c.worker) raise("Closed", "the worker is closed");
  return *c.worker;
}

std::string failure(const WorkerCore& c, ps::Ticket t, const char* what) {
  return failed_message(c.worker->error(t), what, c.target, c.prefix);
}

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

// Busy while any of ops is in flight, else Ok (each op's own status is read afterwards).
Status all_done(ps::Worker& w, const std::vector<PsOp*>& ops) {
  for (const PsOp* o : ops)
    if (!o->released && w.status(o->ticket) == Status::Busy) return Status::Busy;
  return Status::Ok;
}

// Waits (without the GIL, in slices that let Ctrl-C through) until every
// one of ops (all of one worker) is done: Ok, Busy past the deadline, or
// Cancelled when the worker was closed.
Status wait_ops(WorkerCore& c, const std::vector<PsOp*>& ops, Clock::time_point deadline) {
  for (;;) {
    Status st;
    int fd;
    {
      pyb::gil_scoped_release nogil;
      const auto slice_end = std::min(deadline, Clock::now() + std::chrono::milliseconds(100));
      for (;;) {
        {
          std::lock_guard<std::mutex> g(c.mu);
          if (!c.worker) return Status::Cancelled;
          st = all_done(*c.worker, ops);
          // Collect until a turn finds nothing: only then is the link armed
          // to wake the fd, and sleeping on it cannot miss an answer that
          // is already there (it would sleep the whole slice).
          while (st == Status::Busy && c.worker->progress(std::chrono::milliseconds(0)) > 0)
            st = all_done(*c.worker, ops);
          fd = c.event_fd;
        }
        if (st != Status::Busy || Clock::now() >= slice_end) break;
        if (fd < 0) {
          std::this_thread::yield();  // a busy-polling worker
          continue;
        }
        const auto ms =
            std::chrono::ceil<std::chrono::milliseconds>(std::min(slice_end - Clock::now(), Clock::duration(kSlice)));
        pollfd p{fd, POLLIN, 0};
        ::poll(&p, 1, static_cast<int>(std::max<long long>(ms.count(), 0)));
      }
    }
    if (st != Status::Busy || Clock::now() >= deadline) return st;
    if (PyErr_CheckSignals() != 0) throw pyb::error_already_set();
  }
}

// The op's status once waited for (without the GIL).
Status wait_op(PsOp& op, Clock::time_point deadline) {
  const Status st = wait_ops(*op.core, {&op}, deadline);
  if (st != Status::Ok) return st;
  auto lk = lock_from_python(op.core->mu);
  return op.core->worker ? op.core->worker->status(op.ticket) : Status::Cancelled;
}

Clock::time_point deadline_of(const pyb::object& timeout) {
  if (timeout.is_none()) return Clock::time_point::max();
  const double s = timeout.cast<double>();
  if (!(s >= 0) || !std::isfinite(s)) raise(Status::BadRequest, "timeout must be a number of seconds >= 0");
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

// Raises the ferry.Error of a finished op's failure (st: its status).
void raise_failure(PsOp& op, Status st) {
  if (st == Status::Ok) return;
  const char* what = op.kind == ps::Op::Pull   ? "pull"
                     : op.kind == ps::Op::Push ? "push"
                     : op.kind == ps::Op::Save ? "save"
                                               : "assign";
  if (st == Status::Busy) raise(Status::Timeout, std::string(what) + " still in flight after the wait's timeout");
  std::string msg;
  {
    auto lk = lock_from_python(op.core->mu);
    msg = op.core->worker ? failure(*op.core, op.ticket, what) : std::string(what) + " failed: worker closed";
  }
  raise(st, msg);
}

void wait_or_raise(PsOp& op, const pyb::object& timeout) {
  const Clock::time_point deadline = deadline_of(timeout);
  if (op.released) raise(Status::BadRequest, "the operation was released");
  raise_failure(op, wait_op(op, deadline));
}

// Waits for every op with one GIL release per worker core; raises the
// first failure in list order. The ops are usually all this worker's; a
// ferry.ps.Worker attached again after its ferryd restarted leaves its
// earlier ones on the core before.
void wait_all(const std::shared_ptr<WorkerCore>&, const std::vector<std::shared_ptr<PsOp>>& list,
              const pyb::object& timeout) {
  const Clock::time_point deadline = deadline_of(timeout);
  std::vector<PsOp*> ops;
  ops.reserve(list.size());
  for (const auto& o : list) {
    if (!o) raise(Status::BadRequest, "wait_all(): not an operation");
    if (o->released) raise(Status::BadRequest, "wait_all(): an operation was released");
    ops.push_back(o.get());
  }
  std::vector<Status> waited(ops.size());
  std::vector<bool> seen(ops.size(), false);
  for (std::size_t i = 0; i < ops.size(); ++i) {
    if (seen[i]) continue;
    WorkerCore& core = *ops[i]->core;
    std::vector<PsOp*> group;
    for (std::size_t j = i; j < ops.size(); ++j)
      if (ops[j]->core.get() == &core) group.push_back(ops[j]);
    const Status st = wait_ops(core, group, deadline);
    for (std::size_t j = i; j < ops.size(); ++j) {
      if (ops[j]->core.get() != &core) continue;
      seen[j] = true;
      waited[j] = st;
    }
  }
  for (std::size_t i = 0; i < ops.size(); ++i) {
    PsOp* o = ops[i];
    Status st = waited[i];
    if (st != Status::Cancelled) {
      auto lk = lock_from_python(o->core->mu);
      st = o->core->worker ? o->core->worker->status(o->ticket) : Status::Cancelled;
    }
    raise_failure(*o, st);
  }
}

ps::PulledRows rows_of(PsOp& op) {
  if (op.released) raise("BufferFreed", "the pull was released: its rows are gone");
  ps::Worker& w = live(*op.core);
  const Status st = w.status(op.ticket);
  if (st == Status::Busy) raise(Status::Busy, "the pull is still in flight: wait() first");
  if (st != Status::Ok || op.kind != ps::Op::Pull) raise(Status::BadRequest, "not a completed pull");
  return w.rows(op.ticket);
}

// A numpy int64 copy of what `pick` takes of the op's rows (its index or
// keys). The array is made with the worker's lock released and filled
// under it: a Python allocation under the lock could run a garbage
// collection that re-enters it. The rows only change when the op is
// released meanwhile; then again, at the new size.
template <typename Pick>
pyb::object locked_keys(PsOp& o, Pick pick) {
  std::size_t n = 0;
  {
    auto lk = lock_from_python(o.core->mu);
    n = pick(rows_of(o)).size();
  }
  for (;;) {
    std::int64_t* out = nullptr;
    pyb::object a = new_array<std::int64_t>({n}, &out);
    auto lk = lock_from_python(o.core->mu);
    const auto got = pick(rows_of(o));
    if (got.size() == n) {
      for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<std::int64_t>(got[i]);
      return a;
    }
    n = got.size();
  }
}

int op_getbuffer(PyObject* obj, Py_buffer* view, int flags) {
  std::shared_ptr<PsOp> op;
  try {
    op = pyb::handle(obj).cast<std::shared_ptr<PsOp>>();
  } catch (const pyb::cast_error&) {
    PyErr_SetString(PyExc_TypeError, "not a ferry ps operation");
    view->obj = nullptr;
    return -1;
  }
  ps::PulledRows r;
  try {
    auto lk = lock_from_python(op->core->mu);
    r = rows_of(*op);
  } catch (const pyb::error_already_set& e) {
    const_cast<pyb::error_already_set&>(e).restore();
    view->obj = nullptr;
    return -1;
  }
  // The token keeps the op (and so its ticket and block) alive with the view.
  int* exports = &op->exports;
  return export_view(view, const_cast<float*>(r.rows.data()), static_cast<Py_ssize_t>(4 * r.rows.size()), false, flags,
                     std::move(op), exports);
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
  auto op = pyb::class_<PsOp, std::shared_ptr<PsOp>>(ps, "Op", pyb::buffer_protocol(), R"(
A parameter-server operation in flight or done. wait() blocks (without the
GIL) and raises the ferry.Error of a failure. A completed pull lends its
rows, [rows, dim] float32 in the arena, through the buffer protocol.)");
  op.def("wait", &wait_or_raise, "timeout"_a = pyb::none())
      .def("done",
           [](PsOp& o) {
             auto lk = lock_from_python(o.core->mu);
             if (!o.core->worker || o.released) return true;
             // Until a turn collects nothing: a caller that sleeps on the fd
             // after False (asyncio) is then woken by the next answer.
             ps::Worker& w = *o.core->worker;
             while (w.status(o.ticket) == Status::Busy)
               if (w.progress(std::chrono::milliseconds(0)) == 0) return false;
             return true;
           })
      .def_property_readonly("status",
                             [](PsOp& o) -> pyb::object {
                               auto lk = lock_from_python(o.core->mu);
                               if (!o.core->worker || o.released) return pyb::none();
                               const Status st = o.core->worker->status(o.ticket);
                               if (st == Status::Busy) return pyb::none();
                               return pyb::str(std::string(to_string(st)));
                             })
      .def_property_readonly("rows",
                             [](PsOp& o) {
                               auto lk = lock_from_python(o.core->mu);
                               const ps::PulledRows r = rows_of(o);
                               return r.keys.empty() && r.index.empty() ? r.rows.size() : r.keys.size();
                             })
      .def("index", [](PsOp& o) { return locked_keys(o, [](const ps::PulledRows& r) { return r.index; }); })
      .def("keys", [](PsOp& o) { return locked_keys(o, [](const ps::PulledRows& r) { return r.keys; }); })
      .def("shard_rows",
           [](PsOp& o) {
             auto lk = lock_from_python(o.core->mu);
             const ps::PulledRows r = rows_of(o);
             return std::vector<std::uint32_t>(r.shard_rows.begin(), r.shard_rows.end());
           })
      .def_property_readonly("zero_copy",
                             [](PsOp& o) {
                               auto lk = lock_from_python(o.core->mu);
                               return !rows_of(o).staged;
                             })
      .def(
          "prepared",
          [](PsOp& o) {
            auto lk = lock_from_python(o.core->mu);
            pyb::list out;
            for (const auto& p : live(*o.core).prepared(o.ticket))
              out.append(pyb::make_tuple(p.first, p.count, reinterpret_cast<std::uintptr_t>(p.values)));
            return out;
          },
          "A prepared push's requests: (first row, rows, address of their count x dim gradient floats).")
      .def(
          "saved",
          [](PsOp& o) {
            auto lk = lock_from_python(o.core->mu);
            const auto saved = live(*o.core).saved(o.ticket);
            if (saved.empty()) raise(Status::BadRequest, "saved(): not a finished save");
            return std::vector<std::uint32_t>(saved.begin(), saved.end());
          },
          "A finished save step: per shard, the rows it wrote (fewer than the step's: its part is done), or "
          "0xFFFFFFFF where it was not asked.")
      .def_property_readonly("exports", [](const PsOp& o) { return o.exports; })
      .def(
          "fileno", [](const PsOp& o) { return o.core->event_fd; },
          "Readable when completions may be ready (-1 for a busy-polling worker); then call done().")
      .def("release", [](PsOp& o) {
        if (o.released) return;
        if (o.exports > 0)
          raise("BufferInUse", "release(): " + std::to_string(o.exports) +
                                   " live view(s) of the rows (tensor, array): drop them first");
        auto lk = lock_from_python(o.core->mu);
        o.released = true;
        if (o.core->worker) o.core->worker->release(o.ticket);
      });
  auto* heap = reinterpret_cast<PyHeapTypeObject*>(op.ptr());
  heap->as_buffer.bf_getbuffer = op_getbuffer;
  heap->as_buffer.bf_releasebuffer = nullptr;  // the view's obj is an ExportToken (leases.h)

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
