#include "transfer/transfer_stage.h"

#include <algorithm>
#include <cerrno>
#include <optional>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

#include "pinning/base/mutex.h"
#include "pinning/base/status_macros.h"
#include "pinning/base/thread_cpus.h"
#include "transfer/device_stage/batch_writer.h"
#include "transfer/device_stage/copy_writer.h"
#include "transfer/internal/batch_lease.h"

namespace pinwheel {

// What one write adds to the stats; folded in with the delivery, under the
// same lock.
struct TransferStage::CopyCost {
  // When it waited for a device buffer: when the wait began and ended
  // (InfiniteFuture: a buffer was free at once).
  absl::Time buffer_wait_began = absl::InfiniteFuture();
  absl::Time buffer_acquired = absl::InfiniteFuture();
  absl::Duration issue = absl::ZeroDuration();

  bool waited() const { return buffer_wait_began != absl::InfiniteFuture(); }
  absl::Duration wait() const {
    return waited() ? buffer_acquired - buffer_wait_began
                    : absl::ZeroDuration();
  }
};

namespace {

// Returns the delivery of a marker (an end of epoch, an error; `marker` is
// moved from).
TransferStage::Delivery MarkerOf(FilledBatch& marker) {
  TransferStage::Delivery delivery;
  delivery.kind = marker.kind;
  delivery.marker = std::move(marker.info);
  delivery.error = std::move(marker.error);
  return delivery;
}

// Gives `job`'s slot (if any) back to `ring` with no fence.
void RecycleUnfenced(PinnedRing* ring, const FilledBatch& job) {
  if (job.slot >= 0 && ring != nullptr) ring->Recycle(job.slot, nullptr);
}

}  // namespace

absl::StatusOr<std::unique_ptr<TransferStage>> TransferStage::Create(
    const Device& device, PinnedRing* ring, const BatchLayout& layout,
    int device_buffers, const std::vector<StaticDeviceBuffer>& static_buffers) {
  return Create(device, ring, std::make_shared<internal::CopyWriter>(layout),
                device_buffers, static_buffers);
}

absl::StatusOr<std::unique_ptr<TransferStage>> TransferStage::Create(
    const Device& device, PinnedRing* ring,
    std::shared_ptr<internal::BatchWriter> writer, int device_buffers,
    const std::vector<StaticDeviceBuffer>& static_buffers) {
  const BatchLayout* slot_layout = writer->slot_layout();
  if (slot_layout != nullptr && ring == nullptr) {
    return absl::InvalidArgumentError(
        "transfer stage: the writer reads pinned slots, but there is no ring");
  }
  if (slot_layout != nullptr &&
      ring->slot_bytes() < slot_layout->slot_bytes()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "transfer stage: ring slots of ", ring->slot_bytes(),
        " bytes cannot hold batches of ", slot_layout->slot_bytes(), " bytes"));
  }
  PINWHEEL_ASSIGN_OR_RETURN(Stream copy_stream, Stream::Create(device));
  if (!static_buffers.empty() &&
      static_cast<size_t>(device_buffers) != static_buffers.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "transfer stage: device_buffers = ", device_buffers, " but ",
        static_buffers.size(), " static device buffers: they must match"));
  }
  const size_t buffer_bytes = writer->buffer_bytes();
  PINWHEEL_ASSIGN_OR_RETURN(
      std::shared_ptr<DeviceBufferPool> pool,
      static_buffers.empty()
          ? DeviceBufferPool::Create(device, device_buffers, buffer_bytes)
          : DeviceBufferPool::Borrow(device, static_buffers, buffer_bytes));
  Fences fences;
  for (int i = 0; i < device_buffers; ++i) {
    PINWHEEL_ASSIGN_OR_RETURN(std::shared_ptr<Event> done,
                              Event::Create(device));
    PINWHEEL_ASSIGN_OR_RETURN(std::shared_ptr<Event> used,
                              Event::Create(device));
    fences.copy_done.push_back(std::move(done));
    fences.consumed.push_back(std::move(used));
  }
  for (int i = 0; ring != nullptr && i < ring->slots(); ++i) {
    PINWHEEL_ASSIGN_OR_RETURN(std::shared_ptr<Event> copied,
                              Event::Create(device));
    fences.slot_copied.push_back(std::move(copied));
  }
  PINWHEEL_ASSIGN_OR_RETURN(fences.completed, Event::Create(device));
  PINWHEEL_RETURN_IF_ERROR(writer->Attach(*pool, ring));
  return std::unique_ptr<TransferStage>(
      new TransferStage(device, ring, std::move(writer), std::move(copy_stream),
                        std::move(pool), std::move(fences)));
}

TransferStage::TransferStage(const Device& device, PinnedRing* ring,
                             std::shared_ptr<internal::BatchWriter> writer,
                             Stream copy_stream,
                             std::shared_ptr<DeviceBufferPool> pool,
                             Fences fences)
    : device_(device),
      ring_(ring),
      writer_(std::move(writer)),
      copy_stream_(std::move(copy_stream)),
      pool_(std::move(pool)),
      fences_(std::move(fences)),
      shared_(std::make_shared<internal::StageShared>()),
      mu_(shared_->mu) {
  // Built once: a full batch's fields differ between buffers only in their
  // pointers, and building them per batch would allocate in the hot path.
  const int64_t capacity = writer_->delivered_layout().batch_size();
  for (int b = 0; b < pool_->buffers(); ++b) {
    full_batch_fields_.push_back(
        writer_->FieldsOf(pool_->buffer_data(b), capacity));
  }
  stats_.device_buffers = pool_->buffers();
  stats_.device_bytes = pool_->bytes_allocated();
  copy_thread_ = std::thread([this] { CopyLoop(); });
}

TransferStage::~TransferStage() { Shutdown(); }

int TransferStage::MoveCopyThreadOnto(const std::vector<int>& cpus) {
  if (!copy_thread_.joinable()) return ESRCH;
  return internal::CpuMask(cpus).ApplyTo(copy_thread_.native_handle());
}

const BatchLayout& TransferStage::delivered_layout() const {
  return writer_->delivered_layout();
}

size_t TransferStage::CopyBytes(int64_t samples) const {
  return writer_->CopyBytes(samples);
}

// Note [copy issued by the submitter]
// A batch submitted while nothing is queued or being copied, with a device
// buffer free right now, is copied by the submitting thread itself (the
// producer pipeline's last, serial stage): no hand-off to the copy thread and
// back, one lock round trip instead of two. Otherwise it is queued for the
// copy thread, which then stays the only copier until the queue is empty.
// `copying_` is the baton: whoever sets it (the copy thread or a submitter)
// is the only one issuing copies until it clears it, and it pushes its
// delivery onto ready_ in the same critical section that clears it, so
// deliveries keep submission order. The submitter never blocks: it takes a
// buffer with TryAcquire(), and when none is free it puts the batch at the
// front of the queue (nothing else was queued) and hands the baton back.
//
// But the submitter is the pipeline's serial stage: a copy it issues is
// time in which no other batch is submitted. When batches come less than
// kInlineGapWrites writes apart (the recent writes' average), the copy
// thread issues them instead, beside the serial stage. Before this rule,
// W2 (32 x 16 KiB windows, about 9 us to issue) on one H200 ran in one of
// two modes for a whole repetition: 99-100 % of copies issued by the
// workers at 34-36 k batches/s, or 18-33 % at 41-75 k (14 workers x 64
// slots: 38,333-72,087 over three repetitions, session 17).
// Not for the consumer's own thread (Submitter::kConsumer, a loader with no
// workers): it waits for this batch next and reads on only while the stage
// is idle (LoaderCore::Next), so a batch it handed off that then lost every
// sample would leave it waiting for a delivery that never comes.
void TransferStage::Submit(FilledBatch job, Submitter submitter) {
  {
    internal::MutexLock lock(&mu_);
    const bool queue = stopping_ || copying_ || !submitted_.empty();
    if (!queue && job.kind != FilledBatch::Kind::kBatch && job.slot < 0) {
      // A marker (an end of epoch, an error) holding no slot: nothing to
      // write, so it joins the deliveries now, behind the batches before it.
      Publish(MarkerOf(job), CopyCost(), internal::WriteReport());
      return;
    }
    bool crowded = false;
    if (job.kind == FilledBatch::Kind::kBatch &&
        submitter == Submitter::kWorker) {
      const absl::Time now = absl::Now();
      crowded = now - last_submit_ < kInlineGapWrites * recent_write_;
      last_submit_ = now;
    }
    if (queue || crowded || job.kind != FilledBatch::Kind::kBatch) {
      submitted_.push_back(std::move(job));
      return;
    }
    copying_ = true;
  }
  std::optional<DeviceBufferPool::Buffer> buffer = pool_->TryAcquire();
  if (!buffer) {
    internal::MutexLock lock(&mu_);
    copying_ = false;
    submitted_.push_front(std::move(job));
    return;
  }
  CopyCost cost;
  internal::WriteReport report;
  absl::StatusOr<Delivery> delivery =
      Write(std::move(job), *buffer, cost, report);
  internal::MutexLock lock(&mu_);
  copying_ = false;
  ++stats_.inline_copies;
  Publish(std::move(delivery), cost, report);
}

void TransferStage::Publish(absl::StatusOr<Delivery> delivery,
                            const CopyCost& cost,
                            const internal::WriteReport& report) {
  if (!delivery.ok()) {
    Delivery failed;
    failed.kind = FilledBatch::Kind::kError;
    failed.error = delivery.status();
    failed.ready_at = absl::Now();
    ready_.push_back(std::move(failed));
    return;
  }
  if (delivery->kind == FilledBatch::Kind::kBatch) {
    ++stats_.batches_copied;
    stats_.bytes_copied += report.bytes_copied;
    if (cost.waited()) ++stats_.buffer_waits;
    stats_.buffer_wait_time += cost.wait();
    stats_.issue_time += cost.issue;
    recent_write_ = recent_write_ == absl::ZeroDuration()
                        ? cost.issue
                        : (recent_write_ * 7 + cost.issue) / 8;
    stats_.samples_skipped += report.samples_skipped;
    if (report.samples_skipped > 0) stats_.last_skipped = report.last_skipped;
    // Every sample skipped: nothing to deliver (as the workers' kSkipSample
    // does with a batch that lost every sample).
    if (delivery->batch.released()) return;
  }
  delivery->ready_at = absl::Now();
  ready_.push_back(*std::move(delivery));
}

void TransferStage::CopyLoop() {
  while (true) {
    FilledBatch job;
    {
      internal::MutexLock lock(&mu_);
      // A submitter writing (see Note [copy issued by the submitter]) holds
      // the baton: wait for it to finish before taking the next job.
      auto has_work = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stopping_ || (!submitted_.empty() && !copying_);
      };
      if (!has_work()) {
        const absl::Time idle_start = absl::Now();
        internal::Await(mu_, has_work);
        stats_.idle_time += absl::Now() - idle_start;
      }
      if (stopping_) return;
      job = std::move(submitted_.front());
      submitted_.pop_front();
      copying_ = true;
    }
    CopyCost cost;
    internal::WriteReport report;
    absl::StatusOr<Delivery> delivery;
    if (job.kind != FilledBatch::Kind::kBatch) {
      RecycleUnfenced(ring_, job);
      delivery = MarkerOf(job);
    } else {
      absl::StatusOr<DeviceBufferPool::Buffer> buffer = AcquireBuffer(cost);
      if (buffer.ok()) {
        delivery = Write(std::move(job), *buffer, cost, report);
      } else {
        RecycleUnfenced(ring_, job);
        delivery = buffer.status();
      }
    }
    internal::MutexLock lock(&mu_);
    copying_ = false;
    if (!delivery.ok() && absl::IsCancelled(delivery.status())) {
      return;  // shutting down
    }
    Publish(std::move(delivery), cost, report);
  }
}

// Note [a wait behind the consumer's buffers]
// The copy waits for a device buffer when the consumer holds them all, or
// released them behind work of its own not yet done (a training step still
// running on its GPU). A consumer waiting in Next() meanwhile waits for its
// own work, not for data: the batch was read, the loader was ahead.
// Deliveries keep submission order, so the batch the consumer waits for is
// the one whose copy waits; its delivery carries when that wait began and
// ended, and the caller of Next() (LoaderCore, which reads the clock around
// it anyway) counts as behind buffers the part of its own wait from then
// until the buffer came, plus the hand-off after the delivery was published
// (the consumer's wake-up, which a batch ready in time would not have
// needed): BehindBuffers(). The write between the two (the copy's issue, a
// device transform) stays the data's. A buffer free at once (TryAcquire)
// costs nothing more, and Next() itself reads no clock. On two H200s
// (2026-11-29, session 20) the sample trainer's ranks waited in Next() 5-15 %
// of some epochs with the copy waiting for a buffer 44-100 % of the tuner's
// windows then; the trainer now says the two apart.
absl::StatusOr<DeviceBufferPool::Buffer> TransferStage::AcquireBuffer(
    CopyCost& cost) {
  if (std::optional<DeviceBufferPool::Buffer> free = pool_->TryAcquire()) {
    return *free;
  }
  cost.buffer_wait_began = absl::Now();
  absl::StatusOr<DeviceBufferPool::Buffer> buffer = pool_->Acquire();
  cost.buffer_acquired = absl::Now();
  return buffer;
}

absl::Duration TransferStage::BehindBuffers(const Delivery& delivery,
                                            absl::Time called,
                                            absl::Time returned) {
  // Ready before the call: Next() did not wait for it.
  if (delivery.ready_at <= called ||
      delivery.buffer_wait_began == absl::InfiniteFuture()) {
    return absl::ZeroDuration();
  }
  const absl::Time from = std::max(called, delivery.buffer_wait_began);
  return std::max(absl::ZeroDuration(), delivery.buffer_acquired - from) +
         std::max(absl::ZeroDuration(), returned - delivery.ready_at);
}

// Note [a slot's own fence]
// A ring slot is recycled behind an event of its own, recorded right after
// the copy out of it, not behind the device buffer's copy_done. copy_done
// is recorded again each time its buffer is reused, and a fenced slot waits
// for whatever the event marks when the slot is next acquired: behind
// copy_done, the slot of batch k (buffer b) would wait for the copy of
// batch k + device_buffers, k + 2 * device_buffers, ... (the latest one into
// b), so with more slots than buffers the producer could not start a batch
// until the copy queue had nearly drained, and the copy engine idled while
// the next batch was filled. Old and new code alternately on an H100
// (samples/bench/probes/copy_limits, W2: 32 x 16 KiB samples; 3 rounds): 14
// workers, 32 slots, 4 buffers went from 40-41 k to 44-53 k batches/s; 64
// slots, 8 buffers from 47-61 k to 45-69 k (one noisy round each); W1 with
// 8 slots and 2 buffers from 0.78-0.81 to 0.82-0.85 of the raw copy. The
// cost is one more event record per batch (~0.4 us of host time).
// (The buffer's copy_done stays the batch's ready event: it is not recorded
// again while the consumer holds the batch, whereas a slot is reused as soon
// as its copy is done.)
absl::StatusOr<TransferStage::Delivery> TransferStage::Write(
    FilledBatch job, const DeviceBufferPool::Buffer& buffer, CopyCost& cost,
    internal::WriteReport& report) {
  const absl::Time issue_start = absl::Now();
  Event* slot_copied =
      job.slot >= 0 ? fences_.slot_copied[job.slot].get() : nullptr;
  internal::SlotFence fence(slot_copied, copy_stream_);
  absl::Status status =
      writer_->Write(job, buffer, copy_stream_, fence, report);
  // The batch's ready event, then (unless the writer fenced the slot at its
  // own point) the slot's: a slot given back is a batch ready.
  const bool fenced = fence.recorded();
  const std::shared_ptr<Event>& copy_done = fences_.copy_done[buffer.index];
  if (status.ok()) status = copy_done->Record(copy_stream_);
  if (status.ok() && !fenced) status = fence.Record();
  cost.issue = absl::Now() - issue_start;
  if (!status.ok()) {
    // The writes may or may not be queued: wait for the stream before the
    // slot and buffer are reused.
    copy_stream_.Synchronize().IgnoreError();
    RecycleUnfenced(ring_, job);
    pool_->Release(buffer.index, nullptr);
    return absl::Status(
        status.code(),
        absl::StrCat(job.slot >= 0 ? "copying batch " : "writing batch ",
                     job.info.index, " of epoch ", job.info.epoch, " (",
                     report.bytes_copied, " bytes) to ", device_.ToString(),
                     ": ", status.message()));
  }
  // The slot is refilled only after its copy is done: the DESIGN.md
  // invariant. See Note [a slot's own fence].
  if (job.slot >= 0) ring_->Recycle(job.slot, fences_.slot_copied[job.slot]);
  Delivery delivery;
  delivery.kind = job.kind;
  delivery.write_time = cost.issue;
  delivery.buffer_wait_began = cost.buffer_wait_began;
  delivery.buffer_acquired = cost.buffer_acquired;
  if (job.info.samples == 0) {
    // Every sample skipped: the buffer goes back behind the work queued on
    // it, and nothing is delivered (Publish() sees the empty batch).
    pool_->Release(buffer.index, copy_done);
    return delivery;
  }
  delivery.batch = LeaseOf(std::move(job.info), buffer);
  return delivery;
}

DeviceBatch TransferStage::LeaseOf(BatchInfo info,
                                   const DeviceBufferPool::Buffer& buffer) {
  auto lease = std::make_shared<internal::BatchLease>();
  lease->pool = pool_;
  lease->buffer = buffer.index;
  lease->ready = fences_.copy_done[buffer.index];
  lease->consumed = fences_.consumed[buffer.index];
  lease->completed = fences_.completed;
  lease->device = device_;
  lease->fields = info.samples == writer_->delivered_layout().batch_size()
                      ? full_batch_fields_[buffer.index]
                      : writer_->FieldsOf(buffer.data, info.samples);
  lease->info = std::move(info);
  lease->shared = shared_;
  return DeviceBatch(std::move(lease));
}

// Note [waits woken by the state change]
// Next() and DiscardPending() wait on mu_ for a condition (a delivery, the
// stage idle, shutting down, or the consumer holding every buffer) that
// every change makes under mu_: the copy thread and submitters publish
// under it, and a delivered batch let go counts itself out of
// StageShared::held under it (the lock lives in StageShared, which the
// batches share, so a batch may outlive the stage). No wait polls.
bool TransferStage::ConsumerHoldsEveryBuffer() const {
  return shared_->held >= pool_->buffers();
}

bool TransferStage::ReadyForJob() const {
  internal::MutexLock lock(&mu_);
  if (!submitted_.empty() || copying_) return false;
  // The buffers neither held by the consumer nor waiting for it in ready_:
  // a job submitted now finds one (released, perhaps behind its fence), so
  // it never waits for the consumer, and DiscardPending() never for a job.
  int in_use = shared_->held;
  for (const Delivery& delivery : ready_) {
    if (delivery.kind == FilledBatch::Kind::kBatch) ++in_use;
  }
  return in_use < pool_->buffers();
}

absl::StatusOr<TransferStage::Delivery> TransferStage::Next(
    absl::Time deadline) {
  internal::MutexLock lock(&mu_);
  auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return stopping_ || !ready_.empty() || ConsumerHoldsEveryBuffer();
  };
  if (!internal::AwaitWithDeadline(mu_, ready, deadline)) {
    return absl::DeadlineExceededError("no batch ready before the deadline");
  }
  if (!stopping_ && ready_.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the consumer holds all ", pool_->buffers(),
        " device buffers (DeviceBatches or DLPack views not released): no "
        "further batch can be copied; release a batch before calling Next(), "
        "or raise device_buffers"));
  }
  if (ready_.empty()) return absl::CancelledError("transfer stage shut down");
  Delivery delivery = std::move(ready_.front());
  ready_.pop_front();
  delivery.batch.MarkDelivered();
  return delivery;
}

absl::Status TransferStage::DiscardPending() {
  while (true) {
    std::deque<Delivery> dropped;
    bool idle;
    bool stuck;
    {
      internal::MutexLock lock(&mu_);
      internal::Await(mu_, [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stopping_ || !ready_.empty() ||
               (submitted_.empty() && !copying_) || ConsumerHoldsEveryBuffer();
      });
      dropped.swap(ready_);
      idle = submitted_.empty() && !copying_;
      stuck = ConsumerHoldsEveryBuffer();
      if (stopping_ && !idle && dropped.empty()) {
        return absl::CancelledError("transfer stage shut down");
      }
    }
    const bool had_any = !dropped.empty();
    dropped.clear();  // releases their buffers, outside the lock
    if (idle && !had_any) return absl::OkStatus();
    if (!had_any && stuck) {
      return absl::FailedPreconditionError(absl::StrCat(
          "cannot restart the epoch: the consumer holds all ", pool_->buffers(),
          " device buffers; release them first"));
    }
  }
}

void TransferStage::Shutdown() {
  {
    internal::MutexLock lock(&mu_);
    if (stopping_ && !copy_thread_.joinable()) return;
    stopping_ = true;
  }
  pool_->Cancel();  // wakes a copy waiting for a free buffer
  if (copy_thread_.joinable()) copy_thread_.join();
  std::deque<FilledBatch> submitted;
  std::deque<Delivery> ready;
  {
    internal::MutexLock lock(&mu_);
    // A submitter may be issuing a copy (it never blocks): let it publish.
    internal::Await(
        mu_, [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !copying_; });
    submitted.swap(submitted_);
    ready.swap(ready_);
  }
  for (const FilledBatch& item : submitted) {
    if (item.slot >= 0) ring_->Recycle(item.slot, nullptr);
  }
  ready.clear();
  copy_stream_.Synchronize().IgnoreError();
}

bool TransferStage::Idle() const {
  internal::MutexLock lock(&mu_);
  return submitted_.empty() && ready_.empty() && !copying_;
}

TransferStats TransferStage::stats() const {
  internal::MutexLock lock(&mu_);
  return stats_;
}

}  // namespace pinwheel
