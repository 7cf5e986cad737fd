// TransferStage: the device stage's sequencer. For each job submitted (a
// filled pinned slot, a batch made without one, a marker) it takes a free
// device buffer, has its BatchWriter (transfer/device_stage/) fill it on
// its own stream, recycles the slot behind the slot's fence, records the
// buffer's ready event and hands the consumer a DeviceBatch, in submission
// order. What fills a buffer is the writer's alone.
//
// Example:
//   PINWHEEL_ASSIGN_OR_RETURN(std::unique_ptr<TransferStage> stage,
//       TransferStage::Create(device, ring.get(), batch_layout, 2));
//   stage->Submit({.info = {.epoch = 0, .index = 0, .samples = 256,
//                           .sample_indices = {...}},
//                  .slot = slot.index});
//   PINWHEEL_ASSIGN_OR_RETURN(TransferStage::Delivery d,
//                             stage->Next(absl::InfiniteFuture()));
#ifndef PINWHEEL_TRANSFER_TRANSFER_STAGE_H_
#define PINWHEEL_TRANSFER_TRANSFER_STAGE_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

#include "pinning/pinned_ring.h"
#include "transfer/batch_info.h"
#include "transfer/device.h"
#include "transfer/device_batch.h"
#include "transfer/device_buffer_pool.h"
#include "transfer/event.h"
#include "transfer/sample_layout.h"
#include "transfer/static_device_buffer.h"
#include "transfer/stream.h"
#include "transfer/transfer_stats.h"

namespace pinwheel {

namespace internal {
struct StageShared;
struct WriteReport;
class BatchWriter;
}  // namespace internal

// Thread-safe: Submit() from producer threads, Next() from the consumer.
class TransferStage {
 public:
  // A delivery: a batch, or an error in its place, or the end of an epoch.
  struct Delivery {
    FilledBatch::Kind kind = FilledBatch::Kind::kBatch;
    DeviceBatch batch;   // kBatch
    BatchInfo marker;    // kError, kEndOfEpoch: the BatchInfo submitted
    absl::Status error;  // kError
    // For the loader's latencies (loader/telemetry/stage_latencies.h): the
    // host time its writer took to issue the batch, and when it joined the
    // deliveries.
    absl::Duration write_time = absl::ZeroDuration();
    absl::Time ready_at = absl::InfinitePast();
    // When its copy waited for a device buffer: when that wait began and
    // ended (InfiniteFuture: it did not wait).
    absl::Time buffer_wait_began = absl::InfiniteFuture();
    absl::Time buffer_acquired = absl::InfiniteFuture();
    // Returns the BatchInfo it was submitted with: a batch's (as its writer
    // left it, batch.info()) or a marker's.
    const BatchInfo& info() const {
      return kind == FilledBatch::Kind::kBatch ? batch.info() : marker;
    }
  };

  // Starts the copy thread over `writer`; `ring` (borrowed, must outlive the
  // stage) holds the slots it reads, null when it reads none. InvalidArgument
  // when the ring's slots cannot hold the writer's slot_layout(). With
  // `static_buffers` (caller-owned, transfer/static_device_buffer.h; as many
  // as `device_buffers`) the batches land in those, with the same fences and
  // release rules; InvalidArgument naming one that cannot be used.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<TransferStage>> Create(
      const Device& device, PinnedRing* ring,
      std::shared_ptr<internal::BatchWriter> writer, int device_buffers,
      const std::vector<StaticDeviceBuffer>& static_buffers = {});
  // The same with a writer that copies every field of `layout` (a
  // CopyWriter). REQUIRES: ring->slot_bytes() >= layout.slot_bytes().
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<TransferStage>> Create(
      const Device& device, PinnedRing* ring, const BatchLayout& layout,
      int device_buffers,
      const std::vector<StaticDeviceBuffer>& static_buffers = {});

  TransferStage(const TransferStage&) = delete;
  TransferStage& operator=(const TransferStage&) = delete;
  // Calls Shutdown().
  ~TransferStage();

  // Who submits a job: a worker thread (the producer's pipeline), or the
  // consumer's own thread, which reads inline (a loader with no workers)
  // and waits for this job's delivery next.
  enum class Submitter { kWorker, kConsumer };

  // Queues `job` for its writer; deliveries keep submission order. When
  // nothing is queued and a device buffer is free, writes it on the calling
  // thread instead (never blocks on a buffer), unless a worker submits
  // batches close together (Note [copy issued by the submitter]).
  void Submit(FilledBatch job, Submitter submitter = Submitter::kWorker)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Returns the next delivery, waiting until `deadline` (then
  // DeadlineExceeded). FailedPrecondition when the consumer holds every
  // device buffer (no copy could ever land); Cancelled after Shutdown().
  [[nodiscard]] absl::StatusOr<Delivery> Next(absl::Time deadline)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Returns the part of a call of Next() from `called` to `returned` that
  // waited behind a device buffer (one the consumer held, or released
  // behind work of its own not yet done) for `delivery`, the call's result:
  // the consumer's own back-pressure, not the data's
  // (LoaderStats::consumer_wait_behind_buffers; Note [a wait behind the
  // consumer's buffers] in transfer_stage.cc).
  static absl::Duration BehindBuffers(const Delivery& delivery,
                                      absl::Time called, absl::Time returned);

  // Drops every queued and undelivered batch (recycling their slots) and
  // returns once the stage is idle. For restarting an epoch.
  // REQUIRES: no concurrent Submit(). FailedPrecondition when the consumer
  // holds every device buffer.
  [[nodiscard]] absl::Status DiscardPending() ABSL_LOCKS_EXCLUDED(mu_);

  // Moves the copy thread onto `cpus` (a loader's share of the node when
  // it leaves a launcher's one-core binding: loader/worker_cpus.h); returns
  // 0, or the error number when the kernel refused (the thread keeps its
  // mask), ESRCH after Shutdown(). REQUIRES: not concurrent with
  // Shutdown().
  int MoveCopyThreadOnto(const std::vector<int>& cpus);

  // Stops the copy thread and joins it; queued slots are recycled. Batches
  // already delivered stay valid. Idempotent.
  void Shutdown() ABSL_LOCKS_EXCLUDED(mu_);

  // Returns true when nothing is queued, being written or waiting for the
  // consumer.
  bool Idle() const ABSL_LOCKS_EXCLUDED(mu_);
  // Returns true when nothing is queued or being written and a device
  // buffer is neither held by the consumer nor ready for it: a job
  // submitted now is written at once, or behind its buffer's fence (the
  // read-ahead of jobs with no slot).
  bool ReadyForJob() const ABSL_LOCKS_EXCLUDED(mu_);

  TransferStats stats() const ABSL_LOCKS_EXCLUDED(mu_);
  const Stream& copy_stream() const { return copy_stream_; }
  // Returns the layout of the fields each delivery carries (the writer's).
  const BatchLayout& delivered_layout() const;
  // Returns the bytes of one device buffer.
  size_t device_buffer_bytes() const { return pool_->buffer_bytes(); }
  // Returns the bytes the stage copies to the device for a batch of
  // `samples` samples (the writer's BatchWriter::CopyBytes).
  size_t CopyBytes(int64_t samples) const;

 private:
  // Made once (creating events per batch would take the driver's lock): per
  // buffer, copy_done (a batch's ready event) and consumed; per slot, its
  // fence (Note [a slot's own fence]); `completed`, never recorded.
  struct Fences {
    std::vector<std::shared_ptr<Event>> copy_done, consumed, slot_copied;
    std::shared_ptr<const Event> completed;
  };
  TransferStage(const Device& device, PinnedRing* ring,
                std::shared_ptr<internal::BatchWriter> writer,
                Stream copy_stream, std::shared_ptr<DeviceBufferPool> pool,
                Fences fences);
  void CopyLoop();
  struct CopyCost;  // what one write adds to the stats
  // Returns a free device buffer for the copy thread, waiting while none is;
  // when it waited, says so in `cost` with the wait's start and end.
  absl::StatusOr<DeviceBufferPool::Buffer> AcquireBuffer(CopyCost& cost);
  // Writes `job` into `buffer`, which the caller acquired.
  absl::StatusOr<Delivery> Write(FilledBatch job,
                                 const DeviceBufferPool::Buffer& buffer,
                                 CopyCost& cost, internal::WriteReport& report);
  // Appends a write's delivery (or error) to ready_, its cost to stats_.
  void Publish(absl::StatusOr<Delivery> delivery, const CopyCost& cost,
               const internal::WriteReport& report)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Returns whether the consumer holds every device buffer.
  bool ConsumerHoldsEveryBuffer() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Returns the batch `info` in `buffer` (its writes queued).
  DeviceBatch LeaseOf(BatchInfo info, const DeviceBufferPool::Buffer& buffer);

  const Device device_;
  PinnedRing* const ring_;  // null: the writer reads no slot
  const std::shared_ptr<internal::BatchWriter> writer_;
  Stream copy_stream_;
  std::shared_ptr<DeviceBufferPool> pool_;
  const Fences fences_;
  // Per device buffer: the fields of a full batch in it (as delivered).
  std::vector<std::shared_ptr<const std::vector<FieldView>>> full_batch_fields_;

  // The lock, shared with the batches this stage delivered: a batch let go
  // takes it to count itself out, which wakes Next() and DiscardPending()
  // (see Note [waits woken by the state change] in transfer_stage.cc).
  const std::shared_ptr<internal::StageShared> shared_;
  absl::Mutex& mu_;
  std::deque<FilledBatch> submitted_ ABSL_GUARDED_BY(mu_);
  std::deque<Delivery> ready_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool copying_ ABSL_GUARDED_BY(mu_) = false;
  // Note [copy issued by the submitter]: when the last batch was submitted,
  // and the recent writes' time (a moving average over about 8).
  static constexpr int kInlineGapWrites = 4;
  absl::Time last_submit_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  absl::Duration recent_write_ ABSL_GUARDED_BY(mu_);
  TransferStats stats_ ABSL_GUARDED_BY(mu_);
  std::thread copy_thread_;
};

}  // namespace pinwheel

#endif  // PINWHEEL_TRANSFER_TRANSFER_STAGE_H_
