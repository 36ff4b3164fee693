// Client segments: created and sealed by ferryd, mapped and validated by the
// client. Raw memfd/mmap rather than boost.interprocess: the fd travels over
// SCM_RIGHTS and must be sealed, which mapped_region has no say in.
#include "shm/segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

namespace ferry::shm {

// ---- Mapping ---------------------------------------------------------------

Mapping::~Mapping() { reset(); }

Mapping::Mapping(Mapping&& o) noexcept
    : base_(std::exchange(o.base_, nullptr)), bytes_(std::exchange(o.bytes_, 0)), fd_(std::exchange(o.fd_, -1)) {}

Mapping& Mapping::operator=(Mapping&& o) noexcept {
  if (this != &o) {
    reset();
    base_ = std::exchange(o.base_, nullptr);
    bytes_ = std::exchange(o.bytes_, 0);
    fd_ = std::exchange(o.fd_, -1);
  }
  return *this;
}

int Mapping::release_fd() noexcept { return std::exchange(fd_, -1); }

void Mapping::reset() noexcept {
  if (base_ != nullptr) ::munmap(base_, bytes_);
  if (fd_ >= 0) ::close(fd_);
  base_ = nullptr;
  bytes_ = 0;
  fd_ = -1;
}

// ---- Views -----------------------------------------------------------------

namespace {

SegmentView view_from_layout(std::byte* base, const SegmentLayout& l, std::uint32_t sq, std::uint32_t cq) noexcept {
  SegmentView v;
  v.base = base;
  v.header = reinterpret_cast<SegmentHeader*>(base);
  v.sq_header = reinterpret_cast<RingHeader*>(base + l.sq_header_offset);
  v.sq_entries = reinterpret_cast<SqEntry*>(base + l.sq_entries_offset);
  v.sq_capacity = sq;
  v.cq_header = reinterpret_cast<RingHeader*>(base + l.cq_header_offset);
  v.cq_entries = reinterpret_cast<CqEntry*>(base + l.cq_entries_offset);
  v.cq_capacity = cq;
  v.layout = l;
  return v;
}

// mmap of the whole fd, shared and writable by both sides.
void* map_fd(int fd, std::uint64_t bytes) noexcept {
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  return p == MAP_FAILED ? nullptr : p;
}

}  // namespace

SegmentView make_view(std::byte* base, const SegmentSizes& sizes) noexcept {
  return view_from_layout(base, compute_layout(sizes), sizes.sq_entries, sizes.cq_entries);
}

// ---- Daemon side -----------------------------------------------------------

Result<CreatedSegment> create_segment(const SegmentSizes& sizes, std::uint32_t client_id, std::uint64_t daemon_epoch,
                                      std::uint64_t max_message_bytes) {
  using R = Result<CreatedSegment>;
  if (!valid_sizes(sizes)) return R::fail(Status::BadRequest);
  const SegmentLayout l = compute_layout(sizes);

  int fd = ::memfd_create("ferry-seg", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) return R::fail(Status::NoMemory);
  // From here the Mapping owns fd (and later the mapping), so every early
  // return cleans up.
  Mapping m(nullptr, 0, fd);
  if (::ftruncate(fd, static_cast<off_t>(l.segment_bytes)) != 0) return R::fail(Status::NoMemory);
  // Seal before anyone else can see the fd: the client can then neither
  // shrink it under the daemon's mapping (SIGBUS) nor grow it.
  if (::fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    return R::fail(Status::NotSupported);
  }
  void* base = map_fd(fd, l.segment_bytes);
  if (base == nullptr) return R::fail(Status::NoMemory);
  m = Mapping(base, l.segment_bytes, m.release_fd());

  // A fresh memfd reads as zeroes; only the non-zero fields need writing,
  // but every field is set so the header reads as a complete record.
  auto* h = reinterpret_cast<SegmentHeader*>(m.base());
  *h = SegmentHeader{};
  h->magic = kSegmentMagic;
  h->abi_version = kAbiVersion;
  h->header_bytes = sizeof(SegmentHeader);
  h->segment_bytes = l.segment_bytes;
  h->daemon_epoch = daemon_epoch;
  h->client_id = client_id;
  h->sq_entries = sizes.sq_entries;
  h->cq_entries = sizes.cq_entries;
  h->regions = l;  // the layout's regions, as computed
  h->max_message_bytes = max_message_bytes;

  SegmentView v = make_view(m.base(), sizes);
  ring_init(v.sq_header);
  ring_init(v.cq_header);
  return R::ok(CreatedSegment{std::move(m), v});
}

// ---- Client side -----------------------------------------------------------

namespace {

// Walks the header's regions in ABI order; each must be aligned, start at or
// after the end of the previous one and end inside the segment. Copies of the
// header fields are checked (the daemon could still write the live header).
class RegionChecker {
 public:
  explicit RegionChecker(std::uint64_t segment_bytes, std::uint64_t header_bytes) noexcept
      : size_(segment_bytes), end_(header_bytes) {}

  bool next(std::uint64_t offset, std::uint64_t length, std::uint64_t align) noexcept {
    if (offset % align != 0 || offset < end_ || !range_inside(offset, length, 0, size_)) return false;
    end_ = offset + length;  // cannot overflow: range_inside held
    return true;
  }

 private:
  std::uint64_t size_;
  std::uint64_t end_;
};

Status validate_header(const SegmentHeader& h, std::uint64_t file_bytes) noexcept {
  if (h.magic != kSegmentMagic) return Status::BadRequest;
  if (h.abi_version != kAbiVersion) return Status::VersionMismatch;
  if (h.header_bytes != sizeof(SegmentHeader)) return Status::BadRequest;
  if (h.segment_bytes > file_bytes || h.segment_bytes < kPageSize) return Status::BadRequest;
  // Arena sizes are stored rounded up to kArenaAlign; the limits still hold.
  const SegmentRegions& r = h.regions;
  if (!valid_sizes({h.sq_entries, h.cq_entries, r.tx_bytes, r.rx_bytes})) return Status::BadRequest;
  if (r.tx_bytes % kArenaAlign != 0 || r.rx_bytes % kArenaAlign != 0) return Status::BadRequest;

  RegionChecker c(h.segment_bytes, h.header_bytes);
  const bool ok = c.next(r.sq_header_offset, sizeof(RingHeader), kCacheLine) &&
                  c.next(r.sq_entries_offset, std::uint64_t{h.sq_entries} * sizeof(SqEntry), kCacheLine) &&
                  c.next(r.cq_header_offset, sizeof(RingHeader), kCacheLine) &&
                  c.next(r.cq_entries_offset, std::uint64_t{h.cq_entries} * sizeof(CqEntry), kCacheLine) &&
                  c.next(r.tx_offset, r.tx_bytes, kArenaAlign) && c.next(r.rx_offset, r.rx_bytes, kArenaAlign);
  return ok ? Status::Ok : Status::BadRequest;
}

}  // namespace

Result<MappedSegment> map_segment(int fd) {
  using R = Result<MappedSegment>;
  if (fd < 0) return R::fail(Status::BadRequest);
  Mapping m(nullptr, 0, fd);  // owns fd from here, closes it on failure
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) return R::fail(Status::BadRequest);
  const auto file_bytes = static_cast<std::uint64_t>(st.st_size);
  if (file_bytes < kPageSize) return R::fail(Status::BadRequest);
  void* base = map_fd(fd, file_bytes);
  if (base == nullptr) return R::fail(Status::NoMemory);
  m = Mapping(base, file_bytes, m.release_fd());

  // Validate a private copy: the view is then built from values the daemon
  // can no longer change under us.
  SegmentHeader h;
  std::memcpy(&h, m.base(), sizeof h);
  if (Status s = validate_header(h, file_bytes); s != Status::Ok) return R::fail(s);

  SegmentLayout l{};
  static_cast<SegmentRegions&>(l) = h.regions;
  l.segment_bytes = h.segment_bytes;
  SegmentView v = view_from_layout(m.base(), l, h.sq_entries, h.cq_entries);
  return R::ok(MappedSegment{std::move(m), v});
}

}  // namespace ferry::shm
