// ShardLink over libferry: one Client, one endpoint per shard, Calls whose
// responses ferryd writes straight into the worker's buffers.
//
// A shard that went away (its process or its ferryd restarted) leaves its
// endpoint dead: the calls that saw it go end ServiceGone, EndpointClosed,
// PeerReset or PeerUnreachable. The link then opens the shard's target again
// before the next call to it, so a shard started again is found by the
// worker's next operation (docs/ps.md). A reopen that fails is tried again
// after a pause that doubles up to 2 s; calls to the shard until then fail
// at once with what that open said.
#include <algorithm>
#include <array>
#include <new>
#include <thread>
#include <vector>

#include "ferry/ps/shard_link.h"
#include "ferry/retry_pause.h"

namespace ferry::ps {

ShardLink::~ShardLink() = default;

namespace {

constexpr std::size_t kBatch = 64;
constexpr std::uint32_t kNoFlight = ~std::uint32_t{0};
using Clock = std::chrono::steady_clock;
// A reopen waits this long at most: it runs on the worker's submitting thread.
constexpr std::chrono::milliseconds kReopenTimeout{2000};
// So does a link made again after ferryd went away (ferry_relink), for each
// shard's open: a shard not attached to the new ferryd yet is found later.
constexpr std::chrono::milliseconds kRelinkOpenTimeout{500};

// Whether a call that ended so leaves its endpoint of no more use.
bool endpoint_dead(Status s) noexcept {
  return s == Status::ServiceGone || s == Status::EndpointClosed || s == Status::PeerReset ||
         s == Status::PeerUnreachable;
}

// One shard's endpoint, and whether it must be opened again first.
struct ShardEndpoint {
  ShardEndpoint(std::string t, EndpointId e) : target(std::move(t)), endpoint(e) {}

  std::string target;
  EndpointId endpoint = 0;
  bool dead = false;
  Status last = Status::Ok;      // while dead: what the last reopen said
  Clock::time_point retry_at{};  // while dead: no reopen before this
  RetryPause pause;              // while dead: after the next failed reopen
};

class FerryLink final : public ShardLink {
 public:
  FerryLink(std::unique_ptr<Client> client, std::vector<ShardEndpoint> shards, const FerryLinkOptions& o)
      : client_(std::move(client)), shards_(std::move(shards)), timeout_(o.call_timeout), busy_poll_(o.busy_poll) {}

  std::uint32_t shards() const noexcept override { return static_cast<std::uint32_t>(shards_.size()); }
  std::size_t max_message_bytes() const noexcept override { return client_->max_message_bytes(); }
  Buffer alloc(std::size_t bytes) noexcept override { return client_->alloc(bytes); }
  Buffer alloc_span(std::size_t bytes) noexcept override { return client_->alloc_span(bytes); }
  void free(const Buffer& b) noexcept override { (void)client_->free(b); }

  Status call(std::uint32_t shard, const Buffer& request, std::uint32_t length, const Buffer& response,
              std::uint64_t tag) noexcept override {
    if (shard >= shards_.size()) return Status::BadRequest;
    ShardEndpoint& s = shards_[shard];
    if (s.dead) {
      if (const Status reopened = reopen(s); reopened != Status::Ok) return reopened;
    }
    const std::uint32_t id = remember(tag, shard, s.endpoint);
    if (id == kNoFlight) return Status::NoMemory;
    const Status st = client_->call(s.endpoint, request, length, response, id, timeout_);
    if (st != Status::Ok) {
      (void)forget(id);
      if (endpoint_dead(st)) mark_dead(shard, s.endpoint, st);
    }
    return st;
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
      const Flight f = forget(static_cast<std::uint32_t>(c.user_data));
      if (endpoint_dead(c.status)) mark_dead(f.shard, f.endpoint, c.status);
      out[done++] = LinkDone{f.tag, c.status, c.length};
    }
    return done;
  }

  Status state() const noexcept override { return client_->state(); }
  int event_fd() const noexcept override { return busy_poll_ ? -1 : client_->event_fd(); }
  void detach() noexcept override { client_->detach(); }

 private:
  // A call in flight: the worker's tag, and the shard and endpoint it went
  // to (a completion names neither). Slots are reused through a free list.
  struct Flight {
    std::uint64_t tag = 0;
    std::uint32_t shard = 0;
    EndpointId endpoint = 0;
    std::uint32_t next_free = kNoFlight;
  };

  std::uint32_t remember(std::uint64_t tag, std::uint32_t shard, EndpointId endpoint) noexcept {
    std::uint32_t id = free_;
    if (id == kNoFlight) {
      try {
        flights_.emplace_back();
      } catch (const std::bad_alloc&) {
        return kNoFlight;
      }
      id = static_cast<std::uint32_t>(flights_.size() - 1);
    } else {
      free_ = flights_[id].next_free;
    }
    flights_[id] = Flight{tag, shard, endpoint, kNoFlight};
    return id;
  }

  Flight forget(std::uint32_t id) noexcept {
    const Flight f = flights_[id];
    flights_[id].next_free = free_;
    free_ = id;
    return f;
  }

  // Only while `endpoint` is still the shard's: a late completion of the
  // endpoint a reopen replaced says nothing about the new one.
  void mark_dead(std::uint32_t shard, EndpointId endpoint, Status why) noexcept {
    ShardEndpoint& s = shards_[shard];
    if (s.endpoint != endpoint || s.dead) return;
    s.dead = true;
    s.last = why;
    s.retry_at = Clock::time_point{};  // the next call tries at once
    s.pause.reset();
  }

  Status reopen(ShardEndpoint& s) noexcept {
    const auto now = Clock::now();
    if (now < s.retry_at) return s.last;
    Result<EndpointId> ep = client_->open(s.target, kReopenTimeout);
    if (!ep) {
      s.last = ep.status;
      s.retry_at = Clock::now() + s.pause.next();
      return ep.status;
    }
    // Calls still in flight on the old endpoint end Cancelled; none waits for it.
    (void)client_->close(s.endpoint, std::chrono::milliseconds(0));
    s.endpoint = ep.value;
    s.dead = false;
    s.last = Status::Ok;
    return Status::Ok;
  }

  std::unique_ptr<Client> client_;
  std::vector<ShardEndpoint> shards_;
  std::vector<Flight> flights_;
  std::uint32_t free_ = kNoFlight;
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
  std::vector<ShardEndpoint> endpoints;
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
    endpoints.emplace_back(target, ep.value);
  }
  *out = std::make_unique<FerryLink>(std::move(attached.value), std::move(endpoints), o);
  return {};
}

std::function<Error(std::unique_ptr<ShardLink>*)> ferry_relink(FerryLinkOptions options) {
  options.open_timeout = std::min(options.open_timeout, kRelinkOpenTimeout);
  return [options = std::move(options)](std::unique_ptr<ShardLink>* out) { return connect_ferry(options, out); };
}

}  // namespace ferry::ps
