// A ShardLink whose shards are Shard objects in this process, for the
// libferry-ps unit tests: a call is queued and answered, oldest first, by a
// later wait(). Its knobs make the worker's edges reachable: a message and
// arena size (alloc refuses past them), one answer per wait (the worker
// must keep sending as answers trickle back), and shards that never answer.
#pragma once

#include <algorithm>
#include <cstdlib>
#include <deque>
#include <limits>
#include <set>
#include <utility>
#include <vector>

#include "ferry/ps/shard.h"
#include "ferry/ps/shard_link.h"

namespace ferry::ps::test {

class InProcessLink final : public ShardLink {
 public:
  struct Options {
    std::size_t max_message = 1u << 20;
    std::size_t budget = std::numeric_limits<std::size_t>::max();  // bytes allocated at once
    bool one_answer_per_wait = false;
  };

  explicit InProcessLink(std::vector<Shard*> shards) : InProcessLink(std::move(shards), Options{}) {}
  InProcessLink(std::vector<Shard*> shards, Options options) : shards_(std::move(shards)), options_(options) {}

  std::uint32_t shards() const noexcept override { return static_cast<std::uint32_t>(shards_.size()); }
  std::size_t max_message_bytes() const noexcept override { return options_.max_message; }
  Buffer alloc(std::size_t bytes) noexcept override {
    if (bytes > options_.max_message || used_ + bytes > options_.budget) {
      ++refused;
      return {};
    }
    used_ += bytes;
    ++allocated;
    auto* p = static_cast<std::byte*>(std::malloc(bytes));
    return Buffer{p, static_cast<std::uint32_t>(bytes), 0};
  }
  void free(const Buffer& b) noexcept override {
    used_ -= b.capacity;
    ++freed;
    std::free(b.data);
  }
  Status call(std::uint32_t shard, const Buffer& req, std::uint32_t len, const Buffer& resp,
              std::uint64_t tag) noexcept override {
    ++calls;
    if (drop.count(shard)) return Status::Ok;  // swallowed: no answer ever
    queue_.push_back({shard, std::vector<std::byte>(req.data, req.data + len), resp, tag});
    most_in_flight = std::max(most_in_flight, queue_.size());
    return Status::Ok;
  }
  std::size_t wait(std::span<LinkDone> out, std::chrono::milliseconds) noexcept override {
    const std::size_t most = options_.one_answer_per_wait ? std::min<std::size_t>(1, out.size()) : out.size();
    std::size_t n = 0;
    while (n < most && !queue_.empty()) {
      Pending p = std::move(queue_.front());
      queue_.pop_front();
      const std::size_t len = shards_[p.shard]->handle(p.request, p.response.span());
      out[n++] = LinkDone{p.tag, Status::Ok, static_cast<std::uint32_t>(len)};
    }
    return n;
  }
  Status state() const noexcept override { return Status::Ok; }
  int event_fd() const noexcept override { return -1; }

  // Bytes allocated and not yet freed.
  std::size_t used() const noexcept { return used_; }

  std::set<std::uint32_t> drop;  // shards whose calls are never answered
  int calls = 0, allocated = 0, freed = 0, refused = 0;
  std::size_t most_in_flight = 0;

 private:
  struct Pending {
    std::uint32_t shard;
    std::vector<std::byte> request;
    Buffer response;
    std::uint64_t tag;
  };
  std::vector<Shard*> shards_;
  Options options_;
  std::deque<Pending> queue_;
  std::size_t used_ = 0;
};

}  // namespace ferry::ps::test
