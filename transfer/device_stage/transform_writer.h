// TransformWriter: the device stage with a DeviceTransform
// (transfer/device_transform.h). Copies the batch (a CopyWriter, leaving
// out the fields the transform reads only on the host), runs the transform
// on the transfer stream into the output part of the same device buffer,
// and delivers the outputs then the input fields it keeps (Note [the
// delivered layout] in transform_writer.cc). It keeps the slot fenced while
// a host-reading transform may still read it (Note [a host-reading
// transform's fence]) and packs the batch when the transform skipped
// samples (Note [samples a transform skips]).
//
// Example:
//   PINWHEEL_ASSIGN_OR_RETURN(std::shared_ptr<TransformWriter> writer,
//       TransformWriter::Create(layout, normalize, {.skip = false}));
//   TransferStage::Create(device, ring, writer, /*device_buffers=*/2);
//
// Thread-safe after Attach() (see batch_writer.h); the transform's methods
// are called through CallUser-style guards: what they throw becomes a
// Status naming the transform.
#ifndef PINWHEEL_TRANSFER_DEVICE_STAGE_TRANSFORM_WRITER_H_
#define PINWHEEL_TRANSFER_DEVICE_STAGE_TRANSFORM_WRITER_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include "transfer/device_stage/batch_writer.h"
#include "transfer/device_stage/copy_writer.h"
#include "transfer/device_transform.h"

namespace pinwheel::internal {

class TransformWriter final : public BatchWriter {
 public:
  // Returns the writer of `transform` over batches laid out by `layout`, or
  // InvalidArgument naming the transform when its OutputLayout() refuses
  // `layout`, an output is variable-length, the fields it delivers clash,
  // or a field read only on the host is not consumed by a transform that
  // ReadsHostInput(). Allocates no device memory.
  static absl::StatusOr<std::shared_ptr<TransformWriter>> Create(
      const BatchLayout& layout,
      std::shared_ptr<const DeviceTransform> transform,
      SampleFaultPolicy faults = {});

  // Returns the transform's output layout.
  const BatchLayout& output_layout() const { return output_; }

  // BatchWriter.
  size_t buffer_bytes() const override {
    return output_offset_ + output_.slot_bytes();
  }
  const BatchLayout& delivered_layout() const override { return delivered_; }
  const BatchLayout* slot_layout() const override { return &copy_.layout(); }
  size_t CopyBytes(int64_t samples) const override {
    return copy_.CopyBytes(samples);
  }
  absl::Status Attach(const DeviceBufferPool& pool,
                      const PinnedRing* ring) override;
  absl::Status Write(FilledBatch& job, const DeviceBufferPool::Buffer& buffer,
                     const Stream& stream, SlotFence& fence,
                     WriteReport& report) const override;
  std::shared_ptr<const std::vector<FieldView>> FieldsOf(
      std::byte* buffer, int64_t samples) const override;

 private:
  TransformWriter(CopyWriter copy,
                  std::shared_ptr<const DeviceTransform> transform,
                  std::string name, BatchLayout output, std::vector<int> kept,
                  BatchLayout delivered, bool reads_host,
                  SampleFaultPolicy faults);
  // Leaves the samples the transform skipped out of `info` and packs the
  // kept input fields of `buffer` alike, on `stream` (see Note [samples a
  // transform skips]).
  absl::Status DropSkipped(const std::vector<SampleFault>& skipped,
                           std::byte* buffer, const Stream& stream,
                           BatchInfo& info, WriteReport& report) const;

  CopyWriter copy_;  // bound by Attach()
  const std::shared_ptr<const DeviceTransform> transform_;
  const std::string name_;  // transform_->name(), asked once
  const BatchLayout output_;
  const size_t output_offset_;   // where the outputs start in a buffer
  const std::vector<int> kept_;  // input fields delivered after the outputs
  const BatchLayout delivered_;  // the outputs, then the kept inputs
  const bool reads_host_;        // transform_->ReadsHostInput()
  const SampleFaultPolicy faults_;
  // Per device buffer: the full batch's copied fields and the transform's
  // output fields (DeviceTransformBatch's views).
  std::vector<std::vector<FieldView>> input_;
  std::vector<std::vector<FieldView>> output_views_;
  // The ring whose slots a transform that ReadsHostInput() reads.
  const PinnedRing* ring_ = nullptr;
};

}  // namespace pinwheel::internal

#endif  // PINWHEEL_TRANSFER_DEVICE_STAGE_TRANSFORM_WRITER_H_
