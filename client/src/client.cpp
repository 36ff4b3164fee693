// The public Client API: thin forwarding to Client::Impl, plus the
// to_string helpers. Argument checks that need no state live in Impl too.
#include "ferry/client.h"

#include "client/src/client_impl.h"
#include "client/src/names.h"

namespace ferry {

std::string_view to_string(OpKind op) noexcept {
  switch (op) {
    case OpKind::Nop: return "Nop";
    case OpKind::Serve: return "Serve";
    case OpKind::Unserve: return "Unserve";
    case OpKind::Open: return "Open";
    case OpKind::Close: return "Close";
    case OpKind::Send: return "Send";
    case OpKind::Call: return "Call";
    case OpKind::Reply: return "Reply";
    case OpKind::ReleaseRx: return "ReleaseRx";
  }
  return "Unknown";
}

std::string_view to_string(Completion::Kind kind) noexcept {
  switch (kind) {
    case Completion::Kind::OpDone: return "OpDone";
    case Completion::Kind::Message: return "Message";
    case Completion::Kind::Request: return "Request";
  }
  return "Unknown";
}

// A child of fork() must not touch the parent's rings or arenas: every call
// refuses before it does (fork_guard.h).
Buffer Client::alloc(std::size_t bytes) noexcept { return impl_->forked() ? Buffer{} : impl_->alloc(bytes); }
Buffer Client::alloc_span(std::size_t bytes) noexcept { return impl_->forked() ? Buffer{} : impl_->alloc_span(bytes); }
Status Client::free(Buffer buffer) noexcept { return impl_->forked() ? Status::Forked : impl_->free(buffer); }
std::size_t Client::max_message_bytes() const noexcept { return impl_->max_message_; }

Result<ServiceId> Client::serve(std::string_view service, std::chrono::milliseconds timeout) {
  if (impl_->forked()) return Result<ServiceId>::fail(Status::Forked);
  if (!client_detail::valid_service_name(service)) return Result<ServiceId>::fail(Status::BadRequest);
  return impl_->control(OpKind::Serve, 0, service, timeout);
}

Status Client::unserve(ServiceId service, std::chrono::milliseconds timeout) {
  if (impl_->forked()) return Status::Forked;
  return impl_->control(OpKind::Unserve, service, {}, timeout).status;
}

Result<EndpointId> Client::open(std::string_view target, std::chrono::milliseconds timeout) {
  if (impl_->forked()) return Result<EndpointId>::fail(Status::Forked);
  if (!client_detail::valid_target(target)) return Result<EndpointId>::fail(Status::BadRequest);
  return impl_->control(OpKind::Open, 0, target, timeout);
}

Status Client::close(EndpointId endpoint, std::chrono::milliseconds timeout) {
  if (impl_->forked()) return Status::Forked;
  return impl_->control(OpKind::Close, endpoint, {}, timeout).status;
}

Status Client::send(EndpointId endpoint, const Buffer& message, std::uint32_t length,
                    std::uint64_t user_data) noexcept {
  if (impl_->forked()) return Status::Forked;
  return impl_->send(endpoint, message, length, user_data);
}

Status Client::call(EndpointId endpoint, const Buffer& request, std::uint32_t length, const Buffer& response,
                    std::uint64_t user_data, std::chrono::milliseconds timeout) noexcept {
  if (impl_->forked()) return Status::Forked;
  return impl_->call(endpoint, request, length, response, user_data, timeout);
}

Status Client::reply(std::uint64_t token, const Buffer& response, std::uint32_t length,
                     std::uint64_t user_data) noexcept {
  if (impl_->forked()) return Status::Forked;
  return impl_->reply(token, response, length, user_data);
}

void Client::release(const Completion& delivery) noexcept {
  if (!impl_->forked()) impl_->release(delivery);
}
std::size_t Client::poll(std::span<Completion> out) noexcept { return impl_->forked() ? 0 : impl_->poll(out); }
std::size_t Client::wait(std::span<Completion> out, std::chrono::milliseconds timeout) noexcept {
  return impl_->forked() ? 0 : impl_->wait(out, timeout);
}
int Client::event_fd() const noexcept { return impl_->epoll_fd_; }
void Client::set_busy_poll(bool on) noexcept { impl_->set_busy_poll(on); }
Status Client::state() const noexcept { return impl_->forked() ? Status::Forked : impl_->current_state(); }
void Client::detach() noexcept { impl_->detach(); }
ClientStats Client::stats() const noexcept { return impl_->counters_; }
std::uint32_t Client::client_id() const noexcept { return impl_->client_id_; }
std::uint32_t Client::engine() const noexcept { return impl_->engine_; }
std::uint64_t Client::daemon_epoch() const noexcept { return impl_->epoch_; }

}  // namespace ferry
