// Kernel TCP set-up for the tcp-rpc baseline: HOST:PORT parsing,
// listening, connecting, TCP_NODELAY. Set-up only; errors as strings.
#pragma once

#include <string>

namespace ferry::bench {

// Returns a listening fd bound to host:port ("127.0.0.1:0" picks a port),
// or -1 with *error set. *bound gets the actual "HOST:PORT".
int tcp_listen(const std::string& host_port, std::string* bound, std::string* error);
// Connected, TCP_NODELAY fd or -1.
int tcp_connect(const std::string& host_port, std::string* error);
// accept() plus TCP_NODELAY; -1 on error.
int tcp_accept(int listen_fd);

}  // namespace ferry::bench
