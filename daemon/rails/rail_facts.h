// What status JSON says of a rail that does not change after start-up
// (the changing part is Counters::rails).
#pragma once

#include <string>

namespace ferry::daemon {

struct RailFacts {
  std::string name;     // device
  std::string address;  // local address
  int gid_index = -1;
};

}  // namespace ferry::daemon
