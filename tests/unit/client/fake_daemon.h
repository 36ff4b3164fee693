// A minimal in-process stand-in for ferryd's attach path: listens on a Unix
// SOCK_SEQPACKET socket in a fresh temp dir, answers one AttachRequest with a
// real segment and doorbells, and then hands the test the daemon side of the
// rings, so libferry can be tested against exact (and hostile) completions
// without a real daemon.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "ferry/client.h"
#include "ferry/ferry.h"
#include "shm/doorbell.h"
#include "shm/ring.h"
#include "shm/ring_entries.h"
#include "shm/segment.h"

namespace ferry::test {

class FakeDaemon {
 public:
  FakeDaemon();
  ~FakeDaemon();

  const std::string& socket_path() const { return path_; }
  // Accepts one connection and completes the attach handshake (blocking; run
  // it on a thread while the client attaches).
  bool accept_one(std::uint32_t client_id = 42, std::uint64_t epoch = 7);
  void hang_up();  // closes the client connection

  shm::SegmentView& view() { return seg_.view; }
  shm::RingConsumer<shm::SqEntry>& sq() { return sq_; }
  shm::RingProducer<shm::CqEntry>& cq() { return cq_; }
  void ring_cq() { cq_bell_.ring(); }
  // Pushes a completion and rings the CQ doorbell when the client sleeps.
  void complete(const shm::CqEntry& e);

 private:
  std::string dir_, path_;
  int listen_fd_ = -1, conn_fd_ = -1;
  shm::CreatedSegment seg_;
  shm::Doorbell sq_bell_, cq_bell_;
  shm::RingConsumer<shm::SqEntry> sq_;
  shm::RingProducer<shm::CqEntry> cq_;
};

// A libferry client attached to `d` (the fake answering on a thread), or
// nullptr when the attach failed; through the C API, the same.
std::unique_ptr<Client> attach_client(FakeDaemon& d, const char* name, bool busy_poll = false);
ferry_client* attach_c_client(FakeDaemon& d, const char* name);

}  // namespace ferry::test
