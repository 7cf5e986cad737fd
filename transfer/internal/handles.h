// StreamImpl and EventImpl: what a Stream and an Event hold, a backend
// handle and the backend that made it; shared by stream.cc and event.cc.
#ifndef PINWHEEL_TRANSFER_INTERNAL_HANDLES_H_
#define PINWHEEL_TRANSFER_INTERNAL_HANDLES_H_

#include "transfer/device.h"
#include "transfer/internal/backend.h"

namespace pinwheel {
namespace internal {

struct StreamImpl {
  Device device;
  Backend* backend;
  void* handle;
  bool owned;
  ~StreamImpl() {
    if (owned && handle != nullptr)
      backend->DestroyStream(device.ordinal(), handle);
  }
};

struct EventImpl {
  Device device;
  Backend* backend;
  void* handle;
  ~EventImpl() {
    if (handle != nullptr) backend->DestroyEvent(device.ordinal(), handle);
  }
};

}  // namespace internal

}  // namespace pinwheel

#endif  // PINWHEEL_TRANSFER_INTERNAL_HANDLES_H_
