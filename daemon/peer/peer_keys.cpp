#include "daemon/peer/peer_keys.h"

#include <algorithm>

namespace ferry::daemon::peer {

namespace {

// [a, a + alen) and [b, b + blen) share a byte (neither wraps: decoded).
bool overlaps(std::uint64_t a, std::uint64_t alen, std::uint64_t b, std::uint64_t blen) noexcept {
  return a < b + blen && b < a + alen;
}

}  // namespace

std::uint32_t PeerKeyTable::learn(std::uint32_t channel, const wire::RailKeys& rk) {
  std::vector<Entry>& t = tables_[channel];
  if (t.capacity() == 0) t.reserve(8);
  const auto before = t.size();
  std::erase_if(t, [&](const Entry& e) { return overlaps(e.addr, e.length, rk.addr, rk.length); });
  auto replaced = static_cast<std::uint32_t>(before - t.size());
  if (t.size() >= kMaxEntries) {
    const auto oldest =
        std::min_element(t.begin(), t.end(), [](const Entry& a, const Entry& b) { return a.used < b.used; });
    t.erase(oldest);
    ++replaced;
  }
  Entry e;
  e.addr = rk.addr;
  e.length = rk.length;
  e.rails = std::min<std::uint32_t>(rk.rails, transport::kMaxRails);
  for (std::uint32_t i = 0; i < e.rails; ++i) e.rkey[i] = rk.rkey[i];
  e.used = ++clock_;
  t.push_back(e);
  return replaced;
}

const PeerKeyTable::Entry* PeerKeyTable::find(std::uint32_t channel, std::uint64_t addr,
                                              std::uint64_t length) const noexcept {
  auto it = tables_.find(channel);
  if (it == tables_.end() || length == 0 || addr + length < addr) return nullptr;
  for (const Entry& e : it->second) {
    if (addr >= e.addr && addr + length <= e.addr + e.length) return &e;
  }
  return nullptr;
}

bool PeerKeyTable::fill(std::uint32_t channel, const wire::RemoteBuffer& rb,
                        std::array<std::uint32_t, transport::kMaxRails>& out) noexcept {
  auto* e = const_cast<Entry*>(find(channel, rb.addr, rb.length));
  if (e == nullptr) return false;
  e->used = ++clock_;
  out = {};
  for (std::uint32_t i = 0; i < e->rails; ++i) out[i] = e->rkey[i];
  return true;
}

std::uint32_t PeerKeyTable::size(std::uint32_t channel) const noexcept {
  auto it = tables_.find(channel);
  return it == tables_.end() ? 0 : static_cast<std::uint32_t>(it->second.size());
}

}  // namespace ferry::daemon::peer
