// DeviceBatch: one batch on the device, as the consumer receives it from
// Loader::Next(): per field a name, dtype, shape and device pointer; the
// `ready` event that fires when the copy has landed; and the duty to release
// it so its device buffer can be reused.
//
// Example (cuda backend, a trainer computing on `compute`):
//   Stream compute = Stream::Borrow(device, my_cuda_stream);
//   PINWHEEL_RETURN_IF_ERROR(batch.WaitOn(compute));  // no host sync
//   Launch(batch.field("image")->data, ..., my_cuda_stream);
//   PINWHEEL_RETURN_IF_ERROR(batch.Release(compute));  // fences the reuse
//
// Note [release fences reuse]
// Release(stream) records a `consumed` event on the consumer's stream; the
// buffer goes back to the pool behind that event, so the next copy into it
// waits for every kernel the consumer queued before the release, on whatever
// stream it uses (FFCV fenced on the default stream only, and a trainer on
// another stream could see its batch overwritten). A batch dropped without
// Release() is released on the stream it last waited on, or else on the
// legacy default stream (cuda) / at once (host).
#ifndef PINWHEEL_TRANSFER_DEVICE_BATCH_H_
#define PINWHEEL_TRANSFER_DEVICE_BATCH_H_

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

#include "transfer/batch_info.h"
#include "transfer/device.h"
#include "transfer/event.h"
#include "transfer/sample_layout.h"
#include "transfer/stream.h"

struct DLManagedTensor;

namespace pinwheel {

// One field of a batch on the device.
struct FieldView {
  std::string name;
  DType dtype = DType::kUInt8;
  std::vector<int64_t> shape;  // [batch, per-sample shape...]
  void* data = nullptr;        // device pointer (host pointer on host backend)
  size_t bytes = 0;            // bytes of this field for the whole batch

  // Returns `data` as T*.
  // REQUIRES: sizeof(T) == DTypeSize(dtype). Checked: a mismatch
  // (data_as<double>() on an f32 field) aborts with a message naming the
  // field, its dtype and sizeof(T), instead of reading other elements than
  // the batch holds.
  template <typename T>
  T* data_as() const {
    if (sizeof(T) != DTypeSize(dtype)) DieOfElementSize(sizeof(T));
    return static_cast<T*>(data);
  }

 private:
  [[noreturn]] void DieOfElementSize(size_t size) const {
    std::fprintf(stderr,
                 "pinwheel: FieldView::data_as(): field '%s' is %s (%zu bytes "
                 "an element), read as a type of %zu bytes\n",
                 name.c_str(), DTypeName(dtype).c_str(), DTypeSize(dtype),
                 size);
    std::abort();
  }
};

namespace internal {
struct BatchLease;
}

// Not thread-safe (one consumer at a time); move-only. Valid after the
// Loader that produced it is destroyed: the buffer stays allocated until the
// last batch is released.
class DeviceBatch {
 public:
  // An empty batch: released, on the host.
  DeviceBatch();
  DeviceBatch(DeviceBatch&&) noexcept;
  DeviceBatch& operator=(DeviceBatch&&) noexcept;
  DeviceBatch(const DeviceBatch&) = delete;
  DeviceBatch& operator=(const DeviceBatch&) = delete;
  // Releases the batch if still held (see Note [release fences reuse]).
  ~DeviceBatch();

  // The accessors below describe the batch while it is held; after
  // Release() (or a move) it holds nothing: size() is 0, no fields, and
  // device() stays the device it was on (the host for a default batch).

  // Returns the batch's identity: epoch, index, samples and their dataset
  // indices (an empty BatchInfo with epoch and index -1 once released).
  const BatchInfo& info() const;
  // Returns the epoch this batch belongs to.
  int64_t epoch() const;
  // Returns the position of this batch in its epoch's order (0-based).
  int64_t index() const;
  // Returns the number of samples (the last batch of an epoch may be short,
  // and skipped samples shorten a batch).
  int64_t size() const;
  // Returns the dataset indices of the samples, in batch order.
  absl::Span<const int64_t> sample_indices() const;
  const Device& device() const;
  // Returns which of the stage's device buffers holds the batch, in
  // 0..device_buffers-1 (with LoaderOptions::static_device_buffers: the
  // position of the caller's buffer it landed in, e.g. to pick the CUDA
  // graph captured over that buffer); -1 once released.
  int buffer_index() const;

  int num_fields() const;
  // Returns field `i`; an empty FieldView (no data, no shape) when `i` is
  // out of 0..num_fields()-1 or the batch is released.
  const FieldView& field(int i) const;
  // Returns the field named `name`, or NotFound listing the fields.
  [[nodiscard]] absl::StatusOr<FieldView> field(absl::string_view name) const;

  // Returns the event that completes when the batch's data is on the device.
  // Once released (or moved from): an event of device() that has completed
  // (never recorded), so waiting on it returns at once. The reference is
  // valid while the batch lives.
  const Event& ready() const;
  // Makes `consumer` wait for ready() (cudaStreamWaitEvent: no host sync;
  // host backend: the calling-thread stream blocks, a created host stream
  // queues the wait). Remembers `consumer` as the stream to release on.
  // REQUIRES: `consumer` outlives the batch, or the batch is released
  // explicitly before the stream is destroyed.
  [[nodiscard]] absl::Status WaitOn(const Stream& consumer);
  // Blocks the calling thread until the data is on the device.
  [[nodiscard]] absl::Status WaitOnHost() const;

  // Records `consumed` on `consumer` and gives the buffer back behind it.
  // Idempotent; after it the batch holds no data.
  [[nodiscard]] absl::Status Release(const Stream& consumer);
  // Release() on the stream last given to WaitOn (see the Note above).
  [[nodiscard]] absl::Status Release();
  bool released() const;

  // Returns a DLPack view of field `i` (no copy). The caller owns the
  // returned tensor and must call its deleter; the device buffer is not
  // reused before both the batch is released and every view is deleted.
  [[nodiscard]] absl::StatusOr<DLManagedTensor*> ToDLPack(int i) const;

 private:
  friend class TransferStage;
  // Made by TransferStage around a lease it filled.
  explicit DeviceBatch(std::shared_ptr<internal::BatchLease> lease);
  // Counts this batch as held by the consumer (TransferStage::Next()).
  // REQUIRES: the stage's lock (the lease's StageShared::mu) held.
  void MarkDelivered();

  std::shared_ptr<internal::BatchLease> lease_;
  // The lease's never-recorded event, kept for ready() after a release.
  std::shared_ptr<const Event> completed_;
};

}  // namespace pinwheel

#endif  // PINWHEEL_TRANSFER_DEVICE_BATCH_H_
