// Stream: an ordered queue of copies and event records on a device.
//   cuda backend: a cudaStream_t (created non-blocking, or borrowed).
//   host backend: a created stream is a thread running its queue in order;
//     the borrowed "current thread" stream runs every operation at once on
//     the calling thread (the host backend's consumer computes synchronously).
//
// Example:
//   PINWHEEL_ASSIGN_OR_RETURN(Stream copy, Stream::Create(device));
//   PINWHEEL_RETURN_IF_ERROR(copy.CopyToDeviceAsync(dst, src, bytes));
//   Stream compute = Stream::Borrow(device, my_cuda_stream);
//   PINWHEEL_RETURN_IF_ERROR(compute.WaitFor(ready));  // no host sync
#ifndef PINWHEEL_TRANSFER_STREAM_H_
#define PINWHEEL_TRANSFER_STREAM_H_

#include <cstddef>
#include <functional>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include "transfer/device.h"

namespace pinwheel {

class Event;
namespace internal {
struct StreamImpl;
}

// Thread-safe for issuing work; move-only. An owned stream is destroyed after
// the work queued on it has finished; destroy it before its device is reset.
class Stream {
 public:
  // Returns a new stream on `device` that does not synchronize with the
  // legacy default stream.
  [[nodiscard]] static absl::StatusOr<Stream> Create(const Device& device);

  // Returns a non-owning stream. cuda: `native` is a cudaStream_t (nullptr
  // is the legacy default stream); it must outlive this object. host:
  // `native` must be nullptr and names the calling thread.
  static Stream Borrow(const Device& device, void* native = nullptr);

  Stream(Stream&&) noexcept;
  Stream& operator=(Stream&&) noexcept;
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  ~Stream();

  // Queues a copy of `bytes` from host `src` to device `dst`. With
  // page-locked `src` on the cuda backend the call returns at once.
  // REQUIRES: `src` stays unchanged and `dst` valid until the copy is done
  // (record an Event after it and wait on that).
  [[nodiscard]] absl::Status CopyToDeviceAsync(void* dst, const void* src,
                                               size_t bytes) const;
  // Queues a copy of `bytes` from device `src` to host `dst`. The host data
  // may be read only after an event recorded after it has completed.
  [[nodiscard]] absl::Status CopyToHostAsync(void* dst, const void* src,
                                             size_t bytes) const;
  // Queues a copy of `bytes` from device `src` to device `dst` (the ranges
  // must not overlap).
  [[nodiscard]] absl::Status CopyOnDeviceAsync(void* dst, const void* src,
                                               size_t bytes) const;
  // Queues setting `bytes` of device memory at `dst` to zero.
  [[nodiscard]] absl::Status ZeroAsync(void* dst, size_t bytes) const;
  // Makes later work on this stream wait for `event` (no host wait on cuda).
  [[nodiscard]] absl::Status WaitFor(const Event& event) const;
  // Queues `task` to run on a host thread once the work queued before it has
  // finished; later work waits for it. cuda: cudaLaunchHostFunc (`task` must
  // not call the CUDA API); host: the stream's thread (the calling-thread
  // stream runs it at once). This is how a DeviceTransform runs its host
  // loop on the host backend.
  [[nodiscard]] absl::Status EnqueueHostTask(std::function<void()> task) const;
  // Blocks the calling thread until all queued work has finished.
  [[nodiscard]] absl::Status Synchronize() const;

  const Device& device() const;
  // cuda: the cudaStream_t; host: an opaque handle of the queue (nullptr for
  // the calling-thread stream).
  void* native_handle() const;

  internal::StreamImpl* impl() const { return impl_.get(); }

 private:
  explicit Stream(std::unique_ptr<internal::StreamImpl> impl);
  std::unique_ptr<internal::StreamImpl> impl_;
};

}  // namespace pinwheel

#endif  // PINWHEEL_TRANSFER_STREAM_H_
