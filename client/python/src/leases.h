// The buffer protocol for ferry's Python objects that lend out memory:
// ferry.Buffer (a tx arena block, writable) and ferry.Delivery (a message
// or request in the rx arena, read-only). Each view counts as an export;
// a freed or released lease refuses new views (BufferFreed), and free(),
// release() and close() refuse while views are alive (BufferInUse), so a
// view never outlives its memory.
//
// An export is an ExportToken, the Py_buffer's `obj`: it counts for as
// long as anything holds that object, not only until PyBuffer_Release.
// That matters for torch.frombuffer, which releases the Py_buffer at once
// and keeps a reference to its `obj` for the tensor's life: with the token
// there, the tensor is a live view and free() refuses while it exists.
#pragma once

#include <pybind11/pybind11.h>

#include "client_core.h"

namespace ferry::py {

// Installs getbuffer/releasebuffer on a pybind11 class created with
// pybind11::buffer_protocol().
void install_buffer_protocol(pybind11::handle cls, bool buffer_type);

// Fills `view` over [data, data + length) with a new ExportToken as its
// obj: *exports counts up now and down when the token dies; `keep` stays
// alive as long. Returns -1 with a Python error set on failure.
int export_view(Py_buffer* view, void* data, Py_ssize_t length, bool readonly, int flags, std::shared_ptr<void> keep,
                int* exports);

// The Python class objects (set by the module): for casting in the slots.
void bind_leases(pybind11::module_& m);

}  // namespace ferry::py
