// ferry._ferry.ps.Op: a parameter-server operation of a Worker
// (py_ps_worker.cpp). Waiting releases the GIL and lets Ctrl-C through; a
// completed pull lends its rows through the buffer protocol
// (torch.frombuffer(op, dtype=torch.float32) is a view of the response block
// in the tx arena: zero copy). The ticket is released when the Op object
// dies, which cannot happen while a view holds it; an explicit release()
// refuses while views are alive.
#include "py_ps_op.h"

#include <poll.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cmath>
#include <thread>

#include "client_core.h"
#include "errors.h"
#include "leases.h"
#include "py_arrays.h"
#include "py_ps_messages.h"

namespace ferry::py {

namespace pyb = pybind11;
using namespace pybind11::literals;

PsOp::~PsOp() {
  if (released || !core) return;
  auto lk = lock_from_python(core->mu);
  if (core->worker) core->worker->release(ticket);
}

ps::Worker& live(WorkerCore& c) {
  if (!c.worker) raise("Closed", "the worker is closed");
  return *c.worker;
}

std::string failure(const WorkerCore& c, ps::Ticket t, const char* what) {
  return failed_message(c.worker->error(t), what, c.target, c.prefix);
}

namespace {

constexpr auto kSlice = std::chrono::milliseconds(50);

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

}  // namespace

// The ops are usually all this worker's; a ferry.ps.Worker attached again
// after its ferryd restarted leaves its earlier ones on the core before.
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

namespace {

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

}  // namespace

void bind_ps_op(pyb::module_& ps) {
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
}

}  // namespace ferry::py
