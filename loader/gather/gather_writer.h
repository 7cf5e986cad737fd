// GatherWriter: the gather path's BatchWriter (transfer/device_stage/
// batch_writer.h). Writes a batch of the dataset's fields into a device
// buffer by gathering rows (or widened token windows) from registered host
// memory at per-sample keys, on the transfer stream: the keys taken from
// the job's slot (uploaded first: the producer read them, GatherKeys in
// gather_plan.cc), or, for a job with no slot, computed where the gather
// runs from the batch's place in the loader's order (Note [the order on
// the device] in gather_plan.h). The device buffers, their fences and
// release rules are the TransferStage's own.
//
// Example (PlanGather):
//   auto writer = std::make_shared<GatherWriter>(keys_layout, output,
//       std::move(source), std::move(memory), order);
//
// Thread-safe after Attach() (immutable; see batch_writer.h). Holds the
// registrations (and through the source, a file copy; through the memory,
// the copies of small regions), so the memory stays registered while the
// stage can still run a gather (the stage synchronises its stream before
// it lets the writer go).
#ifndef PINWHEEL_LOADER_GATHER_GATHER_WRITER_H_
#define PINWHEEL_LOADER_GATHER_GATHER_WRITER_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"

#include "loader/dataset.h"
#include "loader/gather/gather_kernels.h"
#include "loader/gather_source.h"
#include "loader/pipeline/map_style_source.h"
#include "pinning/host_registration.h"
#include "transfer/device_stage/batch_writer.h"
#include "transfer/device_stage/copy_writer.h"

namespace pinwheel::internal {

// The memory a gather reads: per region of the source, where the device
// and the host read it, and what keeps it so.
struct GatherBases {
  std::vector<const std::byte*> device;
  std::vector<const std::byte*> host;
  std::shared_ptr<const void> copies;  // copies of small regions
  std::vector<std::shared_ptr<const HostRegistration>> registrations;
};

class GatherWriter final : public BatchWriter {
 public:
  // `keys` lays out a slot of keys (one i64 per sample); `output` the
  // dataset's batch. `order` null: every job holds a slot of keys; else
  // (borrowed, must outlive the writer) jobs hold no slot and their keys are
  // computed from order->PositionOf(job.info).
  GatherWriter(BatchLayout keys, BatchLayout output,
               std::shared_ptr<const Dataset> dataset, GatherSource source,
               GatherBases bases, const MapStyleSource* order);

  // BatchWriter.
  size_t buffer_bytes() const override {
    return output_offset_ + output_.slot_bytes();
  }
  const BatchLayout& delivered_layout() const override { return output_; }
  const BatchLayout* slot_layout() const override {
    return order_ == nullptr ? &keys_.layout() : nullptr;
  }
  // The keys' bytes, for either kind of job (LoaderStats::bytes_delivered
  // counts what the keys would take).
  size_t CopyBytes(int64_t samples) const override {
    return keys_.CopyBytes(samples);
  }
  absl::Status Attach(const DeviceBufferPool& pool,
                      const PinnedRing* ring) override;
  absl::Status Write(FilledBatch& job, const DeviceBufferPool::Buffer& buffer,
                     const Stream& stream, SlotFence& fence,
                     WriteReport& report) const override;
  std::shared_ptr<const std::vector<FieldView>> FieldsOf(
      std::byte* buffer, int64_t samples) const override;

 private:
  // Queues the gather of a batch of `info.samples` samples into the
  // outputs at `out`: the keys read from device memory `keys`, or (null)
  // computed from `order` where the gather runs.
  absl::Status Gather(const BatchInfo& info, std::byte* out,
                      const Stream& stream, const int64_t* keys,
                      const GatherOrder& order) const;
#ifdef PINWHEEL_HAVE_CUDA
  // Queues the rows of engine_fields_ as one batch of copies from the
  // registered host memory (Note [large rows by the copy engines]); a run
  // of consecutive indices is one copy.
  absl::Status CopyLargeRows(absl::Span<const int64_t> indices, std::byte* out,
                             void* stream) const;
#endif

  CopyWriter keys_;  // bound by Attach()
  const BatchLayout output_;
  const size_t output_offset_;  // where the outputs start in a buffer
  const std::shared_ptr<const Dataset> dataset_;
  const GatherSource source_;
  // Unregistered before they are freed.
  const GatherBases bases_;
  const MapStyleSource* const order_;
  std::vector<GatherField> fields_;  // kCopy; outputs filled per batch
  // kCopy: where each field's rows start in host memory, and which fields
  // the kernel gathers and which the copy engines move.
  std::vector<const std::byte*> host_fields_;
  std::vector<int> kernel_fields_;
  std::vector<int> engine_fields_;
  GatherWindows windows_;  // kWidenWindow; outputs per batch
};

}  // namespace pinwheel::internal

#endif  // PINWHEEL_LOADER_GATHER_GATHER_WRITER_H_
