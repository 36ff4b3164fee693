// The parts of ferry._ferry.ps shared by the worker (py_ps_worker.cpp) and
// its operations (py_ps_op.cpp): a worker's core, which the Python Worker
// object holds, and an Op, a ticket of that worker's ps::Worker.
#pragma once

#include <pybind11/pybind11.h>

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "ferry/ps/worker.h"

namespace ferry::py {

struct PsOp;

// What a Python Worker holds: its ps::Worker behind one lock.
struct WorkerCore {
  std::mutex mu;
  std::unique_ptr<ps::Worker> worker;   // null once closed
  std::unique_ptr<ps::Worker> retired;  // closed while rows were viewed: detached, mapped until the views die
  int event_fd = -1;
  std::vector<std::weak_ptr<PsOp>> ops;  // to refuse close() while rows are viewed
  std::string target, prefix;            // where the shards are served: messages name them
};

// What a Python Op holds: its worker's core and its ticket.
struct PsOp {
  std::shared_ptr<WorkerCore> core;
  ps::Ticket ticket = 0;
  ps::Op kind = ps::Op::Pull;
  bool released = false;
  int exports = 0;
  ~PsOp();  // releases the ticket unless release() did
};

// The worker, raising ferry.Error Closed once it is closed.
ps::Worker& live(WorkerCore& c);
// The message of a finished operation's failure.
std::string failure(const WorkerCore& c, ps::Ticket t, const char* what);

// Worker.wait_all(): waits for every one of ops (one GIL release per worker
// core they belong to) and raises the first failure in list order.
void wait_all(const std::shared_ptr<WorkerCore>& worker, const std::vector<std::shared_ptr<PsOp>>& ops,
              const pybind11::object& timeout);

// ferry._ferry.ps.Op; bound before the Worker, whose methods take and return it.
void bind_ps_op(pybind11::module_& ps);

}  // namespace ferry::py
