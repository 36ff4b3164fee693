/* hello.c: the same with the C API. */
#include <ferry/ferry.h>
#include <stdio.h>
#include <string.h>

static int fail(const char* what, int status) {
  fprintf(stderr, "%s: %s\n", what, ferry_status_string(status));
  return 1;
}

int main(void) {
  ferry_attach_options options = {.name = "hello-c"};
  ferry_client* client;
  uint32_t service, endpoint;
  int s = ferry_attach(&options, &client);
  if (s != FERRY_OK) return fail("attach", s);
  if ((s = ferry_serve(client, "hello", 10000, &service)) != FERRY_OK) return fail("serve", s);
  if ((s = ferry_open(client, "hello", 10000, &endpoint)) != FERRY_OK) return fail("open", s);

  ferry_buffer request, response, answer;
  if ((s = ferry_alloc(client, 64, &request)) || (s = ferry_alloc(client, 64, &response)) ||
      (s = ferry_alloc(client, 64, &answer)))
    return fail("alloc", s);
  memcpy(request.data, "hello, ferry", 12);
  if ((s = ferry_call(client, endpoint, &request, 12, &response, 1)) != FERRY_OK) return fail("call", s);

  ferry_completion done[8];
  for (int turn = 0; turn < 100; ++turn) { /* at most 10 s */
    size_t n = ferry_wait(client, done, 8, 100);
    for (size_t i = 0; i < n; ++i) {
      const ferry_completion* c = &done[i];
      if (c->kind == FERRY_REQUEST) { /* a call to our service: echo it */
        uint32_t length = c->length < answer.capacity ? c->length : answer.capacity;
        memcpy(answer.data, c->data, length);
        ferry_release(client, c); /* hands the request's rx block back to ferryd */
        if ((s = ferry_reply(client, c->token, &answer, length, 2)) != FERRY_OK) return fail("reply", s);
      } else if (c->status != FERRY_OK) {
        return fail(c->user_data == 1 ? "call" : "reply", c->status);
      } else if (c->user_data == 1) { /* our call is done; the answer is in `response` */
        printf("%.*s\n", (int)c->length, (const char*)response.data);
        ferry_detach(client);
        return 0;
      }
    }
  }
  return fail("wait", FERRY_TIMEOUT);
}
