// hello: the smallest real libferry program, built by the ops test against
// the *installed* library (pkg-config ferry). It attaches, serves a
// service, opens it, calls it once and prints the reply:
//
//   hello [--socket PATH] [--name SERVICE] [--go-file FILE]
//
// --go-file: attach, serve and open first, then wait (up to 20 s) for FILE
// to exist before calling; the drain test uses it to prove that a client
// attached before `ferryctl drain` keeps working.
// Exit: 0 reply received, 1 a ferry call failed (status printed), 2 usage.
#include <ferry/client.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>

namespace {

int failed(const char* what, ferry::Status s) {
  std::fprintf(stderr, "hello: %s: %s\n", what, std::string(ferry::to_string(s)).c_str());
  return 1;
}

bool wait_for_file(const std::string& path, std::chrono::seconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (::access(path.c_str(), F_OK) != 0) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));  // polling a file another process creates
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  ferry::AttachOptions opts;
  opts.name = "hello";
  std::string service = "hello";
  std::string go_file;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (i + 1 < argc && a == "--socket") {
      opts.socket_path = argv[++i];
    } else if (i + 1 < argc && a == "--name") {
      service = argv[++i];
    } else if (i + 1 < argc && a == "--go-file") {
      go_file = argv[++i];
    } else {
      std::fprintf(stderr, "usage: hello [--socket PATH] [--name SERVICE] [--go-file FILE]\n");
      return 2;
    }
  }

  auto client = ferry::Client::attach(opts);
  if (!client) return failed("attach", client.status);
  ferry::Client& c = *client.value;
  auto served = c.serve(service);
  if (!served) return failed("serve", served.status);
  auto ep = c.open(service);
  if (!ep) return failed("open", ep.status);
  std::printf("attached as client %u, serving and opened '%s'\n", c.client_id(), service.c_str());
  std::fflush(stdout);
  if (!go_file.empty() && !wait_for_file(go_file, std::chrono::seconds(20))) {
    std::fprintf(stderr, "hello: %s never appeared\n", go_file.c_str());
    return 1;
  }

  const char greeting[] = "hello, ferry";
  ferry::Buffer request = c.alloc(sizeof greeting);
  ferry::Buffer response = c.alloc(256);
  if (!request || !response) return failed("alloc", ferry::Status::NoMemory);
  std::memcpy(request.data, greeting, sizeof greeting);
  if (auto s = c.call(ep.value, request, sizeof greeting, response, 7); s != ferry::Status::Ok)
    return failed("call", s);

  // One process plays both sides: answer the request, then see the call finish.
  std::array<ferry::Completion, 16> done;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < deadline) {
    std::size_t n = c.wait(done, std::chrono::milliseconds(100));
    for (std::size_t i = 0; i < n; ++i) {
      const ferry::Completion& d = done[i];
      if (d.kind == ferry::Completion::Kind::Request) {
        std::string text(reinterpret_cast<const char*>(d.data), d.length);
        std::string answer = "reply to '" + std::string(text.c_str()) + "'";
        ferry::Buffer out = c.alloc(answer.size() + 1);
        if (!out) return failed("alloc", ferry::Status::NoMemory);
        std::memcpy(out.data, answer.c_str(), answer.size() + 1);
        c.release(d);
        if (auto s = c.reply(d.token, out, static_cast<std::uint32_t>(answer.size() + 1), 8); s != ferry::Status::Ok)
          return failed("reply", s);
      } else if (d.kind == ferry::Completion::Kind::OpDone && d.op == ferry::OpKind::Call) {
        if (d.status != ferry::Status::Ok) return failed("call completion", d.status);
        std::printf("%s\n", reinterpret_cast<const char*>(response.data));
        return 0;
      }
    }
  }
  std::fprintf(stderr, "hello: no reply within 10 s\n");
  return 1;
}
