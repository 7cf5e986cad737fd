// StaticDeviceBuffer: a device buffer the caller owns and lends to a loader
// (LoaderOptions::static_device_buffers), so that every batch lands at one of
// a few fixed addresses: a captured CUDA graph reads fixed addresses.
//
// Example (cuda backend; 2 buffers, each of the loader's device buffer
// bytes, see LoaderBuilder::device_buffer_bytes()):
//   void* a; void* b;
//   cudaMalloc(&a, bytes); cudaMalloc(&b, bytes);
//   LoaderBuilder(dataset).batch_size(256)
//       .static_device_buffers({{a, bytes}, {b, bytes}}).Build();
//   ... batch.buffer_index() says which of a and b the batch is in ...
#ifndef PINWHEEL_TRANSFER_STATIC_DEVICE_BUFFER_H_
#define PINWHEEL_TRANSFER_STATIC_DEVICE_BUFFER_H_

#include <cstddef>

namespace pinwheel {

// A value type: it borrows, never owns. The memory must stay allocated until
// the loader (or TransferStage) is destroyed and every batch delivered into
// it, DLPack views included, is released; pinwheel waits, before letting go
// of it, for the copies into it and the consumer's release fences.
struct StaticDeviceBuffer {
  // Device memory of the loader's device (cudaMalloc; host memory on the
  // host backend), aligned to BatchLayout::kFieldAlignment (256) bytes.
  void* data = nullptr;
  // Its size in bytes; at least the loader's device buffer bytes.
  size_t bytes = 0;
};

}  // namespace pinwheel

#endif  // PINWHEEL_TRANSFER_STATIC_DEVICE_BUFFER_H_
