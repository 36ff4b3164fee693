/* libferry C API for bindings: a thin layer over ferry::Client (client.h).
 * Every call returns a ferry status code (FERRY_OK = 0; the values of
 * ferry::Status) unless it says otherwise. Not thread safe: one owner thread
 * per ferry_client, like ferry::Client. */
#ifndef FERRY_FERRY_H
#define FERRY_FERRY_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FERRY_OK 0

typedef struct ferry_client ferry_client;

typedef struct ferry_buffer {
  void* data; /* NULL when allocation failed */
  uint32_t capacity;
  uint64_t offset;
} ferry_buffer;

enum ferry_completion_kind { FERRY_OP_DONE = 0, FERRY_MESSAGE = 1, FERRY_REQUEST = 2 };

typedef struct ferry_completion {
  uint8_t kind;   /* enum ferry_completion_kind */
  uint8_t status; /* OpDone: how it finished */
  uint8_t op;     /* OpDone: ferry::OpKind */
  uint8_t reserved0;
  uint32_t handle;
  uint64_t user_data;
  uint32_t length;
  uint32_t rx_capacity;
  const void* data;
  uint64_t token;
  uint64_t source;
  uint64_t rx_offset;
} ferry_completion;

typedef struct ferry_attach_options {
  const char* socket_path; /* NULL: $FERRY_SOCKET, else /run/ferry/ferryd.sock */
  const char* name;        /* may be NULL */
  uint64_t tx_bytes;       /* 0: daemon default */
  uint64_t rx_bytes;
  uint32_t sq_entries;
  uint32_t cq_entries;
} ferry_attach_options;

/* options may be NULL. On success *out is the new client. */
int ferry_attach(const ferry_attach_options* options, ferry_client** out);
void ferry_detach(ferry_client* client);

/* out->data is NULL when the arena is full (returns FERRY NoMemory). */
int ferry_alloc(ferry_client* client, size_t bytes, ferry_buffer* out);
int ferry_free(ferry_client* client, const ferry_buffer* buffer);

int ferry_serve(ferry_client* client, const char* service, int timeout_ms, uint32_t* service_id);
int ferry_unserve(ferry_client* client, uint32_t service_id, int timeout_ms);
int ferry_open(ferry_client* client, const char* target, int timeout_ms, uint32_t* endpoint_id);
int ferry_close(ferry_client* client, uint32_t endpoint_id, int timeout_ms);

int ferry_send(ferry_client* client, uint32_t endpoint, const ferry_buffer* message, uint32_t length,
               uint64_t user_data);
/* response may be NULL (no response bytes expected). */
int ferry_call(ferry_client* client, uint32_t endpoint, const ferry_buffer* request, uint32_t length,
               const ferry_buffer* response, uint64_t user_data);
/* ferry_call with how long the call may wait at the server's daemon for its reply
   (0: ferryd's call-timeout-ms; at most 3600000); past it the call completes
   status Timeout (12). */
int ferry_call_timeout(ferry_client* client, uint32_t endpoint, const ferry_buffer* request, uint32_t length,
                       const ferry_buffer* response, uint64_t user_data, uint32_t timeout_ms);
/* response may be NULL when length is 0. */
int ferry_reply(ferry_client* client, uint64_t token, const ferry_buffer* response, uint32_t length,
                uint64_t user_data);
void ferry_release(ferry_client* client, const ferry_completion* delivery);

/* Return the number of completions copied to out (not a status). */
size_t ferry_poll(ferry_client* client, ferry_completion* out, size_t max);
size_t ferry_wait(ferry_client* client, ferry_completion* out, size_t max, int timeout_ms);
int ferry_event_fd(const ferry_client* client);
/* Nonzero: ferry_poll on an empty CQ asks the daemon for no doorbell (for a
 * client that spins on ferry_poll; ferry_wait still sleeps and wakes). Do
 * not block on ferry_event_fd while it is set. Returns FERRY OK or
 * BadRequest (NULL client). */
int ferry_set_busy_poll(ferry_client* client, int on);
/* FERRY_OK while attached, DaemonGone after the daemon hung up. */
int ferry_state(const ferry_client* client);

/* Static NUL-terminated name of a status code ("Unknown" if out of range). */
const char* ferry_status_string(int status);

#ifdef __cplusplus
}
#endif

#endif /* FERRY_FERRY_H */
