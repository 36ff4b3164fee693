// A client that speaks the attach protocol itself with only the shm headers
// (no libferry), so tests can put anything at all into its SQ.
#pragma once

#include <cstdint>
#include <string>

#include "shm/doorbell.h"
#include "shm/ring.h"
#include "shm/ring_entries.h"
#include "shm/segment.h"

namespace ferry::itest {

class RawClient {
 public:
  // Connects and attaches; ok() says whether it worked.
  explicit RawClient(const std::string& socket, const char* name = "raw");
  ~RawClient();
  bool ok() const { return ok_; }

  shm::SegmentView& view() { return seg_.view; }
  shm::RingProducer<shm::SqEntry>& sq() { return sq_; }
  shm::RingConsumer<shm::CqEntry>& cq() { return cq_; }
  std::uint64_t max_message() const { return seg_.view.header->max_message_bytes; }

  // Pushes (retrying while the SQ is full, up to the deadline) and rings.
  bool submit(const shm::SqEntry& e);
  void ring_sq() { sq_bell_.ring(); }
  // The doorbell descriptors as received, for tests that tamper with them.
  int sq_bell_fd() const { return sq_bell_.fd(); }
  int cq_bell_fd() const { return cq_bell_.fd(); }
  // Pops whatever completions are ready, waiting up to timeout_ms for one.
  std::uint32_t reap(shm::CqEntry* out, std::uint32_t max, int timeout_ms);
  // True once the daemon closed our connection (waits up to timeout_ms).
  bool hung_up(int timeout_ms);

 private:
  bool ok_ = false;
  int fd_ = -1;
  shm::MappedSegment seg_;
  shm::Doorbell sq_bell_, cq_bell_;
  shm::RingProducer<shm::SqEntry> sq_;
  shm::RingConsumer<shm::CqEntry> cq_;
};

}  // namespace ferry::itest
