// ferry._ferry.ps.bag_grad: the gradient of a sum-mode embedding bag's
// pulled rows, summed in one pass (ferry.ps.torch's _BagSum backward).
//
// The rows' gradient is grad_out[bag(p)] summed over the positions p of
// each row, in the order the caller gives (the permutation that sorts the
// keys, as torch's own dense backward of embedding_bag adds them): the same
// float additions, in the same order, as index_put_(accumulate=True) or
// index_add_ on one thread over the gathered values, so the same bits. In
// torch that takes two gathers, a bag map, a zeroed tensor and the
// accumulate kernel (about 200 us a table of 1,024 ids on the development
// VM); here one loop without the GIL. Every index is checked: a bad one
// raises ferry.BadRequest and writes nothing the caller sees.
#include <pybind11/pybind11.h>

#include <cstdint>
#include <string>
#include <vector>

#include "errors.h"
#include "py_ps.h"

namespace ferry::py {

namespace pyb = pybind11;
using namespace pybind11::literals;

namespace {

// The bag of every position: fixed-length bags (starts empty, per_bag > 0)
// or the bags starting at `starts` (non-decreasing, as embedding_bag's
// offsets): a position's bag is the last whose start is at or before it.
// False when a position falls outside [0, bags).
bool bag_of_positions(const std::int64_t* starts, std::size_t nstarts, std::int64_t per_bag, std::size_t n,
                      std::int64_t bags, std::vector<std::int64_t>& out) {
  out.resize(n);
  if (n == 0) return true;
  if (nstarts == 0) {
    if (per_bag <= 0) return false;
    for (std::size_t p = 0; p < n; ++p) out[p] = static_cast<std::int64_t>(p) / per_bag;
    return out[n - 1] < bags;
  }
  std::size_t j = 0;
  for (std::size_t p = 0; p < n; ++p) {
    while (j < nstarts && starts[j] <= static_cast<std::int64_t>(p)) ++j;
    const std::int64_t b = static_cast<std::int64_t>(j) - 1;
    if (b < 0 || b >= bags) return false;
    out[p] = b;
  }
  return true;
}

pyb::object bag_grad(const I64& order, const I64& index, const I64& starts, std::int64_t per_bag, const F32& grad_out,
                     std::int64_t rows) {
  if (grad_out.ndim() != 2) raise(Status::BadRequest, "bag_grad: grad_out must be [bags, dim]");
  if (order.ndim() != 1 || index.ndim() != 1 || starts.ndim() != 1)
    raise(Status::BadRequest, "bag_grad: order, index and starts must be 1-D");
  const auto n = static_cast<std::size_t>(order.size());
  if (static_cast<std::size_t>(index.size()) != n)
    raise(Status::BadRequest, "bag_grad: order and index differ in length");
  if (rows < 0) raise(Status::BadRequest, "bag_grad: rows must be >= 0");
  const std::int64_t bags = grad_out.shape(0);
  const auto dim = static_cast<std::size_t>(grad_out.shape(1));
  float* o = nullptr;
  pyb::object out = new_array<float>({static_cast<std::size_t>(rows), dim}, &o);
  const std::int64_t* ord = order.data();
  const std::int64_t* idx = index.data();
  const std::int64_t* st = starts.data();
  const auto nstarts = static_cast<std::size_t>(starts.size());
  const float* g = grad_out.data();
  std::string bad;
  {
    pyb::gil_scoped_release unlocked;
    std::fill(o, o + static_cast<std::size_t>(rows) * dim, 0.0f);
    std::vector<std::int64_t> bag;
    if (!bag_of_positions(st, nstarts, per_bag, n, bags, bag)) {
      bad = "bag_grad: a position lies in no bag of grad_out";
    } else {
      for (std::size_t i = 0; i < n; ++i) {
        const std::int64_t p = ord[i];
        if (p < 0 || static_cast<std::size_t>(p) >= n) {
          bad = "bag_grad: order holds a position out of range";
          break;
        }
        const std::int64_t r = idx[p];
        if (r < 0 || r >= rows) {
          bad = "bag_grad: index holds a row out of range";
          break;
        }
        float* dst = o + static_cast<std::size_t>(r) * dim;
        const float* src = g + static_cast<std::size_t>(bag[static_cast<std::size_t>(p)]) * dim;
        for (std::size_t k = 0; k < dim; ++k) dst[k] += src[k];
      }
    }
  }
  if (!bad.empty()) raise(Status::BadRequest, bad);
  return out;
}

}  // namespace

void bind_ps_bag(pyb::module_& ps) {
  ps.def("bag_grad", &bag_grad, "order"_a, "index"_a, "starts"_a, "per_bag"_a, "grad_out"_a, "rows"_a,
         "The pulled rows' gradient of a sum-mode bag: out[index[p]] += grad_out[bag(p)] for p in `order`, "
         "[rows, dim] float32. Bags start at `starts` (empty: every `per_bag` positions).");
}

}  // namespace ferry::py
