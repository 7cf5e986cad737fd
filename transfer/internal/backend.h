// The two backends behind Stream, Event and device memory. Handles are
// opaque: cudaStream_t / cudaEvent_t on the cuda backend, pinwheel's own
// queue and flag objects on the host backend. A null stream handle is the
// legacy default stream (cuda) or the calling thread (host).
#ifndef PINWHEEL_TRANSFER_INTERNAL_BACKEND_H_
#define PINWHEEL_TRANSFER_INTERNAL_BACKEND_H_

#include <cstddef>
#include <functional>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include "transfer/device.h"

namespace pinwheel::internal {

enum class CopyDirection { kHostToDevice, kDeviceToHost, kDeviceToDevice };

// Every call takes the ordinal of the device its handles belong to; the cuda
// backend makes that device's context current for the call and restores the
// caller's (Note [current device without a stray context] in
// pinning/base/cuda_device_guard.h): no call leaves the caller's current
// device switched or creates a context on another GPU.
// Thread-safe.
class Backend {
 public:
  virtual ~Backend() = default;
  virtual absl::StatusOr<void*> CreateStream(int ordinal) = 0;
  virtual void DestroyStream(int ordinal, void* stream) = 0;
  virtual absl::StatusOr<void*> CreateEvent(int ordinal) = 0;
  virtual void DestroyEvent(int ordinal, void* event) = 0;
  virtual absl::Status RecordEvent(int ordinal, void* event, void* stream) = 0;
  virtual absl::StatusOr<bool> QueryEvent(int ordinal, void* event) = 0;
  virtual absl::Status SynchronizeEvent(int ordinal, void* event) = 0;
  virtual absl::Status StreamWaitEvent(int ordinal, void* stream,
                                       void* event) = 0;
  virtual absl::Status CopyAsync(int ordinal, void* stream, void* dst,
                                 const void* src, size_t bytes,
                                 CopyDirection direction) = 0;
  virtual absl::Status SynchronizeStream(int ordinal, void* stream) = 0;
  // Queues setting `bytes` of device memory at `dst` to zero.
  virtual absl::Status ZeroAsync(int ordinal, void* stream, void* dst,
                                 size_t bytes) = 0;
  // Queues `task` to run on a host thread once the work queued on `stream`
  // before it has finished; later work on the stream waits for it (cuda:
  // cudaLaunchHostFunc; host: the stream's thread, or at once on the calling
  // thread for the null stream). `task` must not call the CUDA API.
  virtual absl::Status LaunchHostTask(int ordinal, void* stream,
                                      std::function<void()> task) = 0;
  virtual absl::StatusOr<void*> AllocateDevice(int ordinal, size_t bytes) = 0;
  virtual void FreeDevice(int ordinal, void* ptr) = 0;
  // Returns OK when `ptr` is memory of device `ordinal` that copies and
  // kernels may write (caller-owned static device buffers), or why not.
  // The host backend cannot tell host memory from its "device" memory: OK.
  virtual absl::Status CheckDeviceMemory(int /*ordinal*/, const void* /*ptr*/) {
    return absl::OkStatus();
  }
};

// Returns the host backend (always present).
Backend& HostBackend();
// Returns the cuda backend, or nullptr in a build without CUDA.
Backend* CudaBackend();
// Returns the backend serving `device`.
Backend& BackendFor(const Device& device);

// The cuda backend's device queries (0 / "" without CUDA).
int CudaDeviceCountImpl();
std::string CudaDeviceDescription(int ordinal);
// "0000:3b:00.0" (lower case, as in sysfs), or "" when unknown.
std::string CudaPciBusId(int ordinal);

}  // namespace pinwheel::internal

#endif  // PINWHEEL_TRANSFER_INTERNAL_BACKEND_H_
