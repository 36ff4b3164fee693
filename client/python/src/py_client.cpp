// ferry.Client and ferry.Handle: libferry's Client for Python. Every
// potentially blocking call (attach, serve, open, waits) runs without the
// GIL; submissions take the client's lock (never waiting for it with the
// GIL held) and return a Handle whose completion any waiting thread may
// collect (client_core.h).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cmath>
#include <limits>

#include "client_core.h"
#include "errors.h"
#include "ferry/error.h"
#include "leases.h"

namespace ferry::py {

namespace pyb = pybind11;
using namespace pybind11::literals;

namespace {

constexpr auto kSignalSlice = std::chrono::milliseconds(100);
constexpr auto kBusyRetry = std::chrono::seconds(5);

struct Handle {
  std::shared_ptr<ClientCore> core;
  std::shared_ptr<OpState> op;
};

Clock::time_point deadline_after(const pyb::object& timeout) {
  if (timeout.is_none()) return Clock::time_point::max();
  const double s = timeout.cast<double>();
  if (!(s >= 0) || !std::isfinite(s)) raise(Status::BadRequest, "timeout must be a number of seconds >= 0");
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

std::chrono::milliseconds ms_of(double seconds) {
  if (!(seconds >= 0) || !std::isfinite(seconds)) raise(Status::BadRequest, "timeout must be a number of seconds >= 0");
  return std::chrono::milliseconds(static_cast<std::int64_t>(std::ceil(seconds * 1000)));
}

// Waits for pred in slices, without the GIL, letting Ctrl-C through between slices.
template <typename Pred>
bool wait_interruptible(ClientCore& c, Pred pred, Clock::time_point deadline) {
  for (;;) {
    const auto slice = std::min(deadline, Clock::now() + kSignalSlice);
    bool done;
    {
      pyb::gil_scoped_release nogil;
      done = c.wait_until(pred, slice);
    }
    if (done) return true;
    if (Clock::now() >= deadline) return false;
    if (PyErr_CheckSignals() != 0) throw pyb::error_already_set();
  }
}

ClientCore& open_core(ClientCore& c) {
  if (!c.client) raise("Closed", "the client is closed");
  return c;
}

// libferry's messages about a client, into Python's logging as the logger
// "ferry". Called inside a libferry call of that client, with the client's
// lock held and usually without the GIL: it takes the GIL (a thread that
// holds it never blocks on that lock: lock_from_python()). A failing
// handler loses the message only.
void log_to_python(LogLevel level, std::string_view message) {
  pyb::gil_scoped_acquire gil;
  try {
    int py_level = 40;  // logging.ERROR
    switch (level) {
      case LogLevel::Debug: py_level = 10; break;
      case LogLevel::Info: py_level = 20; break;
      case LogLevel::Warn: py_level = 30; break;
      case LogLevel::Error:
      case LogLevel::Off: break;
    }
    pyb::module_::import("logging").attr("getLogger")("ferry").attr("log")(py_level, "%s",
                                                                           pyb::str(message.data(), message.size()));
  } catch (const pyb::error_already_set&) {
  }
}

// In a child of fork() the inherited client refuses everything (libferry
// never lets it touch the parent's rings): say so, rather than NoMemory or
// a wait that can only time out. Caller holds c.mu.
void refuse_if_forked(ClientCore& c, std::unique_lock<std::mutex>& lk, const char* what) {
  if (!c.client || c.client->state() != Status::Forked) return;
  lk.unlock();
  raise(Status::Forked, std::string(what) +
                            ": this client was attached by the parent of this forked process; "
                            "attach a new one here");
}

std::shared_ptr<ClientCore> attach(const std::string& socket, const std::string& name, std::uint64_t tx_bytes,
                                   std::uint64_t rx_bytes, std::uint32_t sq_entries, std::uint32_t cq_entries,
                                   bool busy_poll, int log_level) {
  AttachOptions a;
  if (log_level < 0 || log_level > static_cast<int>(LogLevel::Off)) raise(Status::BadRequest, "bad log level");
  if (log_level != 0) a.log_level = static_cast<LogLevel>(log_level);
  a.log = log_to_python;
  a.socket_path = socket;
  a.name = name;
  a.tx_bytes = tx_bytes;
  a.rx_bytes = rx_bytes;
  a.sq_entries = sq_entries;
  a.cq_entries = cq_entries;
  a.busy_poll = busy_poll;
  Result<std::unique_ptr<Client>> r;
  {
    pyb::gil_scoped_release nogil;
    r = Client::attach(a);
  }
  if (!r) {
    raise(r.status, "cannot attach to ferryd at '" + (socket.empty() ? default_socket_path() : socket) +
                        "': " + std::string(to_string(r.status)));
  }
  auto core = std::make_shared<ClientCore>();
  core->event_fd = r.value->event_fd();
  core->busy_poll = busy_poll;
  core->client = std::move(r.value);
  return core;
}

std::shared_ptr<BufferLease> alloc(const std::shared_ptr<ClientCore>& core, std::int64_t nbytes) {
  if (nbytes <= 0) raise(Status::BadRequest, "alloc(" + std::to_string(nbytes) + "): a buffer needs at least one byte");
  const auto bytes = static_cast<std::size_t>(nbytes);
  auto lease = std::make_shared<BufferLease>();
  {
    auto lk = lock_from_python(core->mu);
    ClientCore& c = open_core(*core);
    refuse_if_forked(c, lk, "alloc");
    c.reclaim_locked();
    if (bytes > c.client->max_message_bytes()) {
      lk.unlock();
      raise(Status::BadRequest, "alloc(" + std::to_string(bytes) + "): larger than the daemon's max message size " +
                                    std::to_string(core->client->max_message_bytes()));
    }
    lease->block = c.client->alloc(bytes);
    if (lease->block) c.track_locked(lease);
  }
  if (!lease->block)
    raise(Status::NoMemory, "alloc(" + std::to_string(bytes) + "): the tx arena (or the client's quota) is full");
  lease->core = core;
  lease->size = static_cast<std::uint32_t>(bytes);
  return lease;
}

// Whether a lease can be given back now: Busy, with the reason, when not.
Error busy_reason(const Lease& l, const char* what) {
  if (l.exports > 0)
    return Error(Status::Busy, std::string(what) + " has " + std::to_string(l.exports) +
                                   " live view(s) (memoryview, numpy array, torch tensor): drop them first");
  if (l.in_flight > 0)
    return Error(Status::Busy, std::string(what) + " is used by an operation in flight: wait for its handle first");
  return {};
}

void free_buffer(const std::shared_ptr<ClientCore>& core, BufferLease& b) {
  if (b.core != core) raise(Status::BadRequest, "free(): the buffer belongs to another client");
  Error busy;
  {
    auto lk = lock_from_python(core->mu);
    if (b.invalid) {
      lk.unlock();
      raise("BufferFreed", "free(): the buffer was already freed (or its client closed)");
    }
    busy = busy_reason(b, "the buffer");
    if (busy.ok()) b.invalid = true;  // the block goes back when the Buffer object dies (client_core.h)
  }
  if (busy.failed()) raise("BufferInUse", "free(): " + busy.message());
}

Buffer checked_view(const std::shared_ptr<ClientCore>& core, const std::shared_ptr<BufferLease>& b, const char* what) {
  if (!b) return Buffer{};
  if (b->core != core) raise(Status::BadRequest, std::string(what) + ": the buffer belongs to another client");
  if (b->invalid) raise("BufferFreed", std::string(what) + ": the buffer was freed (or its client closed)");
  return b->view();
}

std::uint32_t checked_length(const pyb::object& length, const std::shared_ptr<BufferLease>& b, const char* what) {
  const std::uint64_t size = b ? b->size : 0;
  if (length.is_none()) return static_cast<std::uint32_t>(size);
  const auto n = length.cast<std::int64_t>();
  if (n < 0 || static_cast<std::uint64_t>(n) > size)
    raise(Status::BadRequest, std::string(what) + ": length " + std::to_string(n) + " outside the buffer (" +
                                  std::to_string(size) + " bytes)");
  return static_cast<std::uint32_t>(n);
}

// Submits with `submit(user_data)`, retrying (without the GIL) while the
// submission ring is full; registers the op so its OpDone reaches it.
template <typename Submit>
Handle submit_op(const std::shared_ptr<ClientCore>& core, OpKind kind, std::shared_ptr<BufferLease> request,
                 std::shared_ptr<BufferLease> response, const char* what, Submit submit) {
  auto op = std::make_shared<OpState>();
  op->op = kind;
  Status st;
  {
    auto lk = lock_from_python(core->mu);
    if (!core->client) {
      lk.unlock();
      raise("Closed", std::string(what) + ": the client is closed");
    }
    // The leases' state is re-checked under the lock: another thread may have freed them.
    if ((request && request->invalid) || (response && response->invalid)) {
      lk.unlock();
      raise("BufferFreed", std::string(what) + ": a buffer was freed (or its client closed)");
    }
    const std::uint64_t ud = core->next_user_data++;
    st = submit(*core->client, ud);
    if (st == Status::Busy) {
      // The submission ring is full: collect completions (without the GIL) and retry.
      lk.unlock();
      pyb::gil_scoped_release nogil;
      lk.lock();
      const auto deadline = Clock::now() + kBusyRetry;
      while (st == Status::Busy && core->client && Clock::now() < deadline) {
        core->pump_locked();
        st = submit(*core->client, ud);
        if (st == Status::Busy) sleep_on_fd(*core, lk, Clock::now() + std::chrono::milliseconds(1));
      }
      if (!core->client) st = Status::Cancelled;
    }
    if (st == Status::Ok) {
      op->request = std::move(request);
      op->response = std::move(response);
      if (op->request) ++op->request->in_flight;
      if (op->response) ++op->response->in_flight;
      core->ops.emplace(ud, op);
    }
  }
  if (st != Status::Ok) raise(st, std::string(what) + " not submitted: " + std::string(to_string(st)));
  return Handle{core, op};
}

pyb::object wait_handle(Handle& h, const pyb::object& timeout) {
  const auto deadline = deadline_after(timeout);
  auto& op = *h.op;
  {
    auto lk = lock_from_python(h.core->mu);
    if (!op.done) refuse_if_forked(*h.core, lk, "wait");
  }
  if (!wait_interruptible(
          *h.core, [&] { return op.done; }, deadline)) {
    raise(Status::Timeout, std::string(to_string(op.op)) + " still in flight after the wait's timeout");
  }
  if (op.status != Status::Ok)
    raise(op.status, std::string(to_string(op.op)) + " failed: " + std::string(to_string(op.status)));
  if (op.op == OpKind::Call) return pyb::int_(op.length);
  return pyb::none();
}

// Moves collected deliveries into leases (under the lock), then into Python objects.
pyb::list take_deliveries(const std::shared_ptr<ClientCore>& core, std::unique_lock<std::mutex>& lk, std::size_t most) {
  std::vector<std::shared_ptr<DeliveryLease>> out;
  while (!core->deliveries.empty() && out.size() < most) {
    auto d = std::make_shared<DeliveryLease>();
    d->core = core;
    d->delivery = core->deliveries.front();
    core->deliveries.pop_front();
    core->track_locked(d);
    out.push_back(std::move(d));
  }
  lk.unlock();
  pyb::list list;
  for (auto& d : out) list.append(pyb::cast(d));
  return list;
}

void release_delivery(const std::shared_ptr<ClientCore>& core, DeliveryLease& d) {
  if (d.core != core) raise(Status::BadRequest, "release(): the delivery belongs to another client");
  Error busy;
  {
    auto lk = lock_from_python(core->mu);
    if (d.invalid) return;  // released twice, or the client closed: nothing to give back
    busy = busy_reason(d, "the delivery");
    if (busy.ok()) d.invalid = true;  // handed back when the Delivery object dies (client_core.h)
  }
  if (busy.failed()) raise("BufferInUse", "release(): " + busy.message());
}

void close_client(const std::shared_ptr<ClientCore>& core) {
  auto lk = lock_from_python(core->mu);
  if (!core->client) return;
  for (const auto& w : core->leases)
    if (auto l = w.lock()) l->invalid = true;
  core->leases.clear();
  core->fail_all_locked(Status::Cancelled);
  for (const Completion& d : core->deliveries) core->client->release(d);
  core->deliveries.clear();
  // Hang up now; unmap only once no Python object can point into the
  // segment (views hold their leases, leases the core: ~ClientCore).
  core->client->detach();
  core->retired = std::move(core->client);
}

// A blocking control op (serve, open, ...): f(client) without the GIL, under
// the client's lock; `gone` once the client is detached.
template <class R, class F>
R control_op(const std::shared_ptr<ClientCore>& core, R gone, F&& f) {
  pyb::gil_scoped_release nogil;
  std::lock_guard<std::mutex> g(core->mu);
  return core->client ? f(*core->client) : gone;
}

// serve() and open() refuse a name or target of the wrong form: what the form is.
std::string naming_hint(Status status, bool target = false) {
  if (status == Status::ServiceExists) return " (a client of this ferryd serves that name already)";
  if (status != Status::BadRequest) return "";
  return std::string(" (") + (target ? "a target is SERVICE or HOST[:PORT]/SERVICE; " : "") +
         "a service name is 1 to 64 letters, digits, '.', '_' or '-')";
}

}  // namespace

void bind_client(pyb::module_& m) {
  pyb::class_<Handle>(m, "Handle", R"(
An operation in flight (send, call or reply). wait() blocks (without the
GIL) until it completes and returns the response length of a call (None for
send and reply), or raises the ferry.Error of its status. `await handle`
does the same inside an asyncio loop (ferry registers the client's fd with
the loop).)")
      .def("wait", &wait_handle, "timeout"_a = pyb::none(),
           "Block until done (timeout in seconds, None: until done); the call's response length.")
      .def("done",
           [](const Handle& h) {
             auto lk = lock_from_python(h.core->mu);
             return h.op->done;
           })
      .def_property_readonly("status",
                             [](const Handle& h) -> pyb::object {
                               auto lk = lock_from_python(h.core->mu);
                               if (!h.op->done) return pyb::none();
                               return pyb::str(std::string(to_string(h.op->status)));
                             })
      .def_property_readonly("op", [](const Handle& h) { return std::string(to_string(h.op->op)); })
      .def_property_readonly("client", [](const Handle& h) { return h.core; });

  pyb::class_<ClientCore, std::shared_ptr<ClientCore>>(m, "Client", R"(
A process's attachment to its ferryd (ferry.attach()). Owns buffers in the
shared tx arena, serves services, opens endpoints, and submits sends and
calls. Thread safe: calls from several threads are serialised on the
client, and a thread blocked in a wait never stops another from
submitting or collecting.)")
      .def("alloc", &alloc, "nbytes"_a, "A ferry.Buffer of nbytes in the tx arena (raises NoMemory when full).")
      .def("free", &free_buffer, "buffer"_a)
      .def(
          "serve",
          [](const std::shared_ptr<ClientCore>& core, const std::string& name, double timeout) {
            const auto r = control_op(core, Result<ServiceId>::fail(Status::Cancelled),
                                      [&](Client& c) { return c.serve(name, ms_of(timeout)); });
            if (!r)
              raise(r.status, "serve('" + name + "'): " + std::string(to_string(r.status)) + naming_hint(r.status));
            return r.value;
          },
          "name"_a, "timeout"_a = 10.0, "Serve a named service; returns its id (deliveries carry it).")
      .def(
          "unserve",
          [](const std::shared_ptr<ClientCore>& core, ServiceId id, double timeout) {
            check(control_op(core, Status::Cancelled, [&](Client& c) { return c.unserve(id, ms_of(timeout)); }),
                  "unserve");
          },
          "service"_a, "timeout"_a = 10.0)
      .def(
          "open",
          [](const std::shared_ptr<ClientCore>& core, const std::string& target, double timeout) {
            const auto r = control_op(core, Result<EndpointId>::fail(Status::Cancelled),
                                      [&](Client& c) { return c.open(target, ms_of(timeout)); });
            if (!r)
              raise(r.status,
                    "open('" + target + "'): " + std::string(to_string(r.status)) + naming_hint(r.status, true));
            return r.value;
          },
          "target"_a, "timeout"_a = 10.0, "Open 'SERVICE' (this host) or 'HOST:PORT/SERVICE'; returns an endpoint id.")
      .def(
          "close_endpoint",
          [](const std::shared_ptr<ClientCore>& core, EndpointId ep, double timeout) {
            check(control_op(core, Status::Cancelled, [&](Client& c) { return c.close(ep, ms_of(timeout)); }),
                  "close_endpoint");
          },
          "endpoint"_a, "timeout"_a = 10.0)
      .def(
          "send",
          [](const std::shared_ptr<ClientCore>& core, EndpointId ep, const std::shared_ptr<BufferLease>& buf,
             const pyb::object& length) {
            const Buffer b = checked_view(core, buf, "send");
            const std::uint32_t n = checked_length(length, buf, "send");
            return submit_op(core, OpKind::Send, buf, nullptr, "send",
                             [&](Client& c, std::uint64_t ud) { return c.send(ep, b, n, ud); });
          },
          "endpoint"_a, "buffer"_a, "length"_a = pyb::none(), "A one-way message of buffer[:length]; returns a Handle.")
      .def(
          "call",
          [](const std::shared_ptr<ClientCore>& core, EndpointId ep, const std::shared_ptr<BufferLease>& req,
             const std::shared_ptr<BufferLease>& resp, const pyb::object& length, const pyb::object& timeout) {
            const Buffer rq = checked_view(core, req, "call");
            const Buffer rs = checked_view(core, resp, "call");
            const std::uint32_t n = checked_length(length, req, "call");
            const auto ms = timeout.is_none() ? std::chrono::milliseconds(0) : ms_of(timeout.cast<double>());
            return submit_op(core, OpKind::Call, req, resp, "call",
                             [&](Client& c, std::uint64_t ud) { return c.call(ep, rq, n, rs, ud, ms); });
          },
          "endpoint"_a, "request"_a, "response"_a, "length"_a = pyb::none(), "timeout"_a = pyb::none(),
          "A call: request[:length] out, the answer lands in `response` (zero copy). Returns a Handle; "
          "its wait() gives the response length. timeout (s): how long the call may wait at the server.")
      .def(
          "reply",
          [](const std::shared_ptr<ClientCore>& core, const DeliveryLease& request,
             const std::shared_ptr<BufferLease>& buf, const pyb::object& length) {
            if (request.core != core || request.delivery.kind != Completion::Kind::Request)
              raise(Status::BadRequest, "reply(): not a request delivered to this client");
            const Buffer b = checked_view(core, buf, "reply");
            const std::uint32_t n = checked_length(length, buf, "reply");
            const std::uint64_t token = request.delivery.token;
            return submit_op(core, OpKind::Reply, buf, nullptr, "reply",
                             [&](Client& c, std::uint64_t ud) { return c.reply(token, b, n, ud); });
          },
          "request"_a, "buffer"_a = pyb::none(), "length"_a = pyb::none(),
          "Answer a request with buffer[:length] (None: an empty answer); returns a Handle.")
      .def("release", &release_delivery, "delivery"_a, "Hand a delivered message or request back to the daemon.")
      .def(
          "poll",
          [](const std::shared_ptr<ClientCore>& core) {
            auto lk = lock_from_python(core->mu);
            refuse_if_forked(*core, lk, "poll");
            if (core->client) core->pump_locked();
            return take_deliveries(core, lk, SIZE_MAX);
          },
          "Collect completions without blocking; returns the deliveries (messages, requests) that arrived.")
      .def(
          "wait",
          [](const std::shared_ptr<ClientCore>& core, double timeout) {
            const auto deadline = Clock::now() + ms_of(timeout);
            std::uint64_t before;
            {
              auto lk = lock_from_python(core->mu);
              refuse_if_forked(*core, lk, "wait");
              before = core->completed;
            }
            wait_interruptible(
                *core,
                [&] {
                  return !core->deliveries.empty() || core->completed != before || !core->client ||
                         core->daemon_gone_locked();
                },
                deadline);
            auto lk = lock_from_python(core->mu);
            pyb::list got = take_deliveries(core, lk, SIZE_MAX);
            // Nothing more can come: say so rather than return nothing, at once, for ever.
            if (got.empty() && core->completed == before && core->daemon_gone_locked())
              raise(Status::DaemonGone, "wait(): ferryd went away");
            return got;
          },
          "timeout"_a,
          "Block up to timeout seconds until something completes or arrives; returns the deliveries that arrived. "
          "Raises DaemonGone once ferryd is gone and nothing is left to hand out.")
      .def(
          "recv",
          [](const std::shared_ptr<ClientCore>& core, const pyb::object& timeout) -> pyb::object {
            {
              auto lk = lock_from_python(core->mu);
              refuse_if_forked(*core, lk, "recv");
            }
            wait_interruptible(
                *core, [&] { return !core->deliveries.empty() || !core->client || core->daemon_gone_locked(); },
                deadline_after(timeout));
            auto lk = lock_from_python(core->mu);
            pyb::list one = take_deliveries(core, lk, 1);
            if (one.empty() && core->daemon_gone_locked()) raise(Status::DaemonGone, "recv(): ferryd went away");
            return one.empty() ? pyb::object(pyb::none()) : pyb::object(one[0]);
          },
          "timeout"_a = pyb::none(),
          "The next delivery (blocking up to timeout seconds), or None. Raises DaemonGone once ferryd is gone and "
          "every delivery that arrived before has been handed out.")
      .def(
          "fileno",
          [](const std::shared_ptr<ClientCore>& core) {
            auto lk = lock_from_python(core->mu);
            open_core(*core);
            return core->event_fd;
          },
          "Readable when completions may be ready (for select/epoll/asyncio); then call poll().")
      .def("close", &close_client,
           "Detach from ferryd now: operations in flight end Cancelled, every buffer and delivery raises "
           "BufferFreed from then on. Views still alive (tensors, arrays) keep the memory mapped, unused, "
           "until they are gone.")
      .def("_pump",
           [](const std::shared_ptr<ClientCore>& core) {
             auto lk = lock_from_python(core->mu);
             return core->client ? core->pump_locked() : false;
           })
      .def_property_readonly("closed",
                             [](const std::shared_ptr<ClientCore>& core) {
                               auto lk = lock_from_python(core->mu);
                               return !core->client;
                             })
      .def_property_readonly("state",
                             [](const std::shared_ptr<ClientCore>& core) {
                               auto lk = lock_from_python(core->mu);
                               return core->client ? std::string(to_string(core->client->state())) : "Closed";
                             })
      .def_property_readonly("max_message_bytes",
                             [](const std::shared_ptr<ClientCore>& core) {
                               auto lk = lock_from_python(core->mu);
                               return open_core(*core).client->max_message_bytes();
                             })
      .def_property_readonly("client_id",
                             [](const std::shared_ptr<ClientCore>& core) {
                               auto lk = lock_from_python(core->mu);
                               return open_core(*core).client->client_id();
                             })
      .def_property_readonly("in_flight",
                             [](const std::shared_ptr<ClientCore>& core) {
                               auto lk = lock_from_python(core->mu);
                               return core->ops.size();
                             })
      .def("__repr__",
           [](const std::shared_ptr<ClientCore>& core) {
             auto lk = lock_from_python(core->mu);
             if (!core->client) return std::string("<ferry.Client: closed>");
             return "<ferry.Client " + std::to_string(core->client->client_id()) + ": " +
                    std::string(to_string(core->client->state())) + ", " + std::to_string(core->ops.size()) +
                    " in flight>";
           })
      .def_property_readonly("stats", [](const std::shared_ptr<ClientCore>& core) {
        auto lk = lock_from_python(core->mu);
        const ClientStats s = open_core(*core).client->stats();
        pyb::dict d;
        d["dropped_completions"] = s.dropped_completions;
        d["deferred_releases"] = s.deferred_releases;
        d["release_failures"] = s.release_failures;
        d["inline_deliveries"] = s.inline_deliveries;
        return d;
      });

  m.def("attach", &attach, "socket"_a = "", "name"_a = "", "tx_bytes"_a = 0, "rx_bytes"_a = 0, "sq_entries"_a = 0,
        "cq_entries"_a = 0, "busy_poll"_a = false, "log_level"_a = 0);
  m.def("default_socket_path", &default_socket_path);
}

}  // namespace ferry::py
