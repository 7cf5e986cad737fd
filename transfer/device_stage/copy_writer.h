// CopyWriter: the plain device stage's writer. Copies a batch's fields from
// its pinned slot into a device buffer: one asynchronous copy per run of
// consecutive copied fields (see Note [one copy per batch]), leaving out the
// fields read only on the host (Note [fields read only on the host] in
// copy_writer.cc). Delivers the copied fields. TransformWriter
// (transform_writer.h) runs one before its transform.
//
// Example:
//   auto writer = std::make_shared<CopyWriter>(layout);
//   TransferStage::Create(device, ring, writer, /*device_buffers=*/2);
//
// Thread-safe after Attach() (immutable; see batch_writer.h).
//
// Note [one copy per batch]
// A batch's fields live in one slot (see BatchLayout), so the whole batch is
// one cudaMemcpyAsync of BatchLayout::CopyBytes(samples) bytes: one DMA
// descriptor, no per-field launch overhead. Fields a device transform reads
// only on the host (DeviceTransform::ReadsOnlyOnHost) are left out: then
// one copy per run of consecutive copied fields (see Note [fields read only
// on the host] in copy_writer.cc).
#ifndef PINWHEEL_TRANSFER_DEVICE_STAGE_COPY_WRITER_H_
#define PINWHEEL_TRANSFER_DEVICE_STAGE_COPY_WRITER_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"

#include "transfer/device_stage/batch_writer.h"

namespace pinwheel::internal {

class CopyWriter final : public BatchWriter {
 public:
  // Where a field not copied lands: nowhere.
  static constexpr size_t kHostOnly = ~size_t{0};

  // Copies every field of `layout` except field f where host_only[f] (empty:
  // none), which gets no device memory.
  explicit CopyWriter(BatchLayout layout, std::vector<bool> host_only = {});

  // Queues the copies of a batch of `samples` samples from `slot` (host) to
  // `buffer` (device) on `stream`.
  [[nodiscard]] absl::Status Copy(const std::byte* slot, std::byte* buffer,
                                  int64_t samples, const Stream& stream) const;
  // Returns where field `f` lands in a device buffer, or kHostOnly.
  size_t device_offset(int f) const { return device_offset_[f]; }
  // Returns the bytes the copied fields of a full batch span in a buffer.
  size_t device_end() const { return device_end_; }
  const BatchLayout& layout() const { return layout_; }

  // BatchWriter.
  size_t buffer_bytes() const override { return layout_.slot_bytes(); }
  const BatchLayout& delivered_layout() const override { return layout_; }
  const BatchLayout* slot_layout() const override { return &layout_; }
  size_t CopyBytes(int64_t samples) const override;
  absl::Status Attach(const DeviceBufferPool& pool,
                      const PinnedRing* ring) override;
  absl::Status Write(FilledBatch& job, const DeviceBufferPool::Buffer& buffer,
                     const Stream& stream, SlotFence& fence,
                     WriteReport& report) const override;
  std::shared_ptr<const std::vector<FieldView>> FieldsOf(
      std::byte* buffer, int64_t samples) const override;

 private:
  // The copies of one batch: runs of consecutive copied fields.
  struct CopyRun {
    int first = 0;  // fields first..last
    int last = 0;
  };
  // Returns the bytes of `run` for a batch of `samples` samples.
  size_t RunBytes(const CopyRun& run, int64_t samples) const;

  const BatchLayout layout_;
  // Per field, its offset in a device buffer, or kHostOnly.
  std::vector<size_t> device_offset_;
  std::vector<CopyRun> copies_;
  size_t device_end_ = 0;
  const PinnedRing* ring_ = nullptr;
};

}  // namespace pinwheel::internal

#endif  // PINWHEEL_TRANSFER_DEVICE_STAGE_COPY_WRITER_H_
