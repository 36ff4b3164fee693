// Anonymous mappings for memory a daemon reserves per connection or lane but
// uses sparsely (send queues, receive buffers, lane rings): a page is
// committed only where it is written, and never as part of a transparent
// huge page. Under THP "always" (a common distribution default) one write
// into a large anonymous mapping commits a whole 2 MiB page: an idle peer's
// single message then cost 2 MiB of resident memory instead of 4 KiB.
// Setup and close paths only.
#pragma once

#include <cstddef>

namespace ferry::transport {

// A private anonymous mapping of `bytes`, MAP_NORESERVE (no swap or
// overcommit charge until written) and MADV_NOHUGEPAGE. nullptr on failure.
[[nodiscard]] std::byte* map_sparse(std::size_t bytes) noexcept;
void unmap_sparse(void* p, std::size_t bytes) noexcept;

}  // namespace ferry::transport
