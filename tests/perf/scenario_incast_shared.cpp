// The incast board: one anonymous MAP_SHARED mapping made before any fork,
// so every sender and receiver writes its results where the parent reads
// them, without a pipe protocol.
#include <sys/mman.h>

#include <bit>
#include <cerrno>
#include <cstring>
#include <new>

#include "scenario_incast.h"

namespace ferry::bench {

namespace {

constexpr std::size_t round_up(std::size_t n, std::size_t to) { return (n + to - 1) / to * to; }

}  // namespace

Error IncastShared::map(const IncastPlan& plan) {
  bitmap_words_ = (plan.max_seq + 63) / 64;
  std::uint64_t samples = 0;
  offsets_.clear();
  for (const std::uint64_t m : plan.measured) {
    offsets_.push_back(samples);
    samples += m;
  }
  const std::size_t board_bytes = round_up(sizeof(IncastBoard), 64);
  const std::size_t bitmap_bytes = round_up(std::size_t{plan.streams()} * bitmap_words_ * 8, 64);
  bytes_ = board_bytes + bitmap_bytes + samples * 8;
  base_ = ::mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (base_ == MAP_FAILED) {
    base_ = nullptr;
    return Error(Status::NoMemory, std::string("mmap of the incast board: ") + std::strerror(errno));
  }
  // Fresh anonymous pages are zero; construct the board's atomics properly.
  board_ = new (base_) IncastBoard();
  bitmaps_ = reinterpret_cast<std::uint64_t*>(static_cast<char*>(base_) + board_bytes);
  samples_ = reinterpret_cast<std::uint64_t*>(static_cast<char*>(base_) + board_bytes + bitmap_bytes);
  return {};
}

IncastShared::~IncastShared() {
  if (base_ != nullptr) ::munmap(base_, bytes_);
}

std::uint64_t IncastShared::bits_set(std::uint32_t stream, std::uint64_t below) const {
  const std::uint64_t* words = bitmap(stream);
  std::uint64_t n = 0;
  for (std::uint64_t w = 0; w < bitmap_words_; ++w) {
    std::uint64_t word = words[w];
    const std::uint64_t first = w * 64;
    if (first >= below) break;
    if (below - first < 64) word &= (std::uint64_t{1} << (below - first)) - 1;
    n += static_cast<std::uint64_t>(std::popcount(word));
  }
  return n;
}

}  // namespace ferry::bench
