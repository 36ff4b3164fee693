// The ferry._ferry.ps submodule's parts (py_ps_shard.cpp: tables and shard
// servers; py_ps_worker.cpp: workers, and py_ps_op.cpp: their operations,
// whose failures py_ps_messages.h words; py_ps_bag.cpp: the embedding bag's
// gradient for ferry.ps.torch).
#pragma once

#include <pybind11/pybind11.h>

#include "py_arrays.h"

namespace ferry::py {

// The arrays the ps functions take: C order, converted when they are not (py_arrays.h).
using F32 = Floats;
using I64 = Keys;

void bind_ps_tables(pybind11::module_& ps);
void bind_ps_worker(pybind11::module_& ps);
void bind_ps_bag(pybind11::module_& ps);

}  // namespace ferry::py
