// ScopedCudaDevice: makes one GPU's context current on the calling thread for
// a scope, then puts back exactly what was current before (which may be no
// context at all). Only for translation units built with the CUDA runtime.
//
// Example:
//   ScopedCudaDevice on_device(ordinal);
//   PINWHEEL_RETURN_IF_ERROR(on_device.status());
//   cudaHostAlloc(...);  // counted against `ordinal`'s context
//
// Note [current device without a stray context]
// Every CUDA runtime call on a thread with no current context initialises
// the primary context of the runtime's current device, which is device 0
// unless someone called cudaSetDevice: ~500 MiB of GPU 0 for a loader that
// works on cuda:1. And cudaSetDevice is no way to restore: since CUDA 12 it
// creates the device's context on the spot, so "setting back" device 0 for
// a caller that never used it creates the very context we avoid. So the
// guard works one level down, with the driver's context stack: it retains
// the target device's primary context (the one the runtime itself uses),
// pushes it when it is not current already, and pops it on exit. The
// caller's current context (or the lack of one) and the runtime's per-thread
// device selection are left exactly as they were. The driver functions come
// from cudaGetDriverEntryPointByVersion, so nothing links libcuda: binaries
// still load on machines without a driver.
#ifndef PINWHEEL_PINNING_BASE_CUDA_DEVICE_GUARD_H_
#define PINWHEEL_PINNING_BASE_CUDA_DEVICE_GUARD_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace pinwheel::internal {

// Not thread-safe (per thread by nature); neither copyable nor movable.
class ScopedCudaDevice {
 public:
  // Makes CUDA device `ordinal`'s primary context current; status() says
  // whether it worked (and, when not, nothing was changed).
  explicit ScopedCudaDevice(int ordinal);
  ~ScopedCudaDevice();
  ScopedCudaDevice(const ScopedCudaDevice&) = delete;
  ScopedCudaDevice& operator=(const ScopedCudaDevice&) = delete;

  const absl::Status& status() const { return status_; }

 private:
  absl::Status status_;
  bool pushed_ = false;
};

// Returns whether device `ordinal`'s primary context is active (has been
// created and not reset), without creating it; for tests that check a
// loader leaves the other GPUs alone. InvalidArgument for a bad ordinal.
absl::StatusOr<bool> CudaPrimaryContextActive(int ordinal);

// Returns whether the calling thread has a current CUDA context (for tests
// that check a call left a thread without one as it found it).
absl::StatusOr<bool> CudaThreadHasCurrentContext();

}  // namespace pinwheel::internal

#endif  // PINWHEEL_PINNING_BASE_CUDA_DEVICE_GUARD_H_
