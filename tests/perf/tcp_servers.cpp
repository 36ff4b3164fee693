// The kernel-TCP baselines' servers (the header).
#include "tcp_servers.h"

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>

#include "tcp_socket.h"

namespace ferry::bench {

Error fork_tcp_server(ForkedServer& server, const std::string& listen, ServeConnection serve, std::string* target) {
  std::string bound;
  int lfd = -1;
  if (Error e = tcp_listen(listen, &lfd, &bound); e.failed()) return e;
  Error started = server.start([&](ReadyNotifier& ready) {
    ready.ready(bound);
    const int fd = tcp_accept(lfd);
    ::close(lfd);
    if (fd < 0) return 1;
    const int rc = serve(fd);
    ::close(fd);
    return rc;
  });
  ::close(lfd);
  if (started.failed()) return started;
  return server.wait_ready(std::chrono::seconds(10), target);
}

int serve_tcp_forever(const BenchOptions& options, const char* name, ServeConnection serve) {
  std::string bound;
  int lfd = -1;
  if (const Error e = tcp_listen(options.listen, &lfd, &bound); e.failed()) {
    std::fprintf(stderr, "ferry-bench %s: %s\n", name, e.message().c_str());
    return 1;
  }
  std::printf("listening on %s\n", bound.c_str());
  std::fflush(stdout);
  ::signal(SIGCHLD, SIG_IGN);  // connection processes reap themselves
  for (;;) {
    const int fd = tcp_accept(lfd);
    if (fd < 0) continue;
    // One process per connection, as "one connection per process pair".
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::close(lfd);
      ::_exit(serve(fd));
    }
    ::close(fd);
  }
}

}  // namespace ferry::bench
