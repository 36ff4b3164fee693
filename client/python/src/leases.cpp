#include "leases.h"

#include <string>

#include "errors.h"

namespace ferry::py {

namespace pyb = pybind11;

namespace {

// One export: lives as long as the Py_buffer's obj is referenced.
struct ExportToken {
  std::shared_ptr<void> keep;
  int* exports = nullptr;
  ~ExportToken() {
    if (exports != nullptr) --*exports;  // with the GIL: Python objects die under it
  }
};

// The memory a lease lends: data, length, read-only.
struct Region {
  void* data = nullptr;
  Py_ssize_t length = 0;
  bool readonly = false;
};

template <typename L>
L* lease_of(PyObject* obj) {
  try {
    return pyb::handle(obj).cast<L*>();
  } catch (const pyb::cast_error&) {
    return nullptr;
  }
}

Region region_of(BufferLease& b) { return {b.block.data, static_cast<Py_ssize_t>(b.size), false}; }
Region region_of(DeliveryLease& d) {
  return {const_cast<std::byte*>(d.delivery.data), static_cast<Py_ssize_t>(d.delivery.length), true};
}

template <typename L>
int get_buffer(PyObject* obj, Py_buffer* view, int flags) {
  L* lease = lease_of<L>(obj);
  if (lease == nullptr) {
    PyErr_SetString(PyExc_TypeError, "not a ferry buffer");
    view->obj = nullptr;
    return -1;
  }
  if (lease->invalid) {
    set_error("BufferFreed", std::is_same_v<L, BufferLease>
                                 ? "the buffer was freed (or its client closed): its memory is gone"
                                 : "the delivery was released (or its client closed): its memory is gone");
    view->obj = nullptr;
    return -1;
  }
  const Region r = region_of(*lease);
  std::shared_ptr<L> keep;
  try {
    keep = pyb::handle(obj).cast<std::shared_ptr<L>>();
  } catch (const pyb::cast_error&) {
    PyErr_SetString(PyExc_TypeError, "not a ferry buffer");
    view->obj = nullptr;
    return -1;
  }
  return export_view(view, r.data, r.length, r.readonly, flags, keep, &lease->exports);
}

}  // namespace

int export_view(Py_buffer* view, void* data, Py_ssize_t length, bool readonly, int flags, std::shared_ptr<void> keep,
                int* exports) {
  pyb::object token;
  try {
    token = pyb::cast(ExportToken{std::move(keep), nullptr});
  } catch (const pyb::error_already_set& e) {
    const_cast<pyb::error_already_set&>(e).restore();
    view->obj = nullptr;
    return -1;
  }
  if (PyBuffer_FillInfo(view, token.ptr(), data, length, readonly ? 1 : 0, flags) != 0) return -1;
  token.cast<ExportToken&>().exports = exports;
  ++*exports;
  return 0;
}

void install_buffer_protocol(pyb::handle cls, bool buffer_type) {
  auto* heap = reinterpret_cast<PyHeapTypeObject*>(cls.ptr());
  // The view's obj is an ExportToken (which has no buffer procs): releasing
  // a view only drops the token, so no releasebuffer is needed here.
  heap->as_buffer.bf_getbuffer = buffer_type ? get_buffer<BufferLease> : get_buffer<DeliveryLease>;
  heap->as_buffer.bf_releasebuffer = nullptr;
}

void bind_leases(pyb::module_& m) {
  pyb::class_<ExportToken>(m, "_Export", "One live view of ferry memory (the Py_buffer's owner object).");

  auto buffer = pyb::class_<BufferLease, std::shared_ptr<BufferLease>>(m, "Buffer", pyb::buffer_protocol(), R"(
A block of the client's tx arena: the memory a send, call or reply carries,
and where a call's response lands. Supports the buffer protocol (zero copy):
memoryview(buf), numpy.frombuffer(buf, dtype), torch.frombuffer(buf, dtype=...).
free() (or leaving a `with` block) gives it back; it refuses while views are
alive or an operation uses it, and any use afterwards raises BufferFreed.)");
  buffer.def("__len__", [](const BufferLease& b) { return b.size; })
      .def_property_readonly("client", [](const BufferLease& b) { return b.core; })
      .def_property_readonly(
          "capacity", [](const BufferLease& b) { return b.block.capacity; },
          "bytes the block really has (len() is what was asked for)")
      .def_property_readonly(
          "offset", [](const BufferLease& b) { return b.block.offset; }, "the block's offset in the shared segment")
      .def_property_readonly("freed", [](const BufferLease& b) { return b.invalid; })
      .def_property_readonly(
          "exports", [](const BufferLease& b) { return b.exports; },
          "live views (memoryview, numpy, torch) of this buffer")
      .def_property_readonly(
          "in_flight", [](const BufferLease& b) { return b.in_flight; },
          "operations using this buffer that have not completed")
      .def("__repr__", [](const BufferLease& b) {
        return "<ferry.Buffer " + std::to_string(b.size) + " bytes" + (b.invalid ? ", freed>" : ">");
      });
  install_buffer_protocol(buffer, true);

  auto delivery = pyb::class_<DeliveryLease, std::shared_ptr<DeliveryLease>>(m, "Delivery", pyb::buffer_protocol(), R"(
A message or request delivered to a service this client serves. Its payload
is read-only memory in the rx arena (buffer protocol, zero copy) until
release(); a request is answered with client.reply(request, buffer, length).)");
  delivery
      .def_property_readonly(
          "kind",
          [](const DeliveryLease& d) { return d.delivery.kind == Completion::Kind::Request ? "request" : "message"; })
      .def_property_readonly("client", [](const DeliveryLease& d) { return d.core; })
      .def_property_readonly("service", [](const DeliveryLease& d) { return d.delivery.handle; })
      .def_property_readonly("token", [](const DeliveryLease& d) { return d.delivery.token; })
      .def_property_readonly("source", [](const DeliveryLease& d) { return d.delivery.source; })
      .def_property_readonly("released", [](const DeliveryLease& d) { return d.invalid; })
      .def_property_readonly("exports", [](const DeliveryLease& d) { return d.exports; })
      .def("__len__", [](const DeliveryLease& d) { return d.delivery.length; })
      .def("__repr__", [](const DeliveryLease& d) {
        return std::string("<ferry.Delivery ") +
               (d.delivery.kind == Completion::Kind::Request ? "request " : "message ") +
               std::to_string(d.delivery.length) + " bytes" + (d.invalid ? ", released>" : ">");
      });
  install_buffer_protocol(delivery, false);
}

}  // namespace ferry::py
