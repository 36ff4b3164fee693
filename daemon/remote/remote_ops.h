// Operations this daemon sent to a peer and has not yet completed: Opens
// (waiting for the channel, then for OpenAck), Sends and Calls (waiting for
// the peer's Response; remote_sender.h) and Replies to remote callers
// (waiting for the transport's SendDone, since the payload is sent from the
// server's tx arena; remote_reply.h). Each owner keeps its own table.
// A slot pool like CallTable: the token sent on the wire packs slot and
// generation, so a late or forged answer finds nothing. Generations stay
// within WrTag::kGenerationBits (they wrap, skipping 0), so a token is also
// the payload of a work request's tag (wr_tag.h). Every entry is
// completed exactly once: whoever erases it (answer, SendDone failure,
// channel down, endpoint close, client gone) completes it.
// Engine thread only.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "daemon/remote/remote_keys.h"
#include "daemon/remote/wr_tag.h"
#include "daemon/session/operation.h"

namespace ferry::daemon {

enum class RemoteOpKind : std::uint8_t { Open, Send, Call, Reply };

struct RemoteOp {
  RemoteOpKind kind = RemoteOpKind::Send;
  std::uint32_t client = 0;
  std::uint32_t endpoint = 0;  // Send/Call: caller's endpoint
  std::uint32_t channel = 0;
  std::uint32_t lane = 0;
  std::uint64_t user_data = 0;
  std::uint64_t resp_offset = 0;  // Call
  std::uint32_t resp_length = 0;  // Call
  bool sent = false;              // Open: false while the channel is still coming up
  std::string service;            // Open only (control path: may allocate)
  Operation open{};               // Open: the client's op (routed again on a redirect)
  std::uint8_t redirects = 0;     // Open: redirects so far
  // Open: the daemon it names, and until when a failed set-up (a dial or a
  // handshake that missed connect-timeout-ms) is dialled again rather than
  // failing the Open; channel 0 while it waits for the next dial.
  std::string host;
  std::uint16_t port = 0;
  std::uint64_t retry_until_ns = 0;
  std::uint64_t retry_at_ns = 0;
  bool for_slot = false;       // waits for a free peer connection slot here (woken when one frees)
  bool found_no_room = false;  // a try found no free slot, here or at the peer: Busy if the budget ends
  // Send/Call: request bytes, charged to the send windows until answered.
  std::uint32_t bytes = 0;
  // rdma: the peer may access the caller's memory until it answers (the
  // rendezvous source, the response buffer): the op stays until then even
  // when its endpoint closes (`cancelled`) or its client detaches (the
  // session stays retired), so a late RDMA READ/WRITE never meets memory
  // handed back to the client or an MR already gone.
  bool exposed = false;
  bool resp_buffer = false;  // Call: the peer writes the response with RDMA WRITE with immediate
  // Its per-call keys (remote_keys.h; slot 0: none): the rendezvous
  // source's, the response buffer's. Opened before the request goes (it
  // goes once `opening` is 0), closed before the op ends (it ends, and its
  // client hears `outcome`, once `closing` is 0).
  RemoteKey key_src{};
  RemoteKey key_resp{};
  std::uint8_t opening = 0;
  std::uint8_t closing = 0;
  bool key_failed = false;  // an open failed: the op ends ProtocolError without being sent
  bool posted = false;      // the request went out: the peer may answer it
  bool concluding = false;  // ended, waiting for its keys to close
  bool notify = true;       // the client hears `outcome` at the end (false: it goes again, or nobody waits)
  Status outcome = Status::Ok;
  std::uint32_t outcome_length = 0;
  bool cancelled = false;  // completes Cancelled when the answer comes
  // Call: no answer by then means the peer lost it (remote_sender.h); 0: none.
  std::uint64_t answer_by_ns = 0;
  bool overdue = false;  // passed answer_by_ns: its channel is being failed, it completes Timeout
  // Send/Call: what goes again if the peer refuses it Busy (remote_sender.h).
  Operation entry{};
  std::uint64_t seq = 0;
  bool again = false;    // sent before (refused Busy) or with a given-up op's number
  bool charged = false;  // counted in the send windows (released when it ends)
  std::uint64_t deadline_ns = 0;
};

class RemoteOpTable {
 public:
  // `first_generation`: where new slots start counting (tests: near the wrap).
  explicit RemoteOpTable(std::size_t reserve, std::uint32_t first_generation = 0);

  std::uint64_t insert(RemoteOp op);  // token, never 0
  RemoteOp* find(std::uint64_t token) noexcept;
  // By the low 32 bits alone (the slot): what an RDMA WRITE with immediate
  // carries. Without the generation the caller must check kind/channel, and
  // the protocol must not let a stale immediate arrive (exposed ops stay
  // until answered, so a slot is reused only after its peer is done).
  RemoteOp* find_slot(std::uint32_t low, std::uint64_t* token) noexcept;
  void erase(std::uint64_t token) noexcept;
  std::size_t size() const noexcept { return live_; }

  // f(token, RemoteOp&) -> true to erase. Control-rate only (walks every slot).
  template <typename F>
  void sweep(F&& f) {
    for (std::uint32_t i = 0; i < slots_.size(); ++i) {
      if (slots_[i].live && f(token_of(i), slots_[i].op)) release(i);
    }
  }

 private:
  struct Slot {
    RemoteOp op;
    std::uint32_t generation = 0;
    bool live = false;
  };
  std::uint64_t token_of(std::uint32_t index) const noexcept {
    return (std::uint64_t{slots_[index].generation} << 32) | (std::uint64_t{index} + 1);
  }
  void release(std::uint32_t index) noexcept;

  std::uint32_t first_generation_ = 0;
  std::deque<Slot> slots_;  // deque: an Open's name stays put while the transport sends it
  std::vector<std::uint32_t> free_;
  std::size_t live_ = 0;
};

}  // namespace ferry::daemon
