// Shard over libferry: serve "ps-shard-<i>", answer each Request with a
// Reply from a pool of response buffers preallocated in the tx arena; a
// buffer returns to the pool on its Reply's OpDone. Requests that find the
// pool empty wait in a queue, unreleased (bounded by the rx arena). A
// request is applied once: its answer stays in its buffer until the Reply
// completes, and a Reply the SQ refuses (full) or that completes Busy (no
// room toward a remote caller now; the call is still open) goes again from
// that buffer with the same token.
#include <poll.h>

#include <array>
#include <cstdio>
#include <vector>

#include "ferry/client.h"
#include "shard_server.h"

namespace ferry::ps {

namespace {

constexpr std::size_t kCompletionBatch = 64;
// Requests that wait for a response buffer: the capacity reserved up front.
// The queue may grow past it (never drops a request); what bounds it is the
// rx arena, where each waiting request still holds its bytes.
constexpr std::size_t kPendingReserve = 4096;

class FerryShard {
 public:
  FerryShard(ShardState& state, const ShardServerSpec& spec) : state_(state), spec_(spec) {}

  // Says on stderr how many requests had to wait for a response buffer (a
  // pool too small for the load) and how many Replies were refused and sent
  // again, when any were.
  ~FerryShard() {
    if (waited_ != 0) {
      std::fprintf(stderr, "ferry-ps shard %u: %llu requests waited for a response buffer (pool %u)\n",
                   state_.config().index, static_cast<unsigned long long>(waited_), spec_.pool);
    }
    if (refusals_ != 0) {
      std::fprintf(stderr, "ferry-ps shard %u: %llu replies refused Busy and sent again\n", state_.config().index,
                   static_cast<unsigned long long>(refusals_));
    }
  }

  int run() {
    if (!setup()) return 1;
    spec_.ready("");
    for (;;) {
      resend_refused();
      drain_pending();
      const std::size_t n = client_->poll(batch_);
      if (n == 0) {
        if (client_->state() != Status::Ok) return fail("ferryd went away");
        if (spec_.busy_poll && pending_.empty() && refused_.empty()) {
          if (stop_requested(0)) return 0;
          continue;
        }
        // Sleep on the completion doorbell; short timeout while requests wait.
        pollfd p[2] = {{client_->event_fd(), POLLIN, 0}, {spec_.stop_fd, POLLIN, 0}};
        ::poll(p, 2, pending_.empty() && refused_.empty() ? -1 : 1);
        if (p[1].revents != 0) return 0;
        continue;
      }
      for (std::size_t i = 0; i < n; ++i) on_completion(batch_[i]);
    }
  }

 private:
  bool setup() {
    const ShardConfig& c = state_.config();
    response_bytes_ = max_response_bytes(c, spec_.max_batch);
    AttachOptions a;
    a.socket_path = spec_.socket;
    a.name = shard_service(c.index);
    constexpr std::uint64_t kMiB = 1ull << 20;
    const std::uint64_t need = 2 * spec_.pool * response_bytes_ + 4 * kMiB;
    a.tx_bytes = need > 32 * kMiB ? (need & ~(kMiB - 1)) : 0;
    // Requests land in the rx arena: room for a few per worker.
    const std::uint64_t rx_need = 2 * spec_.pool * max_request_bytes(c, spec_.max_batch) + 4 * kMiB;
    a.rx_bytes = rx_need > 32 * kMiB ? (rx_need & ~(kMiB - 1)) : 0;
    auto attached = Client::attach(a);
    if (!attached)
      return fail("cannot attach to ferryd at '" + spec_.socket + "': " + std::string(to_string(attached.status)));
    client_ = std::move(attached.value);
    if (response_bytes_ > client_->max_message_bytes())
      return fail("responses of " + std::to_string(response_bytes_) + " bytes exceed the daemon's max message size");
    for (std::uint32_t i = 0; i < spec_.pool; ++i) {
      Buffer b = client_->alloc(response_bytes_);
      if (!b) return fail("tx arena too small for the response pool");
      buffers_.push_back(b);
      free_.push_back(i);
    }
    sent_.resize(spec_.pool);
    refused_.reserve(spec_.pool);
    pending_.reserve(kPendingReserve);
    const auto served = client_->serve(shard_service(c.index));
    if (!served) return fail("serve " + shard_service(c.index) + ": " + std::string(to_string(served.status)));
    return true;
  }

  bool stop_requested(int timeout_ms) {
    pollfd p{spec_.stop_fd, POLLIN, 0};
    return ::poll(&p, 1, timeout_ms) > 0;
  }

  bool fail(const std::string& why) {
    spec_.failed(why);
    return false;
  }

  void on_completion(const Completion& c) {
    if (c.kind == Completion::Kind::Request) {
      if (!pending_.empty() || !answer(c)) {
        pending_.push_back(c);
        ++waited_;
      }
      return;
    }
    if (c.kind == Completion::Kind::Message) {
      client_->release(c);  // ferry-ps has no one-way messages
      return;
    }
    if (c.op != OpKind::Reply) return;
    const auto b = static_cast<std::uint32_t>(c.user_data);
    if (c.status == Status::Busy) {
      refused_.push_back(b);  // the call is still open: the same answer goes again
      ++refusals_;
    } else {
      free_.push_back(b);  // Ok, or CallerGone: nothing more to do for it
    }
  }

  // Handles and replies; false when it must wait for a response buffer.
  bool answer(const Completion& c) {
    if (free_.empty()) return false;
    const std::uint32_t b = free_.back();
    const std::size_t len = state_.handle({c.data, c.length}, buffers_[b].span().first(response_bytes_));
    // handle() has applied the request (a push changed the shard): from
    // here its answer is kept, and an SQ-full Busy only delays it.
    free_.pop_back();
    sent_[b] = Sent{c.token, static_cast<std::uint32_t>(len)};
    client_->release(c);
    if (client_->reply(c.token, buffers_[b], sent_[b].length, b) == Status::Busy) {
      refused_.push_back(b);
      ++refusals_;
    }
    return true;
  }

  // Replies refused Busy, again, oldest first, while the SQ takes them.
  void resend_refused() {
    std::size_t done = 0;
    while (done < refused_.size()) {
      const std::uint32_t b = refused_[done];
      if (client_->reply(sent_[b].token, buffers_[b], sent_[b].length, b) == Status::Busy) break;
      ++done;
    }
    if (done > 0) refused_.erase(refused_.begin(), refused_.begin() + static_cast<std::ptrdiff_t>(done));
  }

  void drain_pending() {
    std::size_t done = 0;
    while (done < pending_.size() && answer(pending_[done])) ++done;
    if (done > 0) pending_.erase(pending_.begin(), pending_.begin() + static_cast<std::ptrdiff_t>(done));
  }

  ShardState& state_;
  const ShardServerSpec& spec_;
  std::unique_ptr<Client> client_;
  std::size_t response_bytes_ = 0;
  std::vector<Buffer> buffers_;
  std::vector<std::uint32_t> free_;
  struct Sent {
    std::uint64_t token = 0;
    std::uint32_t length = 0;
  };
  std::vector<Sent> sent_;              // per buffer: the Reply it carries
  std::vector<std::uint32_t> refused_;  // buffers whose Reply completed Busy
  std::vector<Completion> pending_;
  std::uint64_t waited_ = 0;    // requests that queued for a response buffer
  std::uint64_t refusals_ = 0;  // Replies refused Busy (SQ full, or at completion), each sent again
  std::array<Completion, kCompletionBatch> batch_{};
};

}  // namespace

int serve_shard_ferry(ShardState& state, const ShardServerSpec& spec) {
  FerryShard shard(state, spec);
  return shard.run();
}

}  // namespace ferry::ps
