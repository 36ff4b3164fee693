// Arrays across the extension's boundary without numpy's C API.
//
// The ps functions take and give numpy arrays. pybind11's numpy support reads
// numpy's dtype struct by its own copy of the layout, and before pybind11
// 2.12 that copy is numpy 1's: under numpy 2 (which moved elsize) every
// dtype's itemsize reads as 0, so an array pybind11 makes has stride 0 and
// holds its first element n times (a pull's index named one row for every
// key). So the extension does without it: arguments come in through the
// Python buffer protocol (a stable ABI numpy exports), converted by numpy's
// own Python API (ascontiguousarray) when they are not C-contiguous of the
// right type; results are bytearrays that numpy.frombuffer wraps. Any numpy
// and any pybind11 then agree on what an array holds.
#pragma once

#include <pybind11/pybind11.h>

#include <cstddef>
#include <cstdint>
#include <initializer_list>

namespace ferry::py {

// A C-contiguous array argument of T: the buffer stays held (and so the
// memory alive and unmoved) as long as this object.
template <typename T>
class Array {
 public:
  [[nodiscard]] const T* data() const { return static_cast<const T*>(info_.ptr); }
  [[nodiscard]] std::size_t size() const { return static_cast<std::size_t>(info_.size); }
  [[nodiscard]] std::size_t ndim() const { return static_cast<std::size_t>(info_.ndim); }
  [[nodiscard]] std::int64_t shape(std::size_t i) const { return info_.shape[i]; }

  // From src when it is a C-contiguous buffer of T; with convert, from
  // numpy.ascontiguousarray(src, dtype) otherwise. False: not an array of T.
  [[nodiscard]] bool load(pybind11::handle src, bool convert);

 private:
  pybind11::object owner_;  // src, or the converted copy
  pybind11::buffer_info info_;
};

using Floats = Array<float>;
using Keys = Array<std::int64_t>;

// A new numpy array of `shape` (C order) and its memory to fill, through
// numpy.frombuffer over a bytearray: float32, int64 or uint32 by T.
template <typename T>
[[nodiscard]] pybind11::object new_array(std::initializer_list<std::size_t> shape, T** data);

// A numpy array holding a copy of count values.
template <typename T>
[[nodiscard]] pybind11::object copy_array(const T* values, std::size_t count) {
  T* out = nullptr;
  pybind11::object a = new_array<T>({count}, &out);
  for (std::size_t i = 0; i < count; ++i) out[i] = values[i];
  return a;
}

}  // namespace ferry::py

namespace pybind11::detail {

template <typename T>
struct type_caster<ferry::py::Array<T>> {
  PYBIND11_TYPE_CASTER(ferry::py::Array<T>, const_name("numpy.ndarray"));
  bool load(handle src, bool convert) { return value.load(src, convert); }
};

}  // namespace pybind11::detail
