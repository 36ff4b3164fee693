// socket-group: hand the client and control sockets to an admin-chosen
// group (mode stays 0660) so its members can attach and run ferryctl
// without root. Start-up only.
#pragma once

#include <string>

namespace ferry::daemon {

// chgrp `path` to `group` (empty: nothing to do). Error text for the log.
bool apply_socket_group(const std::string& path, const std::string& group, std::string* error);

}  // namespace ferry::daemon
