// A recorded lane Hello, replayed, must not pass shared-secret
// authentication. A dials B through a TCP proxy in this
// process that records every frame of every connection. Once calls have
// flowed, this process replays the lane's recorded Hello on a new
// connection of its own to B, with the rejoin flag and the ack B's last
// message on the lane carried, then sends a Call copied from the lane with
// the next lane_seq. B must refuse the Hello (PermissionDenied), deliver no
// Call, keep the live lane (no lane break, no rebuild), and A's next calls
// on the endpoint it already had must succeed. On a daemon whose lane proof
// is not bound to its connection, B answers HelloAck Ok, drops the live
// lane for the replayed one and serves the forged Call.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <thread>

#include "base/json.h"
#include "tests/integration/traffic.h"
#include "tests/multihost/cluster.h"
#include "tests/multihost/status_json.h"
#include "transport/wire/header.h"
#include "transport/wire/msg_type.h"

using namespace ferry;
using namespace ferry::itest;
using namespace ferry::mhtest;

namespace {

using Bytes = std::vector<std::uint8_t>;

std::uint32_t le32(const std::uint8_t* p) { return p[0] | p[1] << 8 | p[2] << 16 | std::uint32_t{p[3]} << 24; }
std::uint64_t le64(const std::uint8_t* p) { return le32(p) | std::uint64_t{le32(p + 4)} << 32; }
void put32(std::uint8_t* p, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<std::uint8_t>(v >> (8 * i));
}

std::uint64_t counter(const Node& n, const char* name) {
  const auto s = status_json(n);
  return s ? mhtest::counter(*s, name) : ~std::uint64_t{0};
}

int dial(std::uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port);
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Splits one direction's byte stream into frames.
struct FrameSplitter {
  Bytes buf;
  template <typename F>
  void feed(const std::uint8_t* p, std::size_t n, F&& on_frame) {
    buf.insert(buf.end(), p, p + n);
    std::size_t off = 0;
    while (buf.size() - off >= wire::kHeaderBytes) {
      const std::size_t len = wire::kHeaderBytes + le32(buf.data() + off + wire::kOffPayloadLen);
      if (buf.size() - off < len) break;
      on_frame(Bytes(buf.begin() + static_cast<long>(off), buf.begin() + static_cast<long>(off + len)));
      off += len;
    }
    buf.erase(buf.begin(), buf.begin() + static_cast<long>(off));
  }
};

// What the proxy saw on the lane (the connection whose Hello has token 1).
struct LaneRecord {
  Bytes hello;              // the dialer's lane Hello, as sent
  Bytes call;               // the last Call the dialer sent on it
  std::uint32_t a_seq = 0;  // last lane_seq A -> B
  std::uint32_t b_seq = 0;  // last lane_seq B -> A
};

// A TCP proxy between A and B's peer port, recording frames.
class Proxy {
 public:
  explicit Proxy(std::uint16_t to) : to_(to) {
    lfd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    REQUIRE(lfd_ >= 0);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::bind(lfd_, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0);
    REQUIRE(::listen(lfd_, 16) == 0);
    socklen_t len = sizeof sa;
    REQUIRE(::getsockname(lfd_, reinterpret_cast<sockaddr*>(&sa), &len) == 0);
    port_ = ntohs(sa.sin_port);
    thread_ = std::thread([this] { loop(); });
  }
  ~Proxy() {
    stop_ = true;
    thread_.join();
    for (auto& p : pairs_) {
      ::close(p.a);
      ::close(p.b);
    }
    ::close(lfd_);
  }
  std::uint16_t port() const { return port_; }
  LaneRecord lane() {
    std::lock_guard<std::mutex> g(mu_);
    return lane_;
  }

 private:
  struct Pair {
    int a = -1, b = -1;
    FrameSplitter from_a, from_b;
    std::uint64_t token = 0;  // from the first Hello A sent
    bool seen_hello = false;
  };

  void on_a_frame(Pair& p, const Bytes& f) {
    const auto type = static_cast<wire::MsgType>(f[wire::kOffType]);
    std::lock_guard<std::mutex> g(mu_);
    if (!p.seen_hello && type == wire::MsgType::Hello) {
      p.seen_hello = true;
      p.token = le64(f.data() + wire::kOffToken);
      if (p.token == 1 && lane_.hello.empty()) lane_.hello = f;
    }
    if (p.token != 1) return;
    const std::uint32_t seq = le32(f.data() + wire::kOffLaneSeq);
    if (seq != 0) lane_.a_seq = seq;
    if (type == wire::MsgType::Call) lane_.call = f;
  }
  void on_b_frame(Pair& p, const Bytes& f) {
    std::lock_guard<std::mutex> g(mu_);
    if (p.token != 1) return;
    const std::uint32_t seq = le32(f.data() + wire::kOffLaneSeq);
    if (seq != 0) lane_.b_seq = seq;
  }

  void loop() {
    std::uint8_t buf[65536];
    while (!stop_) {
      std::vector<pollfd> fds{{lfd_, POLLIN, 0}};
      for (auto& p : pairs_) {
        fds.push_back({p.a, POLLIN, 0});
        fds.push_back({p.b, POLLIN, 0});
      }
      if (::poll(fds.data(), fds.size(), 50) <= 0) continue;
      if ((fds[0].revents & POLLIN) != 0) {
        const int a = ::accept4(lfd_, nullptr, nullptr, SOCK_CLOEXEC);
        const int b = a >= 0 ? dial(to_) : -1;
        if (a >= 0 && b >= 0) {
          pairs_.emplace_back();
          pairs_.back().a = a;
          pairs_.back().b = b;
        } else if (a >= 0) {
          ::close(a);
        }
        continue;  // the pair list changed: poll again
      }
      for (std::size_t i = 0; i < pairs_.size(); ++i) {
        Pair& p = pairs_[i];
        for (int side = 0; side < 2; ++side) {
          const pollfd& pf = fds[1 + 2 * i + static_cast<std::size_t>(side)];
          if ((pf.revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
          const int from = side == 0 ? p.a : p.b, to = side == 0 ? p.b : p.a;
          const ssize_t n = ::recv(from, buf, sizeof buf, MSG_DONTWAIT);
          if (n <= 0) {
            ::shutdown(to, SHUT_WR);
            continue;
          }
          (void)!::send(to, buf, static_cast<std::size_t>(n), MSG_NOSIGNAL);
          if (side == 0) {
            p.from_a.feed(buf, static_cast<std::size_t>(n), [&](const Bytes& f) { on_a_frame(p, f); });
          } else {
            p.from_b.feed(buf, static_cast<std::size_t>(n), [&](const Bytes& f) { on_b_frame(p, f); });
          }
        }
      }
    }
  }

  std::uint16_t to_;
  std::uint16_t port_ = 0;
  int lfd_ = -1;
  std::atomic<bool> stop_{false};
  std::vector<Pair> pairs_;  // the proxy thread's only
  std::mutex mu_;
  LaneRecord lane_;
  std::thread thread_;
};

std::string st(Status s) { return std::string(to_string(s)); }

// Calls on an open endpoint; 0 when all verify.
int calls(Client& c, EndpointId ep, int n, std::uint64_t first_id) {
  Buffer req = c.alloc(1000), resp = c.alloc(1000);
  for (int k = 0; k < n; ++k) {
    const std::uint64_t id = first_id + static_cast<std::uint64_t>(k);
    fill_payload(req.data, 1000, 3, id);
    const Completion r = call_once(c, ep, req, 1000, resp, id);
    if (r.status != Status::Ok || !check_payload(resp.data, 1000, 3, id))
      return fail(3, "call %llu: %s", static_cast<unsigned long long>(id), st(r.status).c_str());
  }
  return 0;
}

struct Reply {
  bool hello_ack = false;
  Status status = Status::Ok;
  bool closed = false;
};

// Reads B's frames on our connection until a HelloAck or EOF (bounded).
Reply read_reply(int fd, std::chrono::milliseconds within) {
  Reply r;
  FrameSplitter in;
  const auto deadline = Clock::now() + within;
  std::uint8_t buf[4096];
  while (!r.hello_ack && !r.closed && Clock::now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 50) != 1) continue;
    const ssize_t n = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n <= 0) {
      r.closed = true;
      break;
    }
    in.feed(buf, static_cast<std::size_t>(n), [&](const Bytes& f) {
      if (static_cast<wire::MsgType>(f[wire::kOffType]) != wire::MsgType::HelloAck || r.hello_ack) return;
      r.hello_ack = true;
      r.status = static_cast<Status>(f[wire::kOffStatus]);
    });
  }
  return r;
}

}  // namespace

TEST_CASE("lane replay: a recorded lane Hello replayed as a rejoin is refused; the live lane and its calls go on") {
  char tmpl[] = "/tmp/ferry-replay-XXXXXX";
  REQUIRE(::mkdtemp(tmpl) != nullptr);
  const std::string dir = tmpl;
  const std::string secret = dir + "/peer.secret";
  std::ofstream(secret) << "ferry-replay-test-secret-0123456789\n";
  ::chmod(secret.c_str(), 0600);

  DaemonFlags flags;
  flags.channel_conns = 1;
  flags.extra_args = {"--auth-secret-file", secret};
  Cluster cl(2, NetMode::Loopback, flags);
  const Node& a = cl.node(0);
  const Node& b = cl.node(1);
  Proxy proxy(b.port);
  const std::string via = "127.0.0.1:" + std::to_string(proxy.port()) + "/echo";
  INFO("A " << a.listen() << ", B " << b.listen() << ", proxy to B on " << proxy.port());

  Gate ready, stop, phase1, attacked;
  const pid_t server = cl.spawn_on(1, [&] { return run_rpc_server({b.socket()}, ready, stop); });
  REQUIRE(ready.wait(10s));
  const pid_t client = cl.spawn_on(0, [&]() -> int {
    auto c = attach_retry(a.socket(), "replay");
    if (!c) return fail(1, "attach");
    auto ep = c->open(via, 10s);
    if (!ep) return fail(2, "open %s: %s", via.c_str(), st(ep.status).c_str());
    if (const int rc = calls(*c, ep.value, 20, 1); rc != 0) return rc;
    phase1.signal();
    if (!attacked.wait(20s)) return fail(6, "no attack");
    return calls(*c, ep.value, 20, 1000);  // the same endpoint, over the lane that was up before
  });
  REQUIRE(phase1.wait(20s));
  std::this_thread::sleep_for(200ms);  // the lane's last acks and credits pass the proxy
  const LaneRecord rec = proxy.lane();
  REQUIRE(rec.hello.size() >= wire::kHeaderBytes);
  REQUIRE(rec.call.size() >= wire::kHeaderBytes);
  const std::uint64_t delivered_before = counter(b, "remote_delivered");
  const std::uint64_t breaks_before = counter(b, "lane_breaks");
  const std::uint64_t auth_failures_before = counter(b, "peer_auth_failures");
  INFO("lane_seq A->B " << rec.a_seq << ", B->A " << rec.b_seq << "; B delivered " << delivered_before);

  // The replay: the recorded Hello as a rejoin claiming what A really got.
  Bytes hello = rec.hello;
  hello[wire::kOffFlags] |= wire::kFlagRetransmit;
  put32(hello.data() + wire::kOffAck, rec.b_seq);
  Bytes call = rec.call;
  put32(call.data() + wire::kOffLaneSeq, rec.a_seq + 1);
  put32(call.data() + wire::kOffAck, rec.b_seq);
  const int fd = dial(b.port);
  REQUIRE(fd >= 0);
  REQUIRE(::send(fd, hello.data(), hello.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(hello.size()));
  const Reply reply = read_reply(fd, 3s);
  (void)!::send(fd, call.data(), call.size(), MSG_NOSIGNAL);  // behind it, a forged Call
  std::this_thread::sleep_for(500ms);
  ::close(fd);
  attacked.signal();

  const int rc = reap(client, 40s);
  INFO("replayed Hello: " << (reply.hello_ack ? "HelloAck " + st(reply.status) : "no HelloAck")
                          << (reply.closed ? ", closed" : ""));
  INFO("B log:\n" << cl.log_tail(1, 6000) << "\nA log:\n" << cl.log_tail(0, 3000));
  CHECK(reply.hello_ack);
  CHECK(reply.status == Status::PermissionDenied);
  CHECK(rc == 0);  // A's calls after the attack, on the live lane
  // Exactly A's 20 calls after the attack reached B's server: not the forged one.
  CHECK(counter(b, "remote_delivered") == delivered_before + 20);
  CHECK(counter(b, "lane_breaks") == breaks_before);
  CHECK(counter(b, "peer_auth_failures") == auth_failures_before + 1);
  CHECK(cl.log_tail(1, 64 * 1024).find("replaced the lane's connection") == std::string::npos);

  stop.signal();
  CHECK(reap(server, 10s) == 0);
  CHECK(cl.alive(0));
  CHECK(cl.alive(1));
  std::system(("rm -rf '" + dir + "'").c_str());
}
