#include "ferry/ps/shard_server.h"

#include <poll.h>

#include "ferry/ps/shard_link.h"

namespace ferry::ps {

namespace {

// Requests that wait for a response buffer: the capacity reserved up front.
// The queue may grow past it (it never drops a request); what bounds it is
// the rx arena, where each waiting request still holds its bytes.
constexpr std::size_t kPendingReserve = 4096;
constexpr std::uint64_t kMiB = 1ull << 20;
// How long an idle server sleeps while a Save step is in the background:
// its writer may stall without a sound (Shard::save_turn() looks).
constexpr int kSaveLookMs = 250;

}  // namespace

Error ShardServer::start(Shard& shard, const ShardServerOptions& o, std::unique_ptr<ShardServer>* out) {
  if (o.pool == 0) {
    return Error(Status::BadRequest, "the response pool needs at least one buffer");
  }
  const std::string service = shard_service(o.service_prefix, shard.spec().index);
  AttachOptions a;
  a.socket_path = o.socket;
  a.name = o.name.empty() ? service : o.name;
  a.busy_poll = o.busy_poll;
  const std::uint64_t need = 2 * std::uint64_t{o.pool} * shard.max_response_bytes() + 4 * kMiB;
  a.tx_bytes = need > 32 * kMiB ? (need & ~(kMiB - 1)) : 0;
  // Requests land in the rx arena: room for a few per buffer of the pool.
  const std::uint64_t rx_need = 2 * std::uint64_t{o.pool} * shard.max_request_bytes() + 4 * kMiB;
  a.rx_bytes = rx_need > 32 * kMiB ? (rx_need & ~(kMiB - 1)) : 0;
  auto attached = Client::attach(a);
  if (!attached) {
    return Error(attached.status, "cannot attach to ferryd at '" +
                                      (o.socket.empty() ? default_socket_path() : o.socket) +
                                      "': " + std::string(to_string(attached.status)));
  }
  std::unique_ptr<ShardServer> server(new ShardServer(shard, o, std::move(attached.value)));
  server->service_ = service;
  Client& c = *server->client_;
  server->response_bytes_ = shard.max_response_bytes();
  if (server->response_bytes_ > c.max_message_bytes()) {
    return Error(Status::BadRequest, "responses of " + std::to_string(server->response_bytes_) +
                                         " bytes exceed the daemon's max message size " +
                                         std::to_string(c.max_message_bytes()) + " (lower max_count)");
  }
  for (std::uint32_t i = 0; i < o.pool; ++i) {
    Buffer b = c.alloc(server->response_bytes_);
    if (!b) {
      return Error(Status::NoMemory, "tx arena too small for a response pool of " + std::to_string(o.pool));
    }
    server->buffers_.push_back(b);
    server->free_.push_back(i);
  }
  server->sent_.resize(o.pool);
  server->refused_.reserve(o.pool);
  server->pending_.reserve(kPendingReserve);
  const auto served = c.serve(service);
  if (!served) return Error(served.status, "serve " + service + ": " + std::string(to_string(served.status)));
  *out = std::move(server);
  return {};
}

ShardServer::ShardServer(Shard& shard, const ShardServerOptions& options, std::unique_ptr<Client> client)
    : shard_(shard), options_(options), client_(std::move(client)) {}

// A Save step still in the background has no one to answer: it ends, unanswered
// (the daemon fails its call when this client detaches).
ShardServer::~ShardServer() { shard_.drop_save(); }

Status ShardServer::run(int stop_fd) noexcept {
  for (;;) {
    advance_save();
    resend_refused();
    drain_pending();
    const std::size_t n = client_->poll(batch_);
    if (n == 0) {
      if (client_->state() != Status::Ok) return client_->state();
      const bool idle = pending_.empty() && refused_.empty();
      if (options_.busy_poll && idle) {
        pollfd p{stop_fd, POLLIN, 0};
        if (::poll(&p, 1, 0) > 0) return Status::Ok;
        continue;
      }
      // Sleep on the completion doorbell (and the writer of a Save step in
      // the background, which wants its next piece or has ended); a short
      // timeout while requests wait.
      pollfd p[3] = {{client_->event_fd(), POLLIN, 0},
                     {stop_fd, POLLIN, 0},
                     {saving_ == kNoBuffer ? -1 : shard_.save_event_fd(), POLLIN, 0}};
      ::poll(p, 3, !idle ? 1 : saving_ == kNoBuffer ? -1 : kSaveLookMs);
      if (p[1].revents != 0) return Status::Ok;
      continue;
    }
    for (std::size_t i = 0; i < n; ++i) on_completion(batch_[i]);
  }
}

void ShardServer::on_completion(const Completion& c) noexcept {
  if (c.kind == Completion::Kind::Request) {
    if (!pending_.empty() || !answer(c)) {
      pending_.push_back(c);
      waited_.add();
    }
    return;
  }
  if (c.kind == Completion::Kind::Message) {
    client_->release(c);  // the protocol has no one-way messages
    return;
  }
  if (c.op != OpKind::Reply) return;
  const auto b = static_cast<std::uint32_t>(c.user_data);
  if (c.status == Status::Busy) {
    refused_.push_back(b);  // the call is still open: the same answer goes again
    refusals_.add();
  } else {
    free_.push_back(b);  // Ok, or CallerGone: nothing more to do for it
  }
}

bool ShardServer::answer(const Completion& c) noexcept {
  if (free_.empty()) return false;
  const std::uint32_t b = free_.back();
  const std::uint32_t caller = c.caller == Completion::Caller::Local    ? c.caller_uid
                               : c.caller == Completion::Caller::Remote ? kRemoteCaller
                                                                        : kUnknownCaller;
  const std::span<const std::byte> request(c.data, c.length);
  switch (shard_.begin_save(request, caller)) {
    case Shard::SaveStart::Wait:
      saves_.push_back(c);  // unreleased, like a pending request
      return true;
    case Shard::SaveStart::Began:
      free_.pop_back();
      saving_ = b;
      sent_[b] = Sent{c.token, 0};
      client_->release(c);  // the step took a copy of the name; its rows come from the shard
      return true;
    case Shard::SaveStart::Handle: break;
  }
  const std::size_t len = shard_.handle(request, buffers_[b].span().first(response_bytes_), caller);
  // handle() has applied the request (a push changed the shard): from here
  // its answer is kept, and a refused Reply only delays it.
  free_.pop_back();
  sent_[b] = Sent{c.token, static_cast<std::uint32_t>(len)};
  client_->release(c);
  send(b);
  return true;
}

void ShardServer::send(std::uint32_t b) noexcept {
  if (client_->reply(sent_[b].token, buffers_[b], sent_[b].length, b) == Status::Busy) {
    refused_.push_back(b);
    refusals_.add();
  }
}

void ShardServer::advance_save() noexcept {
  if (saving_ == kNoBuffer) return;
  shard_.save_turn();  // the step's next pieces, for the writer
  if (!shard_.save_ready()) return;
  const std::uint32_t b = saving_;
  saving_ = kNoBuffer;
  sent_[b].length = static_cast<std::uint32_t>(shard_.end_save(buffers_[b].span().first(response_bytes_)));
  send(b);
  // The Save steps that waited for it, oldest first, until one goes to the background.
  std::size_t done = 0;
  while (done < saves_.size() && !shard_.save_running() && answer(saves_[done])) ++done;
  if (done > 0) saves_.erase(saves_.begin(), saves_.begin() + static_cast<std::ptrdiff_t>(done));
}

void ShardServer::resend_refused() noexcept {
  std::size_t done = 0;
  while (done < refused_.size()) {
    const std::uint32_t b = refused_[done];
    if (client_->reply(sent_[b].token, buffers_[b], sent_[b].length, b) == Status::Busy) break;
    ++done;
  }
  if (done > 0) refused_.erase(refused_.begin(), refused_.begin() + static_cast<std::ptrdiff_t>(done));
}

void ShardServer::drain_pending() noexcept {
  std::size_t done = 0;
  while (done < pending_.size() && answer(pending_[done])) ++done;
  if (done > 0) pending_.erase(pending_.begin(), pending_.begin() + static_cast<std::ptrdiff_t>(done));
}

}  // namespace ferry::ps
