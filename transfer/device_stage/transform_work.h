// EnqueueTransformWork: how a DeviceTransform::Run() queues its work on the
// transfer stream, picking the backend in one place: kernels on the cuda
// backend (with the stream's GPU current), the same arithmetic as a host
// task on the host backend (Stream::EnqueueHostTask(), what CI runs).
//
// Example (inside Run()):
//   auto launch = [&] {  // in a CUDA build (pinning/base/cuda_status.h)
//     return LaunchStatus(LaunchMyKernel(..., stream.native_handle()),
//                         "my_kernel");
//   };
//   return internal::EnqueueTransformWork(stream, launch,
//                                         [=] { MyLoopOnHost(...); });
//
// `launch` is called only in a CUDA build, so it may call launchers that
// only a CUDA build defines (transfer/device_stage/transform_kernels.h,
// loader/gather/gather_kernels.h); LaunchStatus() turns their errors into a
// Status. Thread-safe (no state).
#ifndef PINWHEEL_TRANSFER_DEVICE_STAGE_TRANSFORM_WORK_H_
#define PINWHEEL_TRANSFER_DEVICE_STAGE_TRANSFORM_WORK_H_

#include <functional>
#include <utility>

#include "absl/status/status.h"

#include "transfer/stream.h"

#ifdef PINWHEEL_HAVE_CUDA
#include "pinning/base/cuda_device_guard.h"
#endif

namespace pinwheel::internal {

// Returns the status of queueing a transform's work on `stream`. On the
// cuda backend: what `launch()` (an absl::Status; it launches on
// stream.native_handle()) returns, called with the stream's device current
// and the caller's restored after (as every backend call does), or the
// error of making it current; FailedPrecondition in a build without CUDA.
// On the host backend: `host_task` queued with Stream::EnqueueHostTask().
template <typename Launch>
[[nodiscard]] absl::Status EnqueueTransformWork(
    const Stream& stream, Launch&& launch, std::function<void()> host_task) {
  if (!stream.device().is_cuda()) {
    return stream.EnqueueHostTask(std::move(host_task));
  }
#ifdef PINWHEEL_HAVE_CUDA
  ScopedCudaDevice on_device(stream.device().ordinal());
  if (!on_device.status().ok()) return on_device.status();
  return std::forward<Launch>(launch)();
#else
  (void)launch;
  return absl::FailedPreconditionError("this build has no CUDA backend");
#endif
}

}  // namespace pinwheel::internal

#endif  // PINWHEEL_TRANSFER_DEVICE_STAGE_TRANSFORM_WORK_H_
