// ops-clients: attaches many real libferry clients from one process, as the
// quota and control-socket tests need (one user taking every client slot,
// one client asking for a huge arena, many clients making `clients` long).
//
//   ops-clients --socket PATH --count N [--uid U --gid G] [--tx-bytes B]
//               [--rx-bytes B] [--name NAME] [--hold-s S]
//
// --uid/--gid: become that user (and group, with no supplementary groups)
// before attaching. For each attach it prints "attach I STATUS" and
// flushes; then "holding K" and keeps the attached clients until stdin
// reaches EOF or --hold-s seconds pass (default 60), then detaches them.
// Exit: 0 (whatever the attaches returned: the test reads the lines),
// 2 usage or a failed setuid.
#include <ferry/client.h>
#include <grp.h>
#include <poll.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  ferry::AttachOptions opts;
  opts.name = "ops-clients";
  long count = 1, uid = -1, gid = -1, hold_s = 60;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    const char* v = argv[i + 1];
    if (a == "--socket") {
      opts.socket_path = v;
    } else if (a == "--count") {
      count = std::atol(v);
    } else if (a == "--uid") {
      uid = std::atol(v);
    } else if (a == "--gid") {
      gid = std::atol(v);
    } else if (a == "--tx-bytes") {
      opts.tx_bytes = std::strtoull(v, nullptr, 10);
    } else if (a == "--rx-bytes") {
      opts.rx_bytes = std::strtoull(v, nullptr, 10);
    } else if (a == "--name") {
      opts.name = v;
    } else if (a == "--hold-s") {
      hold_s = std::atol(v);
    } else {
      std::fprintf(stderr, "ops-clients: unknown option %s\n", a.c_str());
      return 2;
    }
  }
  if (argc % 2 == 0 || count < 1 || count > 10000 || hold_s < 0) {
    std::fprintf(stderr, "usage: ops-clients --socket PATH --count N [--uid U --gid G] [--tx-bytes B] ...\n");
    return 2;
  }
  if (gid >= 0 && (::setgroups(0, nullptr) != 0 || ::setgid(static_cast<gid_t>(gid)) != 0)) {
    std::perror("ops-clients: setgid");
    return 2;
  }
  if (uid >= 0 && ::setuid(static_cast<uid_t>(uid)) != 0) {
    std::perror("ops-clients: setuid");
    return 2;
  }
  std::vector<std::unique_ptr<ferry::Client>> clients;
  for (long i = 0; i < count; ++i) {
    auto c = ferry::Client::attach(opts);
    std::printf("attach %ld %s\n", i, std::string(ferry::to_string(c.status)).c_str());
    std::fflush(stdout);
    if (c) clients.push_back(std::move(c.value));
  }
  std::printf("holding %zu\n", clients.size());
  std::fflush(stdout);
  // Until the test closes our stdin (or the bound passes).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(hold_s);
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    pollfd p{0, POLLIN, 0};
    const int n = ::poll(&p, 1, static_cast<int>(left.count()));
    if (n > 0) {
      char buf[64];
      if (::read(0, buf, sizeof buf) <= 0) break;
    }
  }
  return 0;
}
