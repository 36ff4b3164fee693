// Error: why a control-path step failed — a Status for the program to act
// on and a message for the person reading the log or the command line. A
// default Error is no error. It is the one way to return a reason (no
// optional or empty string standing for success or failure): a function
// that can fail with a reason and has nothing else to return returns
// Error; one that has a value returns Result<T> (status only, the public
// form) or fills an out-parameter and returns Error. [[nodiscard]] like
// Status and Result.
#pragma once

#include <string>
#include <utility>

#include "ferry/status.h"

namespace ferry {

class [[nodiscard]] Error {
 public:
  Error() noexcept = default;
  Error(Status status, std::string message) : status_(status), message_(std::move(message)) {}

  // A failure whose Status says only "this input is wrong" (configuration,
  // arguments); the message says which and why.
  static Error bad_request(std::string message) { return Error(Status::BadRequest, std::move(message)); }

  bool failed() const noexcept { return status_ != Status::Ok; }
  bool ok() const noexcept { return status_ == Status::Ok; }
  Status status() const noexcept { return status_; }
  // Empty when ok().
  const std::string& message() const noexcept { return message_; }

 private:
  Status status_ = Status::Ok;
  std::string message_;
};

}  // namespace ferry
