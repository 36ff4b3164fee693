#include "errors.h"

#include <string>
#include <unordered_map>

namespace ferry::py {

namespace pyb = pybind11;

namespace {

// name -> exception class, filled once at import: raising must not call
// into Python (a buffer slot may raise while another error is pending).
std::unordered_map<std::string, PyObject*>& classes() {
  static auto* map = new std::unordered_map<std::string, PyObject*>();  // lives to exit, like the classes
  return *map;
}

}  // namespace

void init_errors() {
  const pyb::module_ errors = pyb::module_::import("ferry._errors");
  for (const auto item : errors.attr("__dict__").cast<pyb::dict>()) {
    const pyb::handle v = item.second;
    if (PyType_Check(v.ptr()) && PyObject_IsSubclass(v.ptr(), errors.attr("Error").ptr()) == 1)
      classes()[item.first.cast<std::string>()] = pyb::reinterpret_borrow<pyb::object>(v).release().ptr();
  }
}

void set_error(std::string_view name, const std::string& message) {
  auto& map = classes();
  auto it = map.find(std::string(name));
  if (it == map.end()) it = map.find("Error");
  PyErr_SetString(it != map.end() ? it->second : PyExc_RuntimeError, message.c_str());
}

void raise(std::string_view name, const std::string& message) {
  set_error(name, message);
  throw pyb::error_already_set();
}

void raise(Status s, const std::string& message) { raise(to_string(s), message); }

}  // namespace ferry::py
