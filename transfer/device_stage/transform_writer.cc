#include "transfer/device_stage/transform_writer.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

#include "pinning/base/call_user.h"
#include "pinning/base/nvtx_range.h"
#include "pinning/base/status_macros.h"

namespace pinwheel::internal {
namespace {

constexpr size_t AlignUp(size_t n, size_t alignment) {
  return (n + alignment - 1) / alignment * alignment;
}

// Note [the delivered layout]
// Loader::layout() describes what a DeviceBatch carries: with a device
// transform, its outputs, then the input fields it keeps, in the copied
// batch's order (sample fields, then length fields). That is a BatchLayout
// of the outputs and the kept sample fields when the kept fields are
// closed under lengths (each kept variable-length field keeps its
// "<name>_length", and each kept length its field): BatchLayout::Create()
// appends those lengths in the same order. Otherwise (a transform that
// consumes one of the pair) every delivered field is described as a fixed
// one, a variable-length field by its maximum shape, so that field(i) is
// still fields()[i]. Its offsets describe a packed slot of those fields,
// not the device buffer: a batch's fields are where DeviceBatch::field()
// says.
absl::StatusOr<BatchLayout> DeliveredLayout(const BatchLayout& input,
                                            const BatchLayout& output,
                                            const std::vector<int>& kept) {
  const int sample_fields = input.sample().num_fields();
  auto is_kept = [&](int f) {
    return std::find(kept.begin(), kept.end(), f) != kept.end();
  };
  bool closed = true;
  for (int f = 0; f < sample_fields; ++f) {
    const int length = input.length_field(f);
    if (length >= 0 && is_kept(f) != is_kept(length)) closed = false;
  }
  std::vector<FieldSpec> fields = output.fields();
  for (int f : kept) {
    if (closed && f >= sample_fields) continue;  // Create() adds it back
    FieldSpec spec = input.fields()[f];
    if (!closed) spec.variable_length = false;
    fields.push_back(std::move(spec));
  }
  absl::StatusOr<SampleLayout> sample = SampleLayout::Create(std::move(fields));
  if (!sample.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the delivered fields (its outputs, then the inputs it "
                     "keeps) do not form a layout: ",
                     sample.status().message()));
  }
  return BatchLayout::Create(*sample, input.batch_size());
}

}  // namespace

absl::StatusOr<std::shared_ptr<TransformWriter>> TransformWriter::Create(
    const BatchLayout& layout, std::shared_ptr<const DeviceTransform> transform,
    SampleFaultPolicy faults) {
  // Every call into the transform is user code: CallUser().
  std::string name = "?";
  PINWHEEL_RETURN_IF_ERROR(CallUser("DeviceTransform::name", [&] {
    name = transform->name();
    return absl::OkStatus();
  }));
  auto refuse = [&](absl::StatusCode code, absl::string_view why) {
    return absl::Status(code,
                        absl::StrCat("device transform '", name, "': ", why));
  };
  auto guarded = [&](const char* call, auto&& body) -> absl::Status {
    absl::Status status = CallUser(call, body);
    return status.ok() ? status : refuse(status.code(), status.message());
  };
  bool reads_host = false;
  std::vector<bool> host_only(layout.num_fields(), false);
  std::vector<bool> consumed(layout.num_fields(), false);
  PINWHEEL_RETURN_IF_ERROR(guarded("DeviceTransform", [&] {
    reads_host = transform->ReadsHostInput();
    for (int f = 0; f < layout.num_fields(); ++f) {
      host_only[f] = transform->ReadsOnlyOnHost(layout.fields()[f].name);
      consumed[f] = transform->Consumes(layout.fields()[f].name);
    }
    return absl::OkStatus();
  }));
  for (int f = 0; f < layout.num_fields(); ++f) {
    if (host_only[f] && (!reads_host || !consumed[f])) {
      return refuse(absl::StatusCode::kInvalidArgument,
                    absl::StrCat("field '", layout.fields()[f].name,
                                 "' is read only on the host, so it must be "
                                 "consumed by a transform that "
                                 "ReadsHostInput()"));
    }
  }
  absl::StatusOr<SampleLayout> output = CallUser(
      "DeviceTransform::OutputLayout", [&]() -> absl::StatusOr<SampleLayout> {
        return transform->OutputLayout(layout);
      });
  if (!output.ok()) {
    return refuse(output.status().code(), output.status().message());
  }
  for (const FieldSpec& spec : output->fields()) {
    if (spec.variable_length) {
      return refuse(absl::StatusCode::kInvalidArgument,
                    absl::StrCat("output field '", spec.ToString(),
                                 "' is variable-length; outputs must be "
                                 "fixed-size"));
    }
  }
  absl::StatusOr<BatchLayout> batch =
      BatchLayout::Create(*output, layout.batch_size());
  if (!batch.ok()) {
    return refuse(batch.status().code(), batch.status().message());
  }
  std::vector<int> kept;
  for (int f = 0; f < layout.num_fields(); ++f) {
    const std::string& field = layout.fields()[f].name;
    if (consumed[f]) continue;
    if (output->FieldIndex(field) >= 0) {
      return refuse(absl::StatusCode::kInvalidArgument,
                    absl::StrCat("output field '", field,
                                 "' has the name of an input field it keeps; "
                                 "consume the input or rename the output"));
    }
    kept.push_back(f);
  }
  absl::StatusOr<BatchLayout> delivered = DeliveredLayout(layout, *batch, kept);
  if (!delivered.ok()) {
    return refuse(delivered.status().code(), delivered.status().message());
  }
  return std::shared_ptr<TransformWriter>(new TransformWriter(
      CopyWriter(layout, std::move(host_only)), std::move(transform),
      std::move(name), *std::move(batch), std::move(kept),
      *std::move(delivered), reads_host, faults));
}

TransformWriter::TransformWriter(
    CopyWriter copy, std::shared_ptr<const DeviceTransform> transform,
    std::string name, BatchLayout output, std::vector<int> kept,
    BatchLayout delivered, bool reads_host, SampleFaultPolicy faults)
    : copy_(std::move(copy)),
      transform_(std::move(transform)),
      name_(std::move(name)),
      output_(std::move(output)),
      // With a transform a buffer holds the copy and, after it, the output:
      // one allocation, fenced and recycled as one (see
      // transfer/device_transform.h).
      output_offset_(AlignUp(copy_.device_end(), BatchLayout::kFieldAlignment)),
      kept_(std::move(kept)),
      delivered_(std::move(delivered)),
      reads_host_(reads_host),
      faults_(faults) {}

absl::Status TransformWriter::Attach(const DeviceBufferPool& pool,
                                     const PinnedRing* ring) {
  PINWHEEL_RETURN_IF_ERROR(copy_.Attach(pool, ring));
  // Built once: the views differ between buffers only in their pointers.
  const BatchLayout& layout = copy_.layout();
  const int64_t capacity = layout.batch_size();
  for (int b = 0; b < pool.buffers(); ++b) {
    std::byte* base = pool.buffer_data(b);
    std::vector<FieldView> input;
    for (int f = 0; f < layout.num_fields(); ++f) {
      if (copy_.device_offset(f) == CopyWriter::kHostOnly) {
        // Not on the device (Note [fields read only on the host]).
        FieldView none = FieldViewOf(layout, f, nullptr, capacity, 0);
        none.data = nullptr;
        none.bytes = 0;
        input.push_back(std::move(none));
        continue;
      }
      input.push_back(
          FieldViewOf(layout, f, base, capacity, copy_.device_offset(f)));
    }
    std::vector<FieldView> output;
    for (int f = 0; f < output_.num_fields(); ++f) {
      output.push_back(
          FieldViewOf(output_, f, base + output_offset_, capacity));
    }
    input_.push_back(std::move(input));
    output_views_.push_back(std::move(output));
  }
  // A transform that reads the slot gets its views at each Write(): a ring
  // that grows (prefetch = kAuto) allocates its slots after this.
  ring_ = ring;
  return absl::OkStatus();
}

// Note [a host-reading transform's fence]
// A device transform that reads the pinned slot itself (a GPU JPEG decoder
// reads the compressed bytes from host memory: nvJPEG's hybrid backend on
// the calling thread, its hardware backend by a copy queued on the stream)
// must see the slot unchanged until its work has run. Its slot fence is
// therefore recorded after Run() has queued that work, not after the copy;
// the producer then refills the slot only once the stream has passed the
// transform. Other transforms keep the earlier fence (the slot is free as
// soon as it is copied). device_transform_test's
// DeviceStage.AHostReadingTransformSeesItsSlotUnchanged fails with the
// fence before Run().
absl::Status TransformWriter::Write(FilledBatch& job,
                                    const DeviceBufferPool::Buffer& buffer,
                                    const Stream& stream, SlotFence& fence,
                                    WriteReport& report) const {
  const NvtxRange range("pinwheel device transform");
  PINWHEEL_RETURN_IF_ERROR(copy_.Write(job, buffer, stream, fence, report));
  // The slot is free once copied (or, for a transform that reads it, once
  // transformed); the batch is ready once transformed.
  if (!reads_host_) PINWHEEL_RETURN_IF_ERROR(fence.Record());
  BatchInfo& info = job.info;
  std::vector<FieldView> host_input;
  if (reads_host_) {
    const BatchLayout& layout = copy_.layout();
    std::byte* const slot = ring_->slot(job.slot).data;
    for (int f = 0; f < layout.num_fields(); ++f) {
      host_input.push_back(FieldViewOf(layout, f, slot, layout.batch_size()));
    }
  }
  std::vector<SampleFault> skipped;  // allocates only when one is skipped
  absl::Status status = CallUser("DeviceTransform::Run", [&] {
    return transform_->Run({.input = input_[buffer.index],
                            .output = output_views_[buffer.index],
                            .samples = info.samples,
                            .host_input = host_input,
                            .sample_indices = info.sample_indices,
                            .padded = info.padded,
                            .skipped = faults_.skip ? &skipped : nullptr},
                           stream);
  });
  if (status.ok() && !skipped.empty()) {
    status = DropSkipped(skipped, buffer.data, stream, info, report);
  }
  if (!status.ok()) {
    return absl::Status(status.code(), absl::StrCat("device transform '", name_,
                                                    "': ", status.message()));
  }
  if (reads_host_) PINWHEEL_RETURN_IF_ERROR(fence.Record());
  return absl::OkStatus();
}

// Note [samples a transform skips]
// Under ErrorPolicy::kSkipSample a device transform that cannot produce a
// sample (the GPU JPEG decoder and a corrupt file) lists it in
// DeviceTransformBatch::skipped instead of failing the batch, having written
// the other samples' outputs packed at the front. The stage then matches
// what the workers' kSkipSample does on the host: the batch is delivered
// shorter, the sample's index dropped from sample_indices, the sample
// counted (TransferStats::samples_skipped, added to
// LoaderStats::samples_skipped); under pad_last_batch it keeps its size and
// the samples left out become padding at its end. The kept input fields are
// packed on the copy stream, after the copy and before the ready event:
// each run of good samples moves down by the samples skipped before it, in
// chunks of at most that many rows, front to back, so that no copy's source
// and destination overlap and no row is overwritten before it is read.
// Device-to-device copies of a few small rows, only in a batch that lost a
// sample; under pad_last_batch the freed tail rows are zeroed (the valid
// field's zero says padding). A batch that loses every sample is not
// delivered. The consumer never sees a sample the transform did not
// produce.
absl::Status TransformWriter::DropSkipped(
    const std::vector<SampleFault>& skipped, std::byte* buffer,
    const Stream& stream, BatchInfo& info, WriteReport& report) const {
  const int64_t samples = info.samples;
  const int64_t real = samples - info.padded;
  for (size_t k = 0; k < skipped.size(); ++k) {
    const int64_t place = skipped[k].place;
    if (place < 0 || place >= real ||
        (k > 0 && place <= skipped[k - 1].place)) {
      return absl::InternalError(absl::StrCat(
          "skipped sample place ", place, " (", k, " of ", skipped.size(),
          "): places must ascend within the batch's ", real, " real samples"));
    }
  }
  const auto skipped_count = static_cast<int64_t>(skipped.size());
  const BatchLayout& layout = copy_.layout();
  for (int f : kept_) {
    const size_t row = layout.fields()[f].bytes();
    std::byte* base = buffer + copy_.device_offset(f);
    // Run k: the samples between skipped[k] and skipped[k + 1] (or the
    // batch's end), moved down by k + 1 rows.
    for (size_t k = 0; k < skipped.size(); ++k) {
      const int64_t shift = static_cast<int64_t>(k) + 1;
      const int64_t begin = skipped[k].place + 1;
      const int64_t end =
          k + 1 < skipped.size() ? skipped[k + 1].place : samples;
      for (int64_t from = begin; from < end; from += shift) {
        const int64_t rows = std::min(shift, end - from);
        PINWHEEL_RETURN_IF_ERROR(stream.CopyOnDeviceAsync(
            base + static_cast<size_t>(from - shift) * row,
            base + static_cast<size_t>(from) * row,
            static_cast<size_t>(rows) * row));
      }
    }
    if (faults_.pad) {
      PINWHEEL_RETURN_IF_ERROR(stream.ZeroAsync(
          base + static_cast<size_t>(samples - skipped_count) * row,
          static_cast<size_t>(skipped_count) * row));
    }
  }
  for (auto it = skipped.rbegin(); it != skipped.rend(); ++it) {
    if (static_cast<size_t>(it->place) < info.sample_indices.size()) {
      info.sample_indices.erase(info.sample_indices.begin() + it->place);
    }
  }
  if (faults_.pad) {
    info.sample_indices.insert(info.sample_indices.end(),
                               static_cast<size_t>(skipped_count), -1);
    info.padded += skipped_count;
  } else {
    info.samples -= skipped_count;
  }
  report.samples_skipped = skipped_count;
  report.last_skipped =
      absl::StrCat("batch ", info.index, " of epoch ", info.epoch, ": ",
                   skipped.back().status.message());
  return absl::OkStatus();
}

std::shared_ptr<const std::vector<FieldView>> TransformWriter::FieldsOf(
    std::byte* buffer, int64_t samples) const {
  auto fields = std::make_shared<std::vector<FieldView>>();
  fields->reserve(output_.num_fields() + kept_.size());
  for (int f = 0; f < output_.num_fields(); ++f) {
    fields->push_back(
        FieldViewOf(output_, f, buffer + output_offset_, samples));
  }
  for (int f : kept_) {
    fields->push_back(FieldViewOf(copy_.layout(), f, buffer, samples,
                                  copy_.device_offset(f)));
  }
  return fields;
}

}  // namespace pinwheel::internal
