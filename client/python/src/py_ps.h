// The ferry._ferry.ps submodule's parts (py_ps_shard.cpp: tables and shard
// servers; py_ps_worker.cpp: workers and their operations; py_ps_bag.cpp:
// the embedding bag's gradient for ferry.ps.torch).
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstdint>

namespace ferry::py {

// The arrays the ps functions take: C order, converted when they are not.
using F32 = pybind11::array_t<float, pybind11::array::c_style | pybind11::array::forcecast>;
using I64 = pybind11::array_t<std::int64_t, pybind11::array::c_style | pybind11::array::forcecast>;

void bind_ps_tables(pybind11::module_& ps);
void bind_ps_worker(pybind11::module_& ps);
void bind_ps_bag(pybind11::module_& ps);

}  // namespace ferry::py
