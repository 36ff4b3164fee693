// PsTransport over libferry: one endpoint per shard, requests and response
// buffers allocated once in the tx arena, one Call per shard per exchange.
#include <array>
#include <chrono>
#include <thread>

#include "ferry/client.h"
#include "ps_transport.h"

namespace ferry::ps {

namespace {

constexpr std::chrono::milliseconds kExchangeDeadline{10000};
constexpr std::chrono::milliseconds kOpenDeadline{10000};
constexpr std::size_t kCompletionBatch = 32;

class FerryTransport final : public PsTransport {
 public:
  bool setup(const TransportSpec& spec, std::string* error) {
    busy_poll_ = spec.busy_poll;
    AttachOptions a;
    a.socket_path = spec.socket;
    a.name = spec.name;
    constexpr std::uint64_t kMiB = 1ull << 20;
    const std::uint64_t need = spec.shards * (spec.request_bytes + spec.response_bytes);
    // Room for the allocator's size classes (power-of-two blocks) plus slack.
    a.tx_bytes = need * 2 + 4 * kMiB > 32 * kMiB ? ((need * 2 + 4 * kMiB) & ~(kMiB - 1)) : 0;
    auto attached = Client::attach(a);
    if (!attached) {
      *error = "cannot attach to ferryd at '" + spec.socket + "': " + std::string(to_string(attached.status));
      return false;
    }
    client_ = std::move(attached.value);
    if (spec.request_bytes > client_->max_message_bytes() || spec.response_bytes > client_->max_message_bytes()) {
      *error = "message of " + std::to_string(std::max(spec.request_bytes, spec.response_bytes)) +
               " bytes exceeds the daemon's max message size " + std::to_string(client_->max_message_bytes()) +
               " (lower --batch or --dim)";
      return false;
    }
    for (std::uint32_t s = 0; s < spec.shards; ++s) {
      const std::string target = shard_target(spec.target, s);
      const auto deadline = std::chrono::steady_clock::now() + kOpenDeadline;
      Result<EndpointId> ep;
      for (;;) {
        ep = client_->open(target);
        // A shard may still be registering its service: retry until the deadline.
        if (ep.status != Status::ServiceNotFound || std::chrono::steady_clock::now() > deadline) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
      if (!ep) {
        *error = "open '" + target + "': " + std::string(to_string(ep.status));
        return false;
      }
      endpoints_.push_back(ep.value);
      Buffer req = client_->alloc(spec.request_bytes);
      Buffer resp = client_->alloc(spec.response_bytes);
      if (!req || !resp) {
        *error = "tx arena too small for the request/response buffers";
        return false;
      }
      requests_.push_back(req);
      responses_.push_back(resp);
    }
    return true;
  }

  std::uint32_t shards() const override { return static_cast<std::uint32_t>(endpoints_.size()); }
  std::span<std::byte> request(std::uint32_t s) override { return requests_[s].span(); }
  std::span<std::byte> response(std::uint32_t s) override { return responses_[s].span(); }

  bool exchange(std::span<const std::uint32_t> request_len, std::span<std::uint32_t> response_len,
                std::string* error) override {
    std::uint32_t outstanding = 0;
    for (std::uint32_t s = 0; s < endpoints_.size(); ++s) {
      if (request_len[s] == 0) continue;
      const Status st = client_->call(endpoints_[s], requests_[s], request_len[s], responses_[s], s);
      if (st != Status::Ok) {
        *error = "call to shard " + std::to_string(s) + " rejected: " + std::string(to_string(st));
        drain(outstanding);
        return false;
      }
      ++outstanding;
    }
    const auto deadline = std::chrono::steady_clock::now() + kExchangeDeadline;
    bool ok = true;
    while (outstanding > 0) {
      const std::size_t n = next(deadline);
      if (n == 0) {
        *error = client_->state() == Status::Ok ? "timed out waiting for shard responses" : "ferryd went away";
        return false;
      }
      for (std::size_t i = 0; i < n; ++i) {
        const Completion& c = batch_[i];
        if (c.kind != Completion::Kind::OpDone || c.op != OpKind::Call) continue;
        --outstanding;
        if (c.status != Status::Ok) {
          *error = "call to shard " + std::to_string(c.user_data) + " failed: " + std::string(to_string(c.status));
          ok = false;
          continue;
        }
        response_len[c.user_data] = c.length;
      }
    }
    return ok;
  }

 private:
  std::size_t next(std::chrono::steady_clock::time_point deadline) {
    for (std::uint32_t spins = 1;; ++spins) {
      if (busy_poll_) {
        const std::size_t n = client_->poll(batch_);
        if (n != 0) return n;
        if ((spins & 1023) != 0) continue;
      } else {
        const std::size_t n = client_->wait(batch_, std::chrono::milliseconds(200));
        if (n != 0) return n;
      }
      if (client_->state() != Status::Ok || std::chrono::steady_clock::now() > deadline) return 0;
    }
  }

  // After a rejected submission, collect the calls already in flight.
  void drain(std::uint32_t outstanding) {
    const auto deadline = std::chrono::steady_clock::now() + kExchangeDeadline;
    while (outstanding > 0) {
      const std::size_t n = next(deadline);
      if (n == 0) return;
      for (std::size_t i = 0; i < n; ++i)
        if (batch_[i].kind == Completion::Kind::OpDone && batch_[i].op == OpKind::Call) --outstanding;
    }
  }

  std::unique_ptr<Client> client_;
  bool busy_poll_ = false;
  std::vector<EndpointId> endpoints_;
  std::vector<Buffer> requests_;
  std::vector<Buffer> responses_;
  std::array<Completion, kCompletionBatch> batch_{};
};

}  // namespace

std::unique_ptr<PsTransport> make_ferry_transport(const TransportSpec& spec, std::string* error) {
  auto t = std::make_unique<FerryTransport>();
  if (!t->setup(spec, error)) return nullptr;
  return t;
}

std::string_view to_string(TransportKind t) noexcept {
  switch (t) {
    case TransportKind::Ferry: return "ferry";
    case TransportKind::Tcp: return "tcp";
  }
  return "unknown";
}

std::string shard_service(std::uint32_t shard) { return "ps-shard-" + std::to_string(shard); }

std::string shard_target(const std::string& target, std::uint32_t shard) {
  return target.empty() ? shard_service(shard) : target + "/" + shard_service(shard);
}

std::unique_ptr<PsTransport> make_transport(const TransportSpec& spec, std::string* error) {
  return spec.kind == TransportKind::Ferry ? make_ferry_transport(spec, error) : make_tcp_transport(spec, error);
}

}  // namespace ferry::ps
