// Result<T>: a status and, when the status is Ok, a value. The control-path
// return type of libferry (no exceptions after start-up). [[nodiscard]] like
// Status: a result nobody looks at is a compile error under -Werror. The
// layout (status, then value) is part of libferry's C++ ABI.
#pragma once

#include <utility>

#include "ferry/status.h"

namespace ferry {

template <typename T>
class [[nodiscard]] Result {
 public:
  Status status = Status::Ok;
  T value{};

  static Result ok(T v) { return Result{Status::Ok, std::move(v)}; }
  static Result fail(Status s) { return Result{s, T{}}; }
  bool has_value() const noexcept { return status == Status::Ok; }
  explicit operator bool() const noexcept { return has_value(); }
};

}  // namespace ferry
