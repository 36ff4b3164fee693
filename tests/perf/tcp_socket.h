// Kernel TCP set-up for the tcp-rpc baseline: HOST:PORT parsing,
// listening, connecting, TCP_NODELAY. Set-up only; an Error's message is
// for the person running the benchmark.
#pragma once

#include <string>

#include "ferry/error.h"

namespace ferry::bench {

// *fd gets a listening fd bound to host:port ("127.0.0.1:0" picks a port)
// and *bound the actual "HOST:PORT". BadRequest for an address this host
// cannot listen on, PermissionDenied when it may not.
Error tcp_listen(const std::string& host_port, int* fd, std::string* bound);
// *fd gets a connected, TCP_NODELAY fd. PeerUnreachable when nobody
// answers at host:port.
Error tcp_connect(const std::string& host_port, int* fd);
// accept() plus TCP_NODELAY; -1 on error.
int tcp_accept(int listen_fd);

}  // namespace ferry::bench
