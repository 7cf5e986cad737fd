// TransferStage: takes filled pinned slots in the order they are submitted,
// copies each batch to a device buffer with one asynchronous copy on its own
// (non-default) stream, records `copy_done`, recycles the slot behind that
// event and hands the consumer a DeviceBatch.
//
// Example:
//   PINWHEEL_ASSIGN_OR_RETURN(std::unique_ptr<TransferStage> stage,
//       TransferStage::Create(device, ring.get(), batch_layout, 2));
//   stage->Submit({.info = {.epoch = 0, .index = 0, .samples = 256,
//                           .sample_indices = {...}},
//                  .slot = slot.index});
//   PINWHEEL_ASSIGN_OR_RETURN(TransferStage::Delivery d,
//                             stage->Next(absl::InfiniteFuture()));
//
// Note [one copy per batch]
// A batch's fields live in one slot (see BatchLayout), so the whole batch is
// one cudaMemcpyAsync of BatchLayout::CopyBytes(samples) bytes: one DMA
// descriptor, no per-field launch overhead. Fields a device transform reads
// only on the host (DeviceTransform::ReadsOnlyOnHost) are left out: then
// one copy per run of consecutive copied fields (see Note [fields read only
// on the host] in transfer_stage.cc).
#ifndef PINWHEEL_TRANSFER_TRANSFER_STAGE_H_
#define PINWHEEL_TRANSFER_TRANSFER_STAGE_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

#include "pinning/pinned_ring.h"
#include "transfer/batch_info.h"
#include "transfer/device.h"
#include "transfer/device_batch.h"
#include "transfer/device_buffer_pool.h"
#include "transfer/device_transform.h"
#include "transfer/event.h"
#include "transfer/sample_layout.h"
#include "transfer/static_device_buffer.h"
#include "transfer/stream.h"
#include "transfer/transfer_stats.h"

namespace pinwheel {

// What a producer submits: a filled slot, or an error in its place, or the
// end of an epoch.
struct FilledBatch {
  enum class Kind { kBatch, kError, kEndOfEpoch };
  Kind kind = Kind::kBatch;
  // kBatch: the batch's identity, moved on into its DeviceBatch. kError: the
  // epoch and index of the batch that failed; kEndOfEpoch: the epoch that
  // ended and its batch count as index.
  BatchInfo info;
  int slot = -1;       // kBatch: the ring slot holding the batch
  absl::Status error;  // kError: why this batch could not be produced
};

// What the device stage does with a sample its transform cannot produce
// (see Note [samples a transform skips] in transfer_stage.cc).
struct SampleFaultPolicy {
  // false: the batch fails with the transform's Status (ErrorPolicy::kStop;
  // kReplace too, which the device stage cannot do). true: the sample is
  // left out of its batch and counted in TransferStats::samples_skipped
  // (ErrorPolicy::kSkipSample).
  bool skip = false;
  // With skip, LoaderOptions::pad_last_batch: the batch keeps its size, the
  // samples left out becoming zero-filled padding at its end (sample index
  // -1, counted in BatchInfo::padded).
  bool pad = false;
};

namespace internal {
struct StageShared;
}

// Thread-safe: Submit() from producer threads, Next() from the consumer.
class TransferStage {
 public:
  // A delivery: a batch, or an error in its place, or the end of an epoch.
  // A batch's identity is its DeviceBatch's (batch.info()); epoch and index
  // say where every kind of delivery stands (for kBatch the same as
  // batch.epoch() and batch.index()).
  struct Delivery {
    FilledBatch::Kind kind = FilledBatch::Kind::kBatch;
    int64_t epoch = 0;
    int64_t index = 0;
    DeviceBatch batch;   // kBatch
    absl::Status error;  // kError
  };

  // Starts the copy thread. `ring` is borrowed and must outlive the stage.
  // With a `transform` (the device stage, see transfer/device_transform.h)
  // each device buffer also holds the transform's output, and deliveries
  // show the output fields; InvalidArgument, naming the transform, when its
  // OutputLayout() refuses `layout` or the fields it delivers clash.
  // With `static_buffers` (caller-owned, see transfer/static_device_buffer.h)
  // the batches land in those instead of buffers the stage allocates, each
  // used for DeviceBufferBytes() bytes, with the same fences and release
  // rules; `device_buffers` must equal their count. InvalidArgument naming
  // the buffer when one cannot be used (DeviceBufferPool::Borrow()).
  // `faults` says what a sample the transform cannot produce does.
  // REQUIRES: ring->slot_bytes() >= layout.slot_bytes().
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<TransferStage>> Create(
      const Device& device, PinnedRing* ring, const BatchLayout& layout,
      int device_buffers,
      std::shared_ptr<const DeviceTransform> transform = nullptr,
      const std::vector<StaticDeviceBuffer>& static_buffers = {},
      SampleFaultPolicy faults = {});

  // Returns the bytes of each device buffer of a stage over `layout` with
  // `transform` (null: none), or Create()'s error about the transform;
  // allocates nothing (for validation and memory admission before Create).
  [[nodiscard]] static absl::StatusOr<size_t> DeviceBufferBytes(
      const BatchLayout& layout,
      std::shared_ptr<const DeviceTransform> transform);

  TransferStage(const TransferStage&) = delete;
  TransferStage& operator=(const TransferStage&) = delete;
  // Calls Shutdown().
  ~TransferStage();

  // Queues `batch` for copying; deliveries keep submission order. When
  // nothing is queued and a device buffer is free, issues the copy on the
  // calling thread instead (never blocks on a buffer).
  void Submit(FilledBatch batch) ABSL_LOCKS_EXCLUDED(mu_);

  // The gather path with its order on the device (Note [the order on the
  // device] in loader/pipeline/gather_path.h): runs `run` (which queues the
  // batch's writes into the outputs it is given, on the stream it is given)
  // into a free device buffer on the calling thread, records the buffer's
  // ready event and queues the batch for Next(), as Submit() does a copied
  // batch; nothing is copied and no slot is used. Returns false, issuing
  // nothing, when no buffer is free and a batch is ready for Next() or the
  // consumer holds every buffer (Next() then says so); otherwise waits for
  // a buffer released behind its fence.
  // `info` is moved from only when the batch is issued. REQUIRES: a
  // transform (its outputs are what `run` writes); no concurrent Submit().
  using IssueRun = absl::FunctionRef<absl::Status(const DeviceTransformBatch&,
                                                  const Stream&)>;
  [[nodiscard]] absl::StatusOr<bool> Issue(BatchInfo& info, IssueRun run)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Returns the next delivery, waiting until `deadline` (then
  // DeadlineExceeded). FailedPrecondition when the consumer holds every
  // device buffer (no copy could ever land); Cancelled after Shutdown().
  [[nodiscard]] absl::StatusOr<Delivery> Next(absl::Time deadline)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Drops every queued and undelivered batch (recycling their slots) and
  // returns once the stage is idle. For restarting an epoch.
  // REQUIRES: no concurrent Submit(). FailedPrecondition when the consumer
  // holds every device buffer.
  [[nodiscard]] absl::Status DiscardPending() ABSL_LOCKS_EXCLUDED(mu_);

  // Stops the copy thread and joins it; queued slots are recycled. Batches
  // already delivered stay valid. Idempotent.
  void Shutdown() ABSL_LOCKS_EXCLUDED(mu_);

  // Returns true when nothing is queued, being copied or waiting for the
  // consumer.
  bool Idle() const ABSL_LOCKS_EXCLUDED(mu_);

  TransferStats stats() const ABSL_LOCKS_EXCLUDED(mu_);
  const Stream& copy_stream() const { return copy_stream_; }
  // Returns the device transform's output layout (an empty BatchLayout
  // without a transform).
  const BatchLayout& output_layout() const { return plan_.output; }
  // Returns the layout of the fields each delivery carries, in their order:
  // the copied batch's without a transform; with one, its outputs then the
  // inputs it keeps (see Note [the delivered layout] in transfer_stage.cc).
  const BatchLayout& delivered_layout() const {
    return plan_.transform == nullptr ? layout_ : plan_.delivered;
  }
  // Returns the bytes of one device buffer (the copied batch, plus the
  // transform's output when there is one).
  size_t device_buffer_bytes() const { return pool_->buffer_bytes(); }
  // Returns the bytes the stage copies to the device for a batch of
  // `samples` samples (BatchLayout::CopyBytes, less the fields the
  // transform reads only on the host).
  size_t CopyBytes(int64_t samples) const;

 private:
  // The device stage's wiring, decided once by Create().
  struct TransformPlan {
    std::shared_ptr<const DeviceTransform> transform;  // null: none
    BatchLayout output;        // what it writes, per buffer
    size_t output_offset = 0;  // where, in each device buffer
    std::vector<int> kept;     // input fields delivered after the outputs
    // Per input field, its offset in a device buffer, or kHostOnly for a
    // field the transform reads only on the host (not copied).
    std::vector<size_t> device_offset;
    // The copies of one batch: runs of consecutive copied fields.
    struct CopyRun {
      int first = 0;  // fields first..last
      int last = 0;
    };
    std::vector<CopyRun> copies;
    BatchLayout delivered;  // the outputs, then the kept inputs
  };
  static constexpr size_t kHostOnly = ~size_t{0};
  // Returns the plan for `transform` over `layout`, or why it cannot run.
  static absl::StatusOr<TransformPlan> PlanTransform(
      const BatchLayout& layout,
      std::shared_ptr<const DeviceTransform> transform);

  TransferStage(const Device& device, PinnedRing* ring, BatchLayout layout,
                Stream copy_stream, std::shared_ptr<DeviceBufferPool> pool,
                std::shared_ptr<internal::StageShared> shared,
                std::vector<std::shared_ptr<Event>> copy_done,
                std::vector<std::shared_ptr<Event>> consumed,
                std::vector<std::shared_ptr<Event>> slot_copied,
                std::shared_ptr<const Event> completed, TransformPlan plan,
                SampleFaultPolicy faults);
  void CopyLoop();
  // What one copy adds to the stats; folded in with the delivery, under the
  // same lock.
  struct CopyCost {
    int64_t bytes = 0;
    bool waited = false;
    absl::Duration wait = absl::ZeroDuration();
    absl::Duration issue = absl::ZeroDuration();
    int64_t skipped = 0;       // samples the transform could not produce
    std::string last_skipped;  // the last one's cause
  };
  // Copies `batch` into a buffer it waits for (the copy thread).
  absl::StatusOr<Delivery> Copy(FilledBatch batch, CopyCost& cost);
  // Copies `batch` into `buffer`, which the caller acquired.
  absl::StatusOr<Delivery> Copy(FilledBatch batch,
                                const DeviceBufferPool::Buffer& buffer,
                                CopyCost& cost);
  // Appends a copy's delivery (or its error) to ready_ and its cost to the
  // stats.
  void Publish(absl::StatusOr<Delivery> delivery, const CopyCost& cost)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Returns whether the consumer holds every device buffer (no copy can land
  // until it lets one go).
  bool ConsumerHoldsEveryBuffer() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Returns the delivery of a marker (an end of epoch, an error; `marker`'s
  // error is moved from).
  static Delivery MarkerOf(FilledBatch& marker);
  // Returns the batch `info` in `buffer` (its copy or gather queued), for
  // the consumer.
  DeviceBatch LeaseOf(BatchInfo info, const DeviceBufferPool::Buffer& buffer);
  // Leaves the samples the transform skipped out of `info` and packs the
  // kept input fields of `buffer` alike, on the copy stream (see Note
  // [samples a transform skips]).
  absl::Status DropSkipped(const std::vector<SampleFault>& skipped,
                           std::byte* buffer, BatchInfo& info,
                           CopyCost& cost) const;
  // Returns the bytes of `run` for a batch of `samples` samples.
  size_t RunBytes(const TransformPlan::CopyRun& run, int64_t samples) const;
  // Returns the fields of a batch of `samples` samples in `buffer`, as
  // delivered (the transform's outputs and the inputs it keeps, or the
  // copied fields).
  std::shared_ptr<const std::vector<FieldView>> FieldsOf(std::byte* buffer,
                                                         int64_t samples) const;

  const Device device_;
  PinnedRing* const ring_;
  const BatchLayout layout_;
  Stream copy_stream_;
  std::shared_ptr<DeviceBufferPool> pool_;
  // Per device buffer: its copy_done and consumed events (pooled: creating
  // events in the steady state would take the driver's lock).
  const std::vector<std::shared_ptr<Event>> copy_done_;
  const std::vector<std::shared_ptr<Event>> consumed_;
  // Per ring slot: recorded after the copy out of that slot, the fence it is
  // recycled behind (see Note [a slot's own fence] in transfer_stage.cc).
  const std::vector<std::shared_ptr<Event>> slot_copied_;
  // Never recorded (complete): what a released batch's ready() returns.
  const std::shared_ptr<const Event> completed_;
  const TransformPlan plan_;
  const SampleFaultPolicy faults_;
  // Per device buffer: the fields of a full batch in it (as delivered).
  std::vector<std::shared_ptr<const std::vector<FieldView>>> full_batch_fields_;
  // With a transform, per device buffer: the full batch's copied fields and
  // the transform's output fields (DeviceTransformBatch's views).
  std::vector<std::vector<FieldView>> transform_input_;
  std::vector<std::vector<FieldView>> transform_output_;
  // Per ring slot, its fields, for a transform that ReadsHostInput().
  std::vector<std::vector<FieldView>> transform_host_input_;

  // The lock, shared with the batches this stage delivered: a batch let go
  // takes it to count itself out, which wakes Next() and DiscardPending()
  // (see Note [waits woken by the state change] in transfer_stage.cc).
  const std::shared_ptr<internal::StageShared> shared_;
  absl::Mutex& mu_;
  std::deque<FilledBatch> submitted_ ABSL_GUARDED_BY(mu_);
  std::deque<Delivery> ready_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool copying_ ABSL_GUARDED_BY(mu_) = false;
  TransferStats stats_ ABSL_GUARDED_BY(mu_);
  std::thread copy_thread_;
};

}  // namespace pinwheel

#endif  // PINWHEEL_TRANSFER_TRANSFER_STAGE_H_
