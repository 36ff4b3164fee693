// hello.cpp: serves "hello" and calls it through ferryd (both ends in one
// process, for brevity). ferryd's socket: $FERRY_SOCKET or /run/ferry/ferryd.sock.
#include <ferry/client.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

static int fail(const char* what, ferry::Status s) {
  std::fprintf(stderr, "%s: %s\n", what, ferry::to_string(s).data());
  return 1;
}

int main() {
  ferry::AttachOptions options;
  options.name = "hello";  // shown by `ferryctl clients`
  auto attached = ferry::Client::attach(options);
  if (!attached) return fail("attach", attached.status);
  ferry::Client& client = *attached.value;
  auto service = client.serve("hello");
  if (!service) return fail("serve", service.status);
  auto endpoint = client.open("hello");  // on another host: "HOST:PORT/hello"
  if (!endpoint) return fail("open", endpoint.status);

  ferry::Buffer request = client.alloc(64), response = client.alloc(64), answer = client.alloc(64);
  if (!request || !response || !answer) return fail("alloc", ferry::Status::NoMemory);
  std::memcpy(request.data, "hello, ferry", 12);
  if (auto s = client.call(endpoint.value, request, 12, response, 1); s != ferry::Status::Ok) return fail("call", s);

  ferry::Completion done[8];
  for (int turn = 0; turn < 100; ++turn) {  // at most 10 s
    for (std::size_t i = 0, n = client.wait(done, std::chrono::milliseconds(100)); i < n; ++i) {
      const ferry::Completion& c = done[i];
      if (c.kind == ferry::Completion::Kind::Request) {  // a call to our service: echo it
        std::uint32_t length = std::min(c.length, answer.capacity);
        std::memcpy(answer.data, c.data, length);
        client.release(c);  // hands the request's rx block back to ferryd
        if (auto s = client.reply(c.token, answer, length, 2); s != ferry::Status::Ok) return fail("reply", s);
      } else if (c.status != ferry::Status::Ok) {
        return fail(c.user_data == 1 ? "call" : "reply", c.status);
      } else if (c.user_data == 1) {  // our call is done; the answer is in `response`
        std::printf("%.*s\n", int(c.length), reinterpret_cast<const char*>(response.data));
        return 0;
      }
    }
  }
  return fail("wait", ferry::Status::Timeout);
}
