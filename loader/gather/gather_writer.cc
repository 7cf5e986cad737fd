#include "loader/gather/gather_writer.h"

#include <algorithm>
#include <array>
#include <utility>

#include "absl/strings/str_cat.h"

#include "pinning/base/nvtx_range.h"
#include "pinning/base/status_macros.h"
#include "transfer/device_stage/transform_work.h"

#ifdef PINWHEEL_HAVE_CUDA
#include "pinning/base/cuda_status.h"
#endif

namespace pinwheel::internal {
namespace {

constexpr size_t AlignUp(size_t n, size_t alignment) {
  return (n + alignment - 1) / alignment * alignment;
}

// Note [large rows by the copy engines]
// A kernel reading registered host memory moves rows over PCIe with SM
// load instructions: right for small rows and for token windows (widened
// on the way), but a large row (W1: 150 KB images) then costs SM time a
// compute step beside it feels (+18 % on a GEMM step, H100, 2026-11-24)
// and reaches only 0.88 of the raw copy. Fields of rows of at least
// kCopyEngineRowBytes whose keys are the indices themselves (the host
// knows them: BatchInfo::sample_indices) are instead queued as one
// cudaMemcpyBatchAsync of row copies from the registered memory (a run of
// consecutive rows, a sequential order, is one copy): the copy engines
// move them at the pinned copy's rate and leave the SMs to the compute.
// Smaller fields (labels) stay in the kernel.
constexpr uint64_t kCopyEngineRowBytes = 32 << 10;

}  // namespace

GatherWriter::GatherWriter(BatchLayout keys, BatchLayout output,
                           std::shared_ptr<const Dataset> dataset,
                           GatherSource source, GatherBases bases,
                           const MapStyleSource* order)
    : keys_(std::move(keys)),
      output_(std::move(output)),
      // The keys, then the outputs: one allocation per buffer (the same
      // buffer for either kind of job).
      output_offset_(AlignUp(keys_.device_end(), BatchLayout::kFieldAlignment)),
      dataset_(std::move(dataset)),
      source_(std::move(source)),
      bases_(std::move(bases)),
      order_(order) {
  if (source_.kind == GatherSource::Kind::kWidenWindow) {
    windows_.tokens = bases_.device[0];
    windows_.token_bytes = source_.token_bytes;
    windows_.is_signed = source_.signed_tokens;
    windows_.seq_len = source_.seq_len;
    return;
  }
  for (size_t f = 0; f < source_.fields.size(); ++f) {
    const GatherSource::Field& field = source_.fields[f];
    fields_.push_back({.source = bases_.device[field.region] + field.offset,
                       .stride = field.stride,
                       .bytes = field.bytes});
    host_fields_.push_back(bases_.host[field.region] + field.offset);
    // See Note [large rows by the copy engines].
    const bool engines = !source_.key && field.bytes >= kCopyEngineRowBytes;
    (engines ? engine_fields_ : kernel_fields_).push_back(static_cast<int>(f));
  }
}

absl::Status GatherWriter::Attach(const DeviceBufferPool& pool,
                                  const PinnedRing* ring) {
  return keys_.Attach(pool, ring);
}

absl::Status GatherWriter::Write(FilledBatch& job,
                                 const DeviceBufferPool::Buffer& buffer,
                                 const Stream& stream, SlotFence& fence,
                                 WriteReport& report) const {
  const NvtxRange range("pinwheel gather");
  std::byte* out = buffer.data + output_offset_;
  if (job.slot >= 0) {
    // The keys the producer read: uploaded, then gathered at. The slot is
    // free once they are copied.
    PINWHEEL_RETURN_IF_ERROR(keys_.Write(job, buffer, stream, fence, report));
    PINWHEEL_RETURN_IF_ERROR(fence.Record());
    const auto* keys =
        reinterpret_cast<const int64_t*>(buffer.data + keys_.device_offset(0));
    return Gather(job.info, out, stream, keys, GatherOrder{});
  }
  // Note [the order on the device]: nothing to copy.
  if (order_ == nullptr) {
    return absl::InternalError("a gather job without keys, and no order");
  }
  const MapStyleSource::Position position = order_->PositionOf(job.info);
  GatherOrder order{.deal = position.deal, .first = position.first};
  if (source_.window_keys.has_value()) {
    order.window_seed = source_.window_keys->seed;
    order.window_starts = source_.window_keys->starts;
  }
  return Gather(job.info, out, stream, nullptr, order);
}

absl::Status GatherWriter::Gather(const BatchInfo& info, std::byte* out,
                                  const Stream& stream, const int64_t* keys,
                                  const GatherOrder& order) const {
  const int64_t samples = info.samples;
  auto output = [&](int f) { return out + output_.field_offset(f); };
  GatherWindows windows = windows_;
  if (source_.kind == GatherSource::Kind::kWidenWindow) {
    windows.input = reinterpret_cast<int64_t*>(output(0));
    windows.target = reinterpret_cast<int64_t*>(output(1));
  }
  // The kernels and copies, with the stream's device current (the copy
  // thread's may be another GPU's); the host loops on the host backend's
  // copy thread.
  auto launch = [&]() -> absl::Status {
#ifdef PINWHEEL_HAVE_CUDA
    void* native = stream.native_handle();
    if (source_.kind == GatherSource::Kind::kWidenWindow) {
      return LaunchStatus(
          keys != nullptr
              ? LaunchGatherWindows(keys, samples, windows, native)
              : LaunchGatherWindowsOrdered(order, samples, windows, native),
          "gather windows");
    }
    PINWHEEL_RETURN_IF_ERROR(CopyLargeRows(info.sample_indices, out, native));
    // At most kMaxGatherFields outputs a launch; no allocation a batch.
    std::array<GatherField, kMaxGatherFields> chunk;
    for (size_t first = 0; first < kernel_fields_.size();
         first += kMaxGatherFields) {
      const int n = static_cast<int>(
          std::min<size_t>(kMaxGatherFields, kernel_fields_.size() - first));
      for (int i = 0; i < n; ++i) {
        const int f = kernel_fields_[first + static_cast<size_t>(i)];
        chunk[static_cast<size_t>(i)] = fields_[static_cast<size_t>(f)];
        chunk[static_cast<size_t>(i)].output = output(f);
      }
      PINWHEEL_RETURN_IF_ERROR(LaunchStatus(
          keys != nullptr
              ? LaunchGatherRows(keys, samples, chunk.data(), n, native)
              : LaunchGatherRowsOrdered(order, samples, chunk.data(), n,
                                        native),
          "gather rows"));
    }
#endif
    return absl::OkStatus();
  };
  std::vector<GatherField> fields;  // the host backend's: every field
  if (!stream.device().is_cuda()) {
    fields = fields_;
    for (size_t f = 0; f < fields.size(); ++f) {
      fields[f].output = output(static_cast<int>(f));
    }
  }
  return EnqueueTransformWork(
      stream, launch,
      [keys, samples, windows, order, fields = std::move(fields),
       kind = source_.kind] {
        std::vector<int64_t> computed;
        const int64_t* batch_keys = keys;
        if (batch_keys == nullptr) {
          computed.resize(static_cast<size_t>(samples));
          OrderedKeys(order, samples, computed.data());
          batch_keys = computed.data();
        }
        if (kind == GatherSource::Kind::kWidenWindow) {
          GatherWindowsOnHost(batch_keys, samples, windows);
        } else {
          GatherRowsOnHost(batch_keys, samples, fields.data(),
                           static_cast<int>(fields.size()));
        }
      });
}

#ifdef PINWHEEL_HAVE_CUDA
absl::Status GatherWriter::CopyLargeRows(absl::Span<const int64_t> indices,
                                         std::byte* out, void* stream) const {
  if (engine_fields_.empty()) return absl::OkStatus();
  std::vector<void*> dsts;
  std::vector<const void*> srcs;
  std::vector<size_t> sizes;
  const size_t most = engine_fields_.size() * indices.size();
  dsts.reserve(most);
  srcs.reserve(most);
  sizes.reserve(most);
  for (const int f : engine_fields_) {
    const GatherField& field = fields_[static_cast<size_t>(f)];
    const std::byte* host = host_fields_[static_cast<size_t>(f)];
    std::byte* field_out = out + output_.field_offset(f);
    for (size_t s = 0; s < indices.size(); ++s) {
      const std::byte* src =
          host + static_cast<uint64_t>(indices[s]) * field.stride;
      std::byte* dst = field_out + s * field.bytes;
      if (!sizes.empty() &&
          static_cast<const std::byte*>(srcs.back()) + sizes.back() == src &&
          static_cast<std::byte*>(dsts.back()) + sizes.back() == dst) {
        sizes.back() += field.bytes;  // contiguous with the previous row
        continue;
      }
      dsts.push_back(dst);
      srcs.push_back(src);
      sizes.push_back(field.bytes);
    }
  }
  return LaunchStatus(EnqueueRowCopies(dsts.data(), srcs.data(), sizes.data(),
                                       sizes.size(), stream),
                      "gather row copies");
}
#endif

std::shared_ptr<const std::vector<FieldView>> GatherWriter::FieldsOf(
    std::byte* buffer, int64_t samples) const {
  auto fields = std::make_shared<std::vector<FieldView>>();
  fields->reserve(output_.num_fields());
  for (int f = 0; f < output_.num_fields(); ++f) {
    fields->push_back(
        FieldViewOf(output_, f, buffer + output_offset_, samples));
  }
  return fields;
}

}  // namespace pinwheel::internal
