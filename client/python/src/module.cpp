// ferry._ferry: the compiled part of the ferry Python package (libferry's
// client, buffers and deliveries, and the parameter-server library as
// ferry._ferry.ps). The package's pure-Python modules build on it.
#include <pybind11/pybind11.h>

#include "errors.h"
#include "ferry_config.h"
#include "leases.h"
#include "py_ps.h"

namespace ferry::py {
void bind_client(pybind11::module_& m);
}

PYBIND11_MODULE(_ferry, m) {
  m.doc() = "ferry's compiled core: libferry (attach, buffers, calls) and the parameter-server library";
  m.attr("__version__") = FERRY_VERSION;
  ferry::py::init_errors();
  ferry::py::bind_leases(m);
  ferry::py::bind_client(m);
  auto ps = m.def_submodule("ps", "the parameter-server library (ferry/ps/)");
  ferry::py::bind_ps_tables(ps);
  ferry::py::bind_ps_worker(ps);
  ferry::py::bind_ps_bag(ps);
}
