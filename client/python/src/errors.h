// Raising ferry's Python exceptions (ferry/_errors.py) from C++: one class
// per libferry status plus the package's own (BufferFreed, BufferInUse,
// Closed). Every raise carries the status name in the class and a message
// saying what failed.
#pragma once

#include <pybind11/pybind11.h>

#include <string>
#include <string_view>

#include "ferry/status.h"

namespace ferry::py {

// Looks the classes up once (module import).
void init_errors();
// Throws pybind11::error_already_set with the status's exception set.
[[noreturn]] void raise(Status s, const std::string& message);
[[noreturn]] void raise(std::string_view error_class, const std::string& message);
// Sets the exception without throwing (for CPython slots that return -1).
void set_error(std::string_view error_class, const std::string& message);
// Raises when s is not Ok.
inline void check(Status s, const std::string& what) {
  if (s != Status::Ok) raise(s, what + ": " + std::string(to_string(s)));
}

}  // namespace ferry::py
