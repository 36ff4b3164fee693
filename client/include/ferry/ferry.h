/* libferry C API for bindings: a thin layer over ferry::Client (client.h).
 * Every call returns a ferry status code (enum ferry_status: FERRY_OK = 0,
 * the values of ferry::Status) unless it says otherwise. Not thread safe:
 * one owner thread per ferry_client, like ferry::Client. */
#ifndef FERRY_FERRY_H
#define FERRY_FERRY_H

#include <stddef.h>
#include <stdint.h>

#include "ferry/visibility.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Status codes: what calls return and ferry_completion.status carries.
 * Part of the ABI (the same numbers travel in the shared-memory rings and
 * on the wire): appended to, never renumbered. c_api.cpp ties each one to
 * ferry::Status at compile time. */
enum ferry_status {
  FERRY_OK = 0,
  FERRY_BAD_REQUEST = 1,        /* malformed or out-of-range argument */
  FERRY_NO_MEMORY = 2,          /* arena or quota exhausted */
  FERRY_SERVICE_NOT_FOUND = 3,  /* no service of that name at the target daemon */
  FERRY_SERVICE_EXISTS = 4,     /* another client already serves that name */
  FERRY_ENDPOINT_CLOSED = 5,    /* operation on a closed or unknown endpoint */
  FERRY_RESPONSE_TOO_LARGE = 6, /* the response did not fit the caller's buffer */
  FERRY_PEER_UNREACHABLE = 7,   /* could not reach the remote daemon in time */
  FERRY_PEER_RESET = 8,         /* the remote daemon died or restarted mid-operation */
  FERRY_SERVICE_GONE = 9,       /* the serving process went away mid-call */
  FERRY_CALLER_GONE = 10,       /* reply to a caller that no longer exists */
  FERRY_DAEMON_GONE = 11,       /* the local ferryd went away */
  FERRY_TIMEOUT = 12,           /* the operation's deadline passed */
  FERRY_NOT_SUPPORTED = 13,     /* the transport or daemon lacks the operation */
  FERRY_BUSY = 14,              /* back-pressure: retry later */
  FERRY_PROTOCOL_ERROR = 15,    /* the daemon or a peer broke the protocol */
  FERRY_CANCELLED = 16,         /* endpoint closed, client detached or daemon draining */
  FERRY_VERSION_MISMATCH = 17,  /* ABI or protocol version not supported */
  FERRY_PERMISSION_DENIED = 18, /* credentials or authentication rejected */
  FERRY_FORKED = 19,            /* a client inherited through fork(): attach anew in the child */
  FERRY_STATUS_MAX = FERRY_FORKED
};

/* ferry_completion.op of a FERRY_OP_DONE completion: which operation finished. */
enum ferry_op_kind {
  FERRY_OP_NOP = 0,
  FERRY_OP_SERVE = 1,
  FERRY_OP_UNSERVE = 2,
  FERRY_OP_OPEN = 3,
  FERRY_OP_CLOSE = 4,
  FERRY_OP_SEND = 5,
  FERRY_OP_CALL = 6,
  FERRY_OP_REPLY = 7,
  FERRY_OP_RELEASE_RX = 8
};

typedef struct ferry_client ferry_client;

typedef struct ferry_buffer {
  void* data; /* NULL when allocation failed */
  uint32_t capacity;
  uint64_t offset;
} ferry_buffer;

enum ferry_completion_kind { FERRY_OP_DONE = 0, FERRY_MESSAGE = 1, FERRY_REQUEST = 2 };

typedef struct ferry_completion {
  uint8_t kind;   /* enum ferry_completion_kind */
  uint8_t status; /* OpDone: how it finished (enum ferry_status) */
  uint8_t op;     /* OpDone: which operation (enum ferry_op_kind) */
  uint8_t reserved0;
  uint32_t handle;
  uint64_t user_data;
  uint32_t length;
  uint32_t rx_capacity;
  const void* data; /* Message/Request: the payload, valid until ferry_release */
  uint64_t token;
  uint64_t source;
  uint64_t rx_offset; /* Message/Request: its rx block; 0 (and rx_capacity 0) for one that came inline */
} ferry_completion;

/* Levels of libferry's messages about a client (ferry::LogLevel). */
enum ferry_log_level {
  FERRY_LOG_DEFAULT = 0, /* $FERRY_LOG_LEVEL (debug, info, warn, error, off), else FERRY_LOG_ERROR */
  FERRY_LOG_DEBUG = 1,
  FERRY_LOG_INFO = 2,
  FERRY_LOG_WARN = 3,
  FERRY_LOG_ERROR = 4,
  FERRY_LOG_OFF = 5
};

/* Receives one message (NUL-terminated, valid during the call) at or above
 * the client's level, on the thread inside a ferry_* call of that client;
 * it must not call back into that client. */
typedef void (*ferry_log_fn)(void* context, int level, const char* message);

typedef struct ferry_attach_options {
  const char* socket_path; /* NULL: $FERRY_SOCKET, else /run/ferry/ferryd.sock */
  const char* name;        /* may be NULL */
  uint64_t tx_bytes;       /* 0: daemon default */
  uint64_t rx_bytes;
  uint32_t sq_entries;
  uint32_t cq_entries;
  ferry_log_fn log;  /* NULL: one line "ferry: LEVEL: MESSAGE" on stderr */
  void* log_context; /* passed to log */
  int log_level;     /* enum ferry_log_level; 0: FERRY_LOG_DEFAULT */
} ferry_attach_options;

/* options may be NULL. On success *out is the new client. */
FERRY_API int ferry_attach(const ferry_attach_options* options, ferry_client** out);
FERRY_API void ferry_detach(ferry_client* client);

/* out->data is NULL when the arena is full (returns FERRY_NO_MEMORY). */
FERRY_API int ferry_alloc(ferry_client* client, size_t bytes, ferry_buffer* out);
/* A tx block past ferry_alloc's largest (1 MiB): whole arena slabs side by
 * side, where the responses of several calls land next to each other (give
 * each call a part of it as its response buffer: offset and data advanced
 * together). Never sent as one message. FERRY_NO_MEMORY (out->data NULL)
 * past half the tx arena, when less than an eighth of the arena (2 MiB at
 * least) would stay free beside it, or when no run of free slabs is that
 * long. Freed with ferry_free. */
FERRY_API int ferry_alloc_span(ferry_client* client, size_t bytes, ferry_buffer* out);
FERRY_API int ferry_free(ferry_client* client, const ferry_buffer* buffer);

FERRY_API int ferry_serve(ferry_client* client, const char* service, int timeout_ms, uint32_t* service_id);
FERRY_API int ferry_unserve(ferry_client* client, uint32_t service_id, int timeout_ms);
FERRY_API int ferry_open(ferry_client* client, const char* target, int timeout_ms, uint32_t* endpoint_id);
FERRY_API int ferry_close(ferry_client* client, uint32_t endpoint_id, int timeout_ms);

FERRY_API int ferry_send(ferry_client* client, uint32_t endpoint, const ferry_buffer* message, uint32_t length,
                         uint64_t user_data);
/* response may be NULL (no response bytes expected). */
FERRY_API int ferry_call(ferry_client* client, uint32_t endpoint, const ferry_buffer* request, uint32_t length,
                         const ferry_buffer* response, uint64_t user_data);
/* ferry_call with how long the call may wait at the server's daemon for its reply
   (0: ferryd's call-timeout-ms; at most 3600000); past it the call completes
   status FERRY_TIMEOUT. */
FERRY_API int ferry_call_timeout(ferry_client* client, uint32_t endpoint, const ferry_buffer* request, uint32_t length,
                                 const ferry_buffer* response, uint64_t user_data, uint32_t timeout_ms);
/* response may be NULL when length is 0. */
FERRY_API int ferry_reply(ferry_client* client, uint64_t token, const ferry_buffer* response, uint32_t length,
                          uint64_t user_data);
FERRY_API void ferry_release(ferry_client* client, const ferry_completion* delivery);

/* Return the number of completions copied to out (not a status). */
FERRY_API size_t ferry_poll(ferry_client* client, ferry_completion* out, size_t max);
FERRY_API size_t ferry_wait(ferry_client* client, ferry_completion* out, size_t max, int timeout_ms);
FERRY_API int ferry_event_fd(const ferry_client* client);
/* Nonzero: ferry_poll on an empty CQ asks the daemon for no doorbell (for a
 * client that spins on ferry_poll; ferry_wait still sleeps and wakes). Do
 * not block on ferry_event_fd while it is set. Returns FERRY_OK or
 * FERRY_BAD_REQUEST (NULL client). */
FERRY_API int ferry_set_busy_poll(ferry_client* client, int on);
/* FERRY_OK while attached, FERRY_DAEMON_GONE after the daemon hung up,
 * FERRY_BAD_REQUEST for a NULL client. */
FERRY_API int ferry_state(const ferry_client* client);

/* Static NUL-terminated name of a status code ("Unknown" if out of range). */
FERRY_API const char* ferry_status_string(int status);

#ifdef __cplusplus
}
#endif

#endif /* FERRY_FERRY_H */
