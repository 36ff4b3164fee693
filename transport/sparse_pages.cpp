// map_sparse (the header).
#include "transport/sparse_pages.h"

#include <sys/mman.h>

namespace ferry::transport {

std::byte* map_sparse(std::size_t bytes) noexcept {
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  // Advice only: a kernel without THP refuses it, and then there is no huge page to avoid.
  (void)::madvise(p, bytes, MADV_NOHUGEPAGE);
  return static_cast<std::byte*>(p);
}

void unmap_sparse(void* p, std::size_t bytes) noexcept {
  if (p != nullptr) (void)::munmap(p, bytes);
}

}  // namespace ferry::transport
