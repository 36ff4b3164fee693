#include "py_arrays.h"

#include <string_view>
#include <utility>

namespace ferry::py {

namespace pyb = pybind11;

namespace {

template <typename T>
struct Kind;
template <>
struct Kind<float> {
  static constexpr const char* dtype = "float32";
  static bool format(std::string_view f) { return f == "f"; }
};
template <>
struct Kind<std::int64_t> {
  static constexpr const char* dtype = "int64";
  static bool format(std::string_view f) { return f == "l" || f == "q"; }  // C long or long long, 8 bytes
};
template <>
struct Kind<std::uint32_t> {
  static constexpr const char* dtype = "uint32";
};

// Strides of C order (those of length-1 dimensions do not matter).
bool c_contiguous(const pyb::buffer_info& b) {
  pyb::ssize_t expect = b.itemsize;
  for (pyb::ssize_t i = b.ndim - 1; i >= 0; --i) {
    const auto d = static_cast<std::size_t>(i);
    if (b.shape[d] > 1 && b.strides[d] != expect) return false;
    expect *= b.shape[d];
  }
  return true;
}

template <typename T>
bool usable(pyb::handle src, pyb::buffer_info* out) {
  if (!PyObject_CheckBuffer(src.ptr())) return false;
  pyb::buffer_info b;
  try {
    b = pyb::reinterpret_borrow<pyb::buffer>(src).request();
  } catch (const pyb::error_already_set&) {
    return false;  // an exporter that refuses (strides or format asked of it)
  }
  if (b.itemsize != static_cast<pyb::ssize_t>(sizeof(T)) || !Kind<T>::format(b.format) || !c_contiguous(b))
    return false;
  *out = std::move(b);
  return true;
}

pyb::object numpy_attr(const char* name) { return pyb::module_::import("numpy").attr(name); }

}  // namespace

template <typename T>
bool Array<T>::load(pyb::handle src, bool convert) {
  if (usable<T>(src, &info_)) {
    owner_ = pyb::reinterpret_borrow<pyb::object>(src);
    return true;
  }
  if (!convert) return false;
  pyb::object copy;
  try {
    copy = numpy_attr("ascontiguousarray")(src, pyb::arg("dtype") = Kind<T>::dtype);
  } catch (const pyb::error_already_set&) {
    return false;  // not convertible: pybind11 reports the arguments it could not take
  }
  if (!usable<T>(copy, &info_)) return false;
  owner_ = std::move(copy);
  return true;
}

template <typename T>
pyb::object new_array(std::initializer_list<std::size_t> shape, T** data) {
  std::size_t count = 1;
  for (const std::size_t d : shape) count *= d;
  pyb::object bytes = pyb::reinterpret_steal<pyb::object>(
      PyByteArray_FromStringAndSize(nullptr, static_cast<Py_ssize_t>(count * sizeof(T))));
  if (!bytes) throw pyb::error_already_set();
  *data = reinterpret_cast<T*>(PyByteArray_AsString(bytes.ptr()));
  pyb::object flat = numpy_attr("frombuffer")(bytes, pyb::arg("dtype") = Kind<T>::dtype);
  if (shape.size() == 1) return flat;
  pyb::tuple dims(shape.size());
  std::size_t i = 0;
  for (const std::size_t d : shape) dims[i++] = pyb::int_(d);
  return flat.attr("reshape")(dims);
}

template class Array<float>;
template class Array<std::int64_t>;
template pyb::object new_array<float>(std::initializer_list<std::size_t>, float**);
template pyb::object new_array<std::int64_t>(std::initializer_list<std::size_t>, std::int64_t**);
template pyb::object new_array<std::uint32_t>(std::initializer_list<std::size_t>, std::uint32_t**);

}  // namespace ferry::py
