// BatchWriter: what fills a device buffer with one batch, for the
// TransferStage (which only sequences: it takes a buffer, calls Write(),
// fences the slot, records the buffer's ready event and delivers in order).
// A writer decides, once, the bytes of each device buffer and the layout a
// delivery shows; per batch it queues the writes into the buffer on the
// transfer stream.
//
// Writers in this room: CopyWriter (copy_writer.h: the batch's fields,
// copied from the pinned slot) and TransformWriter (transform_writer.h: the
// copy, then a DeviceTransform). The loader's gather path has its own
// (loader/gather/gather_writer.h).
//
// Example (a stage's copy of one batch):
//   writer->Attach(*pool, ring);   // once, before the first Write()
//   SlotFence fence(slot_copied, stream);
//   WriteReport report;
//   PINWHEEL_RETURN_IF_ERROR(writer->Write(job, buffer, stream, fence,
//                                          report));
//   const bool fenced = fence.recorded();
//   PINWHEEL_RETURN_IF_ERROR(copy_done->Record(stream));  // batch ready
//   if (!fenced) PINWHEEL_RETURN_IF_ERROR(fence.Record());
//
// Thread-safety: Write() and the const accessors may run on any one thread
// at a time per stage (the stage's copy thread or a submitter holding its
// baton); Attach() once, before them. A writer serves one stage.
#ifndef PINWHEEL_TRANSFER_DEVICE_STAGE_BATCH_WRITER_H_
#define PINWHEEL_TRANSFER_DEVICE_STAGE_BATCH_WRITER_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"

#include "pinning/pinned_ring.h"
#include "transfer/batch_info.h"
#include "transfer/device_batch.h"
#include "transfer/device_buffer_pool.h"
#include "transfer/event.h"
#include "transfer/sample_layout.h"
#include "transfer/stream.h"

namespace pinwheel::internal {

// What one Write() did, for TransferStats.
struct WriteReport {
  int64_t bytes_copied = 0;     // host to device
  int64_t samples_skipped = 0;  // left out (Note [samples a transform skips])
  std::string last_skipped;     // the last one's cause, when any
};

// A ring slot's fence (Note [a slot's own fence] in transfer_stage.cc): the
// event the slot is recycled behind. A writer calls Record() once the work
// that reads the slot is queued on the stream; when it did not, the stage
// records it after Write(), behind the batch's ready event. Not thread-safe
// (one Write()).
class SlotFence {
 public:
  // `event` null: the job holds no slot (Record() does nothing).
  SlotFence(Event* event, const Stream& stream)
      : event_(event), stream_(stream) {}
  // Records the fence after everything queued on the stream so far.
  [[nodiscard]] absl::Status Record() {
    recorded_ = true;
    return event_ == nullptr ? absl::OkStatus() : event_->Record(stream_);
  }
  bool recorded() const { return recorded_; }

 private:
  Event* const event_;
  const Stream& stream_;
  bool recorded_ = false;
};

// Returns field `f` of `layout` for a batch of `samples` samples at
// `offset` bytes from `base` (the layout's own offset by default).
FieldView FieldViewOf(const BatchLayout& layout, int f, std::byte* base,
                      int64_t samples, size_t offset = ~size_t{0});

// Interface. See the file comment for thread-safety.
class BatchWriter {
 public:
  virtual ~BatchWriter() = default;

  // The plan, fixed at creation.
  // Returns the bytes of each device buffer.
  virtual size_t buffer_bytes() const = 0;
  // Returns the layout of the fields each delivery carries, in their order.
  virtual const BatchLayout& delivered_layout() const = 0;
  // Returns the layout of the batch in a ring slot (what a producer fills),
  // or null for a writer that reads no slot.
  virtual const BatchLayout* slot_layout() const = 0;
  // Returns the bytes a batch of `samples` samples copies to the device
  // (LoaderStats::bytes_delivered).
  virtual size_t CopyBytes(int64_t samples) const = 0;

  // Binds the writer to the stage's device buffers and ring (null: the
  // writer reads no slot): builds what Write() reuses per buffer and per
  // slot, so that no batch allocates. Called once by TransferStage::Create.
  virtual absl::Status Attach(const DeviceBufferPool& pool,
                              const PinnedRing* ring) = 0;

  // Queues the writes of `job` (kind kBatch) into `buffer` on `stream`.
  // Records `fence` once its reads of the job's slot are queued (or leaves
  // it to the stage). May shorten job.info (samples skipped). Fills
  // `report`, bytes_copied before anything is queued. An error leaves the
  // buffer and slot to the stage, which waits for the stream first.
  [[nodiscard]] virtual absl::Status Write(
      FilledBatch& job, const DeviceBufferPool::Buffer& buffer,
      const Stream& stream, SlotFence& fence, WriteReport& report) const = 0;

  // Returns the delivered fields of a batch of `samples` samples in device
  // buffer memory `buffer` (allocates: the stage keeps a full batch's per
  // buffer).
  virtual std::shared_ptr<const std::vector<FieldView>> FieldsOf(
      std::byte* buffer, int64_t samples) const = 0;
};

}  // namespace pinwheel::internal

#endif  // PINWHEEL_TRANSFER_DEVICE_STAGE_BATCH_WRITER_H_
