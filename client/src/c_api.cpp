// The C API: converts between the C structs of ferry/ferry.h and the C++
// types of ferry/client.h, nothing more. Control-path allocation failures
// surface as NoMemory rather than exceptions crossing the C boundary.
#include "ferry/ferry.h"

#include <chrono>
#include <new>
#include <string>

#include "ferry/client.h"

struct ferry_client {
  std::unique_ptr<ferry::Client> client;
};

namespace {

int code(ferry::Status s) noexcept { return static_cast<int>(s); }

ferry::Buffer to_buffer(const ferry_buffer* b) noexcept {
  if (b == nullptr) return {};
  return ferry::Buffer{static_cast<std::byte*>(b->data), b->capacity, b->offset};
}

void to_c(const ferry::Completion& c, ferry_completion& out) noexcept {
  out = ferry_completion{};
  out.kind = static_cast<std::uint8_t>(c.kind);
  out.status = static_cast<std::uint8_t>(c.status);
  out.op = static_cast<std::uint8_t>(c.op);
  out.handle = c.handle;
  out.user_data = c.user_data;
  out.length = c.length;
  out.rx_capacity = c.rx_capacity;
  out.data = c.data;
  out.token = c.token;
  out.source = c.source;
  out.rx_offset = c.rx_offset;
}

ferry::Completion from_c(const ferry_completion& c) noexcept {
  ferry::Completion out;
  out.kind = static_cast<ferry::Completion::Kind>(c.kind);
  out.handle = c.handle;
  out.length = c.length;
  out.data = static_cast<const std::byte*>(c.data);
  out.rx_offset = c.rx_offset;
  out.rx_capacity = c.rx_capacity;
  out.token = c.token;
  return out;
}

constexpr std::size_t kBatch = 64;

// The C header's constants are ferry::Status, ferry::OpKind and
// Completion::Kind by another name: one assertion per value, and one that
// the C list ends where the C++ one does (a new Status needs its FERRY_*).
constexpr bool same(int c, ferry::Status s) noexcept { return c == static_cast<int>(s); }
static_assert(same(FERRY_OK, ferry::Status::Ok));
static_assert(same(FERRY_BAD_REQUEST, ferry::Status::BadRequest));
static_assert(same(FERRY_NO_MEMORY, ferry::Status::NoMemory));
static_assert(same(FERRY_SERVICE_NOT_FOUND, ferry::Status::ServiceNotFound));
static_assert(same(FERRY_SERVICE_EXISTS, ferry::Status::ServiceExists));
static_assert(same(FERRY_ENDPOINT_CLOSED, ferry::Status::EndpointClosed));
static_assert(same(FERRY_RESPONSE_TOO_LARGE, ferry::Status::ResponseTooLarge));
static_assert(same(FERRY_PEER_UNREACHABLE, ferry::Status::PeerUnreachable));
static_assert(same(FERRY_PEER_RESET, ferry::Status::PeerReset));
static_assert(same(FERRY_SERVICE_GONE, ferry::Status::ServiceGone));
static_assert(same(FERRY_CALLER_GONE, ferry::Status::CallerGone));
static_assert(same(FERRY_DAEMON_GONE, ferry::Status::DaemonGone));
static_assert(same(FERRY_TIMEOUT, ferry::Status::Timeout));
static_assert(same(FERRY_NOT_SUPPORTED, ferry::Status::NotSupported));
static_assert(same(FERRY_BUSY, ferry::Status::Busy));
static_assert(same(FERRY_PROTOCOL_ERROR, ferry::Status::ProtocolError));
static_assert(same(FERRY_CANCELLED, ferry::Status::Cancelled));
static_assert(same(FERRY_VERSION_MISMATCH, ferry::Status::VersionMismatch));
static_assert(same(FERRY_PERMISSION_DENIED, ferry::Status::PermissionDenied));
static_assert(same(FERRY_FORKED, ferry::Status::Forked));
static_assert(FERRY_STATUS_MAX == ferry::kMaxStatus, "every ferry::Status has its FERRY_* constant");

constexpr bool same(int c, ferry::OpKind k) noexcept { return c == static_cast<int>(k); }
static_assert(same(FERRY_OP_NOP, ferry::OpKind::Nop));
static_assert(same(FERRY_OP_SERVE, ferry::OpKind::Serve));
static_assert(same(FERRY_OP_UNSERVE, ferry::OpKind::Unserve));
static_assert(same(FERRY_OP_OPEN, ferry::OpKind::Open));
static_assert(same(FERRY_OP_CLOSE, ferry::OpKind::Close));
static_assert(same(FERRY_OP_SEND, ferry::OpKind::Send));
static_assert(same(FERRY_OP_CALL, ferry::OpKind::Call));
static_assert(same(FERRY_OP_REPLY, ferry::OpKind::Reply));
static_assert(same(FERRY_OP_RELEASE_RX, ferry::OpKind::ReleaseRx));

static_assert(FERRY_LOG_DEBUG == static_cast<int>(ferry::LogLevel::Debug));
static_assert(FERRY_LOG_INFO == static_cast<int>(ferry::LogLevel::Info));
static_assert(FERRY_LOG_WARN == static_cast<int>(ferry::LogLevel::Warn));
static_assert(FERRY_LOG_ERROR == static_cast<int>(ferry::LogLevel::Error));
static_assert(FERRY_LOG_OFF == static_cast<int>(ferry::LogLevel::Off));

static_assert(FERRY_OP_DONE == static_cast<int>(ferry::Completion::Kind::OpDone));
static_assert(FERRY_MESSAGE == static_cast<int>(ferry::Completion::Kind::Message));
static_assert(FERRY_REQUEST == static_cast<int>(ferry::Completion::Kind::Request));

}  // namespace

extern "C" {

int ferry_attach(const ferry_attach_options* options, ferry_client** out) {
  if (out == nullptr) return code(ferry::Status::BadRequest);
  *out = nullptr;
  try {
    ferry::AttachOptions o;
    if (options != nullptr) {
      if (options->socket_path != nullptr) o.socket_path = options->socket_path;
      if (options->name != nullptr) o.name = options->name;
      o.tx_bytes = options->tx_bytes;
      o.rx_bytes = options->rx_bytes;
      o.sq_entries = options->sq_entries;
      o.cq_entries = options->cq_entries;
      if (options->log_level < FERRY_LOG_DEFAULT || options->log_level > FERRY_LOG_OFF)
        return code(ferry::Status::BadRequest);
      if (options->log_level != FERRY_LOG_DEFAULT) o.log_level = static_cast<ferry::LogLevel>(options->log_level);
      if (options->log != nullptr) {
        o.log = [fn = options->log, context = options->log_context](ferry::LogLevel level, std::string_view text) {
          const std::string message(text);  // NUL-terminated for C
          fn(context, static_cast<int>(level), message.c_str());
        };
      }
    }
    auto r = ferry::Client::attach(o);
    if (!r) return code(r.status);
    *out = new ferry_client{std::move(r.value)};
    return FERRY_OK;
  } catch (const std::bad_alloc&) {
    return code(ferry::Status::NoMemory);
  }
}

void ferry_detach(ferry_client* client) { delete client; }

int ferry_alloc(ferry_client* client, size_t bytes, ferry_buffer* out) {
  if (client == nullptr || out == nullptr) return code(ferry::Status::BadRequest);
  const ferry::Buffer b = client->client->alloc(bytes);
  *out = ferry_buffer{b.data, b.capacity, b.offset};
  return b ? FERRY_OK : code(ferry::Status::NoMemory);
}

int ferry_alloc_span(ferry_client* client, size_t bytes, ferry_buffer* out) {
  if (client == nullptr || out == nullptr) return code(ferry::Status::BadRequest);
  const ferry::Buffer b = client->client->alloc_span(bytes);
  *out = ferry_buffer{b.data, b.capacity, b.offset};
  return b ? FERRY_OK : code(ferry::Status::NoMemory);
}

int ferry_free(ferry_client* client, const ferry_buffer* buffer) {
  if (client == nullptr || buffer == nullptr) return code(ferry::Status::BadRequest);
  return code(client->client->free(to_buffer(buffer)));
}

int ferry_serve(ferry_client* client, const char* service, int timeout_ms, uint32_t* service_id) {
  if (client == nullptr || service == nullptr) return code(ferry::Status::BadRequest);
  auto r = client->client->serve(service, std::chrono::milliseconds(timeout_ms));
  if (r && service_id != nullptr) *service_id = r.value;
  return code(r.status);
}

int ferry_unserve(ferry_client* client, uint32_t service_id, int timeout_ms) {
  if (client == nullptr) return code(ferry::Status::BadRequest);
  return code(client->client->unserve(service_id, std::chrono::milliseconds(timeout_ms)));
}

int ferry_open(ferry_client* client, const char* target, int timeout_ms, uint32_t* endpoint_id) {
  if (client == nullptr || target == nullptr) return code(ferry::Status::BadRequest);
  auto r = client->client->open(target, std::chrono::milliseconds(timeout_ms));
  if (r && endpoint_id != nullptr) *endpoint_id = r.value;
  return code(r.status);
}

int ferry_close(ferry_client* client, uint32_t endpoint_id, int timeout_ms) {
  if (client == nullptr) return code(ferry::Status::BadRequest);
  return code(client->client->close(endpoint_id, std::chrono::milliseconds(timeout_ms)));
}

int ferry_send(ferry_client* client, uint32_t endpoint, const ferry_buffer* message, uint32_t length,
               uint64_t user_data) {
  if (client == nullptr || message == nullptr) return code(ferry::Status::BadRequest);
  return code(client->client->send(endpoint, to_buffer(message), length, user_data));
}

int ferry_call(ferry_client* client, uint32_t endpoint, const ferry_buffer* request, uint32_t length,
               const ferry_buffer* response, uint64_t user_data) {
  return ferry_call_timeout(client, endpoint, request, length, response, user_data, 0);
}

int ferry_call_timeout(ferry_client* client, uint32_t endpoint, const ferry_buffer* request, uint32_t length,
                       const ferry_buffer* response, uint64_t user_data, uint32_t timeout_ms) {
  if (client == nullptr || request == nullptr) return code(ferry::Status::BadRequest);
  return code(client->client->call(endpoint, to_buffer(request), length, to_buffer(response), user_data,
                                   std::chrono::milliseconds{timeout_ms}));
}

int ferry_reply(ferry_client* client, uint64_t token, const ferry_buffer* response, uint32_t length,
                uint64_t user_data) {
  if (client == nullptr) return code(ferry::Status::BadRequest);
  return code(client->client->reply(token, to_buffer(response), length, user_data));
}

void ferry_release(ferry_client* client, const ferry_completion* delivery) {
  if (client == nullptr || delivery == nullptr) return;
  client->client->release(from_c(*delivery));
}

// Batches through a stack array so no allocation happens per poll.
size_t ferry_poll(ferry_client* client, ferry_completion* out, size_t max) {
  if (client == nullptr || out == nullptr) return 0;
  ferry::Completion batch[kBatch];
  const std::size_t n = client->client->poll(std::span(batch, max < kBatch ? max : kBatch));
  for (std::size_t i = 0; i < n; ++i) to_c(batch[i], out[i]);
  return n;
}

size_t ferry_wait(ferry_client* client, ferry_completion* out, size_t max, int timeout_ms) {
  if (client == nullptr || out == nullptr) return 0;
  ferry::Completion batch[kBatch];
  const std::size_t n =
      client->client->wait(std::span(batch, max < kBatch ? max : kBatch), std::chrono::milliseconds(timeout_ms));
  for (std::size_t i = 0; i < n; ++i) to_c(batch[i], out[i]);
  return n;
}

int ferry_event_fd(const ferry_client* client) { return client == nullptr ? -1 : client->client->event_fd(); }

int ferry_set_busy_poll(ferry_client* client, int on) {
  if (client == nullptr) return code(ferry::Status::BadRequest);
  client->client->set_busy_poll(on != 0);
  return code(ferry::Status::Ok);
}

int ferry_state(const ferry_client* client) {
  return client == nullptr ? code(ferry::Status::BadRequest) : code(client->client->state());
}

const char* ferry_status_string(int status) {
  if (status < 0 || status > ferry::kMaxStatus) return "Unknown";
  // to_string returns views of string literals, which are NUL-terminated.
  return ferry::to_string(static_cast<ferry::Status>(status)).data();
}

}  // extern "C"
