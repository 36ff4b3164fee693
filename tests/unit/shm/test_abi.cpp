// Segment ABI at run time: layout arithmetic, and create_segment/map_segment
// on real memfds, including seals and a client refusing corrupt headers.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <functional>

#include "shm/segment.h"

using ferry::Status;
using namespace ferry::shm;

namespace {

constexpr SegmentSizes kSmall{64, 64, kMinArenaBytes, kMinArenaBytes};

bool fd_open(int fd) { return ::fcntl(fd, F_GETFD) != -1; }

}  // namespace

TEST_CASE("layout is aligned, ordered and non-overlapping", "[abi]") {
  const SegmentSizes cases[] = {
      kSmall,
      {1024, 4096, 1 << 20, 1 << 20},
      {kMaxRingEntries, kMaxRingEntries, kMaxArenaBytes, kMaxArenaBytes},
      {128, 65536, (3 << 20) + 1, (5 << 20) + 4095},
  };
  for (const SegmentSizes& s : cases) {
    CAPTURE(s.sq_entries, s.cq_entries, s.tx_bytes, s.rx_bytes);
    REQUIRE(valid_sizes(s));
    const SegmentLayout l = compute_layout(s);
    REQUIRE(l.sq_header_offset >= sizeof(SegmentHeader));
    REQUIRE(l.sq_header_offset % kCacheLine == 0);
    REQUIRE(l.sq_entries_offset % kCacheLine == 0);
    REQUIRE(l.cq_header_offset % kPageSize == 0);
    REQUIRE(l.cq_entries_offset % kCacheLine == 0);
    REQUIRE(l.tx_offset % kArenaAlign == 0);
    REQUIRE(l.rx_offset % kArenaAlign == 0);
    REQUIRE(l.sq_entries_offset >= l.sq_header_offset + sizeof(RingHeader));
    REQUIRE(l.cq_header_offset >= l.sq_entries_offset + std::uint64_t{s.sq_entries} * sizeof(SqEntry));
    REQUIRE(l.cq_entries_offset >= l.cq_header_offset + sizeof(RingHeader));
    REQUIRE(l.tx_offset >= l.cq_entries_offset + std::uint64_t{s.cq_entries} * sizeof(CqEntry));
    REQUIRE(l.tx_bytes >= s.tx_bytes);
    REQUIRE(l.rx_offset >= l.tx_offset + l.tx_bytes);
    REQUIRE(l.rx_bytes >= s.rx_bytes);
    REQUIRE(l.segment_bytes == l.rx_offset + l.rx_bytes);
  }
}

TEST_CASE("valid_sizes edges", "[abi]") {
  REQUIRE(valid_sizes(kSmall));
  REQUIRE(valid_sizes({kMaxRingEntries, kMaxRingEntries, kMaxArenaBytes, kMaxArenaBytes}));
  REQUIRE_FALSE(valid_sizes({32, 64, kMinArenaBytes, kMinArenaBytes}));
  REQUIRE_FALSE(valid_sizes({64, 2 * kMaxRingEntries, kMinArenaBytes, kMinArenaBytes}));
  REQUIRE_FALSE(valid_sizes({96, 64, kMinArenaBytes, kMinArenaBytes}));  // not a power of two
  REQUIRE_FALSE(valid_sizes({0, 64, kMinArenaBytes, kMinArenaBytes}));
  REQUIRE_FALSE(valid_sizes({64, 64, kMinArenaBytes - 1, kMinArenaBytes}));
  REQUIRE_FALSE(valid_sizes({64, 64, kMinArenaBytes, kMaxArenaBytes + 1}));
  REQUIRE_FALSE(valid_sizes({64, 64, UINT64_MAX, kMinArenaBytes}));
}

TEST_CASE("range_inside is overflow safe", "[abi]") {
  REQUIRE(range_inside(100, 10, 100, 10));
  REQUIRE(range_inside(110, 0, 100, 10));  // empty range at the end
  REQUIRE_FALSE(range_inside(111, 0, 100, 10));
  REQUIRE_FALSE(range_inside(99, 1, 100, 10));
  REQUIRE_FALSE(range_inside(105, 6, 100, 10));
  REQUIRE_FALSE(range_inside(UINT64_MAX, 1, 0, 100));
  REQUIRE_FALSE(range_inside(10, UINT64_MAX, 0, 100));
  REQUIRE_FALSE(range_inside(UINT64_MAX - 5, 10, UINT64_MAX - 10, 10));  // offset+length wraps
  REQUIRE(range_inside(UINT64_MAX - 5, 5, UINT64_MAX - 10, 10));
  REQUIRE_FALSE(range_inside(UINT64_MAX - 5, 6, UINT64_MAX - 10, 10));
}

TEST_CASE("create_segment and map_segment round trip", "[abi][segment]") {
  const SegmentSizes sizes{256, 1024, 2 << 20, 3 << 20};
  auto created = create_segment(sizes, 42, 0xabcdef, 65536);
  REQUIRE(created.status == Status::Ok);
  CreatedSegment& c = created.value;
  const SegmentLayout l = compute_layout(sizes);
  REQUIRE(c.mapping.bytes() == l.segment_bytes);
  REQUIRE(c.mapping.fd() >= 0);
  REQUIRE(::fcntl(c.mapping.fd(), F_GETFD) == FD_CLOEXEC);

  const int seals = ::fcntl(c.mapping.fd(), F_GET_SEALS);
  REQUIRE(seals == (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL));
  REQUIRE(::ftruncate(c.mapping.fd(), static_cast<off_t>(l.segment_bytes / 2)) == -1);
  REQUIRE(errno == EPERM);
  REQUIRE(::ftruncate(c.mapping.fd(), static_cast<off_t>(l.segment_bytes * 2)) == -1);
  REQUIRE(errno == EPERM);
  REQUIRE(::fcntl(c.mapping.fd(), F_ADD_SEALS, F_SEAL_WRITE) == -1);  // sealed against new seals too

  auto mapped = map_segment(::dup(c.mapping.fd()));
  REQUIRE(mapped.status == Status::Ok);
  MappedSegment& m = mapped.value;
  REQUIRE(m.mapping.base() != c.mapping.base());

  const SegmentHeader& h = *m.view.header;
  REQUIRE(h.magic == kSegmentMagic);
  REQUIRE(h.abi_version == kAbiVersion);
  REQUIRE(h.header_bytes == sizeof(SegmentHeader));
  REQUIRE(h.segment_bytes == l.segment_bytes);
  REQUIRE(h.daemon_epoch == 0xabcdef);
  REQUIRE(h.client_id == 42);
  REQUIRE(h.sq_entries == 256);
  REQUIRE(h.cq_entries == 1024);
  REQUIRE(h.regions.tx_offset == l.tx_offset);
  REQUIRE(h.regions.tx_bytes == l.tx_bytes);
  REQUIRE(h.regions.rx_offset == l.rx_offset);
  REQUIRE(h.regions.rx_bytes == l.rx_bytes);
  REQUIRE(h.max_message_bytes == 65536);
  REQUIRE(h.reserved0 == 0);

  REQUIRE(m.view.sq_capacity == 256);
  REQUIRE(m.view.cq_capacity == 1024);
  REQUIRE(m.view.layout.cq_entries_offset == c.view.layout.cq_entries_offset);
  REQUIRE(reinterpret_cast<std::byte*>(m.view.cq_entries) - m.view.base ==
          static_cast<std::ptrdiff_t>(l.cq_entries_offset));
  for (const RingHeader* r : {m.view.sq_header, m.view.cq_header}) {
    REQUIRE(r->head.load() == 0);
    REQUIRE(r->tail.load() == 0);
    REQUIRE(r->consumer_waiting.load() == 0);
  }

  // The two mappings share memory: a ring pushed by one is popped by the other.
  RingProducer<SqEntry> prod(m.view.sq_header, m.view.sq_entries, m.view.sq_capacity);
  RingConsumer<SqEntry> cons(c.view.sq_header, c.view.sq_entries, c.view.sq_capacity);
  SqEntry e{};
  e.op = static_cast<std::uint8_t>(Op::Nop);
  e.user_data = 0x1234;
  REQUIRE(prod.try_push(e));
  SqEntry out{};
  REQUIRE(cons.pop_batch(&out, 1) == 1);
  REQUIRE(out.user_data == 0x1234);
  m.view.at(l.rx_offset + l.rx_bytes - 1)[0] = std::byte{0x5a};
  REQUIRE(c.view.at(l.rx_offset + l.rx_bytes - 1)[0] == std::byte{0x5a});

  // make_view agrees with what map_segment built from the header.
  const SegmentView v = make_view(m.mapping.base(), sizes);
  REQUIRE(v.sq_entries == m.view.sq_entries);
  REQUIRE(v.cq_header == m.view.cq_header);
  REQUIRE(v.layout.rx_offset == m.view.layout.rx_offset);
}

TEST_CASE("create_segment rejects invalid sizes", "[abi][segment]") {
  REQUIRE(create_segment({100, 64, kMinArenaBytes, kMinArenaBytes}, 1, 1, 1).status == Status::BadRequest);
  REQUIRE(create_segment({64, 64, 0, kMinArenaBytes}, 1, 1, 1).status == Status::BadRequest);
}

TEST_CASE("Mapping owns its fd and moves", "[abi][segment]") {
  auto created = create_segment(kSmall, 1, 1, 4096);
  REQUIRE(created);
  const int fd = created.value.mapping.fd();
  Mapping a = std::move(created.value.mapping);
  REQUIRE(created.value.mapping.fd() == -1);
  REQUIRE(created.value.mapping.base() == nullptr);
  REQUIRE(a.fd() == fd);
  Mapping b;
  b = std::move(a);
  REQUIRE(b.fd() == fd);
  REQUIRE(fd_open(fd));
  const int kept = b.release_fd();
  REQUIRE(kept == fd);
  REQUIRE(b.fd() == -1);
  b = Mapping();  // unmaps; the released fd stays open
  REQUIRE(fd_open(kept));
  ::close(kept);
}

TEST_CASE("map_segment rejects corrupt headers", "[abi][segment]") {
  struct Case {
    const char* name;
    std::function<void(SegmentHeader&)> corrupt;
    Status expect;
  };
  const Case cases[] = {
      {"magic", [](SegmentHeader& h) { h.magic ^= 1; }, Status::BadRequest},
      {"version", [](SegmentHeader& h) { h.abi_version = kAbiVersion + 1; }, Status::VersionMismatch},
      {"header_bytes", [](SegmentHeader& h) { h.header_bytes = 64; }, Status::BadRequest},
      {"segment past file", [](SegmentHeader& h) { h.segment_bytes += kPageSize; }, Status::BadRequest},
      {"tx past end", [](SegmentHeader& h) { h.regions.tx_offset = h.segment_bytes; }, Status::BadRequest},
      {"rx offset wraps", [](SegmentHeader& h) { h.regions.rx_offset = UINT64_MAX - kArenaAlign + 1; },
       Status::BadRequest},
      {"rx bytes past end", [](SegmentHeader& h) { h.regions.rx_bytes += kArenaAlign; }, Status::BadRequest},
      {"sq entries not pow2", [](SegmentHeader& h) { h.sq_entries = 96; }, Status::BadRequest},
      {"cq entries too many", [](SegmentHeader& h) { h.cq_entries = 2 * kMaxRingEntries; }, Status::BadRequest},
      {"sq entries grown into cq", [](SegmentHeader& h) { h.sq_entries = 128; }, Status::BadRequest},
      {"cq header overlaps its entries", [](SegmentHeader& h) { h.regions.cq_header_offset += 64; },
       Status::BadRequest},
      // Pure misalignment: still ordered and non-overlapping (gaps before these).
      {"cq header misaligned", [](SegmentHeader& h) { h.regions.cq_header_offset -= 8; }, Status::BadRequest},
      {"tx arena misaligned", [](SegmentHeader& h) { h.regions.tx_offset -= kCacheLine; }, Status::BadRequest},
      {"tx overlaps cq", [](SegmentHeader& h) { h.regions.tx_offset = h.regions.cq_entries_offset; },
       Status::BadRequest},
      {"rx overlaps tx", [](SegmentHeader& h) { h.regions.rx_offset -= kArenaAlign; }, Status::BadRequest},
      {"sq header inside header", [](SegmentHeader& h) { h.regions.sq_header_offset = 64; }, Status::BadRequest},
  };
  for (const Case& k : cases) {
    CAPTURE(k.name);
    auto created = create_segment(kSmall, 7, 9, 4096);
    REQUIRE(created);
    k.corrupt(*created.value.view.header);
    const int fd = ::dup(created.value.mapping.fd());
    auto mapped = map_segment(fd);
    REQUIRE(mapped.status == k.expect);
    REQUIRE_FALSE(fd_open(fd));  // map_segment took ownership and closed it
  }

  // Control: the untouched segment maps.
  auto created = create_segment(kSmall, 7, 9, 4096);
  REQUIRE(map_segment(::dup(created.value.mapping.fd())).status == Status::Ok);
}

TEST_CASE("map_segment rejects fds that are not segments", "[abi][segment]") {
  REQUIRE(map_segment(-1).status == Status::BadRequest);
  const int tiny = ::memfd_create("tiny", MFD_CLOEXEC);
  REQUIRE(tiny >= 0);
  REQUIRE(::ftruncate(tiny, 100) == 0);
  REQUIRE(map_segment(tiny).status == Status::BadRequest);
  const int zeroes = ::memfd_create("zeroes", MFD_CLOEXEC);
  REQUIRE(::ftruncate(zeroes, 1 << 20) == 0);
  REQUIRE(map_segment(zeroes).status == Status::BadRequest);
  int p[2];
  REQUIRE(::pipe(p) == 0);
  REQUIRE(map_segment(p[0]).status == Status::BadRequest);
  ::close(p[1]);
}
