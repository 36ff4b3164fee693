// ShardLink over libferry: one Client, one endpoint per shard, Calls whose
// responses ferryd writes straight into the worker's buffers.
#include <array>
#include <thread>
#include <vector>

#include "ferry/ps/shard_link.h"

namespace ferry::ps {

ShardLink::~ShardLink() = default;

namespace {

constexpr std::size_t kBatch = 64;

class FerryLink final : public ShardLink {
 public:
  FerryLink(std::unique_ptr<Client> client, std::vector<EndpointId> endpoints, const FerryLinkOptions& o)
      : client_(std::move(client)),
        endpoints_(std::move(endpoints)),
        timeout_(o.call_timeout),
        busy_poll_(o.busy_poll) {}

  std::uint32_t shards() const noexcept override { return static_cast<std::uint32_t>(endpoints_.size()); }
  std::size_t max_message_bytes() const noexcept override { return client_->max_message_bytes(); }
  Buffer alloc(std::size_t bytes) noexcept override { return client_->alloc(bytes); }
  Buffer alloc_span(std::size_t bytes) noexcept override { return client_->alloc_span(bytes); }
  void free(const Buffer& b) noexcept override { (void)client_->free(b); }

  Status call(std::uint32_t shard, const Buffer& request, std::uint32_t length, const Buffer& response,
              std::uint64_t tag) noexcept override {
    if (shard >= endpoints_.size()) return Status::BadRequest;
    return client_->call(endpoints_[shard], request, length, response, tag, timeout_);
  }

  std::size_t wait(std::span<LinkDone> out, std::chrono::milliseconds timeout) noexcept override {
    const std::size_t want = std::min(out.size(), batch_.size());
    std::span<Completion> batch(batch_.data(), want);
    std::size_t n = 0;
    if (timeout.count() <= 0) {
      n = client_->poll(batch);
    } else if (busy_poll_) {
      const auto deadline = std::chrono::steady_clock::now() + timeout;
      for (std::uint32_t spin = 1; (n = client_->poll(batch)) == 0; ++spin) {
        if (client_->state() != Status::Ok) break;
        if ((spin & 255) == 0 && std::chrono::steady_clock::now() > deadline) break;
      }
    } else {
      n = client_->wait(batch, timeout);
    }
    std::size_t done = 0;
    for (std::size_t i = 0; i < n; ++i) {
      const Completion& c = batch_[i];
      if (c.kind != Completion::Kind::OpDone) {
        client_->release(c);  // a worker serves nothing
        continue;
      }
      if (c.op != OpKind::Call) continue;
      out[done++] = LinkDone{c.user_data, c.status, c.length};
    }
    return done;
  }

  Status state() const noexcept override { return client_->state(); }
  int event_fd() const noexcept override { return busy_poll_ ? -1 : client_->event_fd(); }
  void detach() noexcept override { client_->detach(); }

 private:
  std::unique_ptr<Client> client_;
  std::vector<EndpointId> endpoints_;
  std::chrono::milliseconds timeout_;
  bool busy_poll_;
  std::array<Completion, kBatch> batch_{};
};

}  // namespace

std::string shard_service(std::string_view prefix, std::uint32_t shard) {
  return std::string(prefix) + std::to_string(shard);
}

std::string shard_target(std::string_view target, std::string_view prefix, std::uint32_t shard) {
  return target.empty() ? shard_service(prefix, shard) : std::string(target) + "/" + shard_service(prefix, shard);
}

Error connect_ferry(const FerryLinkOptions& o, std::unique_ptr<ShardLink>* out) {
  AttachOptions a;
  a.socket_path = o.socket;
  a.name = o.name;
  a.tx_bytes = o.tx_bytes;
  a.busy_poll = o.busy_poll;
  auto attached = Client::attach(a);
  if (!attached) {
    return Error(attached.status, "cannot attach to ferryd at '" +
                                      (o.socket.empty() ? default_socket_path() : o.socket) +
                                      "': " + std::string(to_string(attached.status)));
  }
  if (!o.shard_targets.empty() && o.shard_targets.size() != o.shards) {
    return Error(Status::BadRequest, "shard_targets names " + std::to_string(o.shard_targets.size()) + " shards, not " +
                                         std::to_string(o.shards));
  }
  std::vector<EndpointId> endpoints;
  for (std::uint32_t s = 0; s < o.shards; ++s) {
    const std::string target =
        o.shard_targets.empty() ? shard_target(o.target, o.service_prefix, s) : o.shard_targets[s];
    const auto deadline = std::chrono::steady_clock::now() + o.open_timeout;
    Result<EndpointId> ep;
    for (;;) {
      ep = attached.value->open(target);
      // A shard may still be registering its service: retry until the deadline.
      if (ep.status != Status::ServiceNotFound || std::chrono::steady_clock::now() > deadline) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (!ep) {
      std::string why = "shard " + std::to_string(s) + " of " + std::to_string(o.shards) + ": open '" + target +
                        "': " + std::string(to_string(ep.status));
      if (ep.status == Status::ServiceNotFound)
        why += " (nothing serves it there: start that shard, or restart it if its ferryd restarted)";
      if (ep.status == Status::PeerUnreachable)
        why += " (no ferryd answered at that address: is the shards' ferryd running, and is HOST:PORT its --listen?)";
      if (ep.status == Status::Busy)
        why +=
            " (this host's ferryd has no free peer connection slot: raise its peer-max-connections, or let "
            "max-channels close idle channels)";
      return Error(ep.status, std::move(why));
    }
    endpoints.push_back(ep.value);
  }
  *out = std::make_unique<FerryLink>(std::move(attached.value), std::move(endpoints), o);
  return {};
}

}  // namespace ferry::ps
