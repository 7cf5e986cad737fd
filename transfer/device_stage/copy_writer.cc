#include "transfer/device_stage/copy_writer.h"

#include <utility>

#include "absl/status/status.h"

#include "pinning/base/nvtx_range.h"
#include "pinning/base/status_macros.h"

namespace pinwheel::internal {
namespace {

constexpr size_t AlignUp(size_t n, size_t alignment) {
  return (n + alignment - 1) / alignment * alignment;
}

}  // namespace

FieldView FieldViewOf(const BatchLayout& layout, int f, std::byte* base,
                      int64_t samples, size_t offset) {
  const FieldSpec& spec = layout.fields()[f];
  FieldView view;
  view.name = spec.name;
  view.dtype = spec.dtype;
  view.shape.reserve(spec.shape.size() + 1);
  view.shape.push_back(samples);
  view.shape.insert(view.shape.end(), spec.shape.begin(), spec.shape.end());
  view.data = base + (offset == ~size_t{0} ? layout.field_offset(f) : offset);
  view.bytes = spec.bytes() * static_cast<size_t>(samples);
  return view;
}

// Note [fields read only on the host]
// The GPU JPEG decoder reads the compressed bytes from the pinned slot
// (nvJPEG takes host memory), so their device copy was never read: with a
// 1 MiB "jpeg" row per sample, 268 MB of a 256-sample batch crossed PCIe for
// nothing. A transform now names such fields (ReadsOnlyOnHost); the stage
// lays out the device buffer without them (the other fields keep their
// relative offsets within each run of consecutive copied fields, each run
// at a kFieldAlignment boundary) and issues one copy per run: for the
// compressed image layout one copy of the fields after "jpeg" instead of
// one of the whole slot. Without such fields the plan is the old one: one
// run, the device offsets the slot's, one copy of CopyBytes(samples).
CopyWriter::CopyWriter(BatchLayout layout, std::vector<bool> host_only)
    : layout_(std::move(layout)) {
  device_offset_.assign(layout_.num_fields(), kHostOnly);
  for (int f = 0; f < layout_.num_fields(); ++f) {
    if (static_cast<size_t>(f) < host_only.size() && host_only[f]) continue;
    if (!copies_.empty() && copies_.back().last == f - 1) {
      const int first = copies_.back().first;
      copies_.back().last = f;
      device_offset_[f] = device_offset_[first] + layout_.field_offset(f) -
                          layout_.field_offset(first);
    } else {
      copies_.push_back({.first = f, .last = f});
      device_offset_[f] = AlignUp(device_end_, BatchLayout::kFieldAlignment);
    }
    device_end_ =
        device_offset_[f] +
        layout_.fields()[f].bytes() * static_cast<size_t>(layout_.batch_size());
  }
}

size_t CopyWriter::RunBytes(const CopyRun& run, int64_t samples) const {
  return layout_.field_offset(run.last) - layout_.field_offset(run.first) +
         layout_.fields()[run.last].bytes() * static_cast<size_t>(samples);
}

size_t CopyWriter::CopyBytes(int64_t samples) const {
  size_t bytes = 0;
  for (const CopyRun& run : copies_) bytes += RunBytes(run, samples);
  return bytes;
}

absl::Status CopyWriter::Attach(const DeviceBufferPool&,
                                const PinnedRing* ring) {
  ring_ = ring;  // TransferStage::Create checked it holds slot_layout()
  return absl::OkStatus();
}

absl::Status CopyWriter::Copy(const std::byte* slot, std::byte* buffer,
                              int64_t samples, const Stream& stream) const {
  // See Note [one copy per batch] in copy_writer.h.
  for (const CopyRun& run : copies_) {
    PINWHEEL_RETURN_IF_ERROR(stream.CopyToDeviceAsync(
        buffer + device_offset_[run.first],
        slot + layout_.field_offset(run.first), RunBytes(run, samples)));
  }
  return absl::OkStatus();
}

absl::Status CopyWriter::Write(FilledBatch& job,
                               const DeviceBufferPool::Buffer& buffer,
                               const Stream& stream, SlotFence&,
                               WriteReport& report) const {
  const NvtxRange range("pinwheel copy");
  report.bytes_copied = static_cast<int64_t>(CopyBytes(job.info.samples));
  return Copy(ring_->slot(job.slot).data, buffer.data, job.info.samples,
              stream);
}

std::shared_ptr<const std::vector<FieldView>> CopyWriter::FieldsOf(
    std::byte* buffer, int64_t samples) const {
  auto fields = std::make_shared<std::vector<FieldView>>();
  fields->reserve(layout_.num_fields());
  for (int f = 0; f < layout_.num_fields(); ++f) {
    fields->push_back(FieldViewOf(layout_, f, buffer, samples));
  }
  return fields;
}

}  // namespace pinwheel::internal
