// Static device buffers from Python (LoaderOptions::static_device_buffers):
// each buffer is an object the caller owns that exports DLPack
// (__dlpack__): a CUDA torch tensor for a GPU loader, a numpy array or CPU
// tensor on the host backend. The Python Loader keeps the objects alive.
//
// Example (Python):
//   n = pinwheel.static_buffer_bytes(data, batch_size=64)
//   bufs = [torch.empty(n, dtype=torch.uint8, device="cuda") for _ in range(3)]
//   loader = pinwheel.Loader(data, batch_size=64, static_device_buffers=bufs)
//   for batch in loader: graphs[batch.buffer_index].replay()
#ifndef PINWHEEL_SAMPLES_PYTHON_EXT_PY_STATIC_BUFFERS_H_
#define PINWHEEL_SAMPLES_PYTHON_EXT_PY_STATIC_BUFFERS_H_

#include <nanobind/nanobind.h>
#include <vector>

#include "samples/python/ext/py_support.h"
#include "transfer/device.h"
#include "transfer/static_device_buffer.h"

namespace pinwheel::python {

// Returns the buffers of the sequence `buffers` for a loader on `device`,
// or throws InvalidArgument naming static_device_buffers[i] when one is not
// a DLPack exporter, is not C-contiguous, is read-only, or lives on another
// device than `device` (its address, alignment and size are checked by
// Build(), naming the same index). REQUIRES: the GIL.
std::vector<StaticDeviceBuffer> StaticBuffersFromPy(nb::handle buffers,
                                                    const Device& device);

// Adds _static_buffer_bytes(dataset, batch_size, device_transform,
// pad_last_batch, valid_field) to `m`.
void BindStaticBuffers(nb::module_& m);

}  // namespace pinwheel::python

#endif  // PINWHEEL_SAMPLES_PYTHON_EXT_PY_STATIC_BUFFERS_H_
