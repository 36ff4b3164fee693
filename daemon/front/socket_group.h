// socket-group: hand the client and control sockets to an admin-chosen
// group (mode stays 0660) so its members can attach and run ferryctl
// without root. Start-up only.
#pragma once

#include <string>

#include "ferry/error.h"

namespace ferry::daemon {

// chgrp `path` to `group` (empty: nothing to do). The message is for the log.
Error apply_socket_group(const std::string& path, const std::string& group);

}  // namespace ferry::daemon
