// DeviceTransform: the optional device stage. A per-batch transform that
// runs on the transfer stream right after the batch's copy and before its
// ready event, reading the copied fields and writing fields of its own
// layout into device output buffers. The consumer's DeviceBatch then shows
// the output fields, followed by the input fields the transform does not
// consume (delivered where the copy put them: no second copy).
//
// The output buffers are allocated once, next to each device buffer (one
// allocation of input + output bytes per buffer), and are fenced and
// recycled with it: the consumer's release fences both. Nothing is
// allocated or synchronised per batch by the stage itself.
//
// On the cuda backend a transform launches kernels on `stream`; on the host
// backend it queues its host loop with Stream::EnqueueHostTask(), so the
// same stage runs, in order, on the host backend's copy thread (what CI
// tests). Shipped: NormalizeImage (transfer/normalize_image.h) and
// WidenTokens (transfer/widen_tokens.h).
//
// Example:
//   auto normalize = NormalizeImage::Create({.field = "image",
//       .input_layout = ImageLayout::kHWC, .output_dtype = DType::kBFloat16,
//       .mean = {123.7f, 116.3f, 103.5f}, .std = {58.4f, 57.1f, 57.4f}});
//   LoaderBuilder(dataset).batch_size(256).device_transform(*normalize)...
//
// A transform is shared by the stage; its methods must be thread-safe (they
// are const). Work it queues must not refer to the transform object itself
// after the stage is gone (copy what the work needs into it, as the shipped
// ones do): the stage waits for its stream at shutdown, not for anything
// else. Loader::layout() describes the delivered fields (outputs, then the
// kept inputs); Loader::input_layout() the batch the transform is given.
#ifndef PINWHEEL_TRANSFER_DEVICE_TRANSFORM_H_
#define PINWHEEL_TRANSFER_DEVICE_TRANSFORM_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

#include "transfer/device_batch.h"
#include "transfer/sample_layout.h"
#include "transfer/stream.h"

namespace pinwheel {

// A sample a transform could not produce (corrupt, unsupported), left out
// of its batch under ErrorPolicy::kSkipSample (see
// DeviceTransformBatch::skipped).
struct SampleFault {
  int64_t place = 0;    // in the batch, 0..samples-1
  absl::Status status;  // why, naming the sample
};

// What the device stage does with a sample its transform cannot produce
// (see Note [samples a transform skips] in
// transfer/device_stage/transform_writer.cc).
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

// One batch handed to DeviceTransform::Run(). The views are built once per
// device buffer: each field's shape[0] (and bytes) is the batch capacity
// (batch_size); only the first `samples` samples hold data. Borrowed for
// the call; the memory they point at stays valid until the work queued on
// the stream has run.
struct DeviceTransformBatch {
  // Every field of the copied batch (BatchLayout order, length fields
  // included), in device memory (host memory on the host backend).
  absl::Span<const FieldView> input;
  // The fields of OutputLayout(), in its order.
  absl::Span<const FieldView> output;
  int64_t samples = 0;  // 1..batch_size
  // The same fields as `input`, in the pinned slot the batch was copied
  // from (host memory). Only for a transform whose ReadsHostInput() is
  // true: the stage then keeps the slot fenced until the work Run() queued
  // has run (see Note [a host-reading transform's fence] in
  // transfer/device_stage/transform_writer.cc). Empty otherwise.
  absl::Span<const FieldView> host_input;
  // The dataset index of each of the `samples` samples, in batch order (-1
  // for an IterableDataset's samples and for padding): for messages naming
  // a sample.
  absl::Span<const int64_t> sample_indices;
  // LoaderOptions::pad_last_batch: the last `padded` samples are padding
  // (zero-filled, nothing to read); a transform writes zeros for them.
  int64_t padded = 0;
  // Non-null when the loader skips failed samples (ErrorPolicy::kSkipSample,
  // see Note [samples a transform skips] in
  // transfer/device_stage/transform_writer.cc): a transform that finds a sample
  // it cannot produce then appends it here, in ascending place order, instead
  // of failing the call, writes the other samples' outputs packed at rows 0, 1,
  // ... in batch order and zeros in the rows after them up to `samples`; the
  // stage then packs the kept input fields alike and drops the skipped samples
  // from the batch. A transform that never fails per sample ignores it. Empty
  // on entry.
  std::vector<SampleFault>* skipped = nullptr;
};

// Interface; thread-safe (const methods).
class DeviceTransform {
 public:
  virtual ~DeviceTransform() = default;

  // Returns a short name for messages ("normalize_image").
  virtual std::string name() const = 0;

  // Returns the per-sample layout of what Run() writes for batches laid out
  // by `input`, or InvalidArgument naming the input field and what was
  // expected (dtype, shape). Called once, by LoaderBuilder::Build() (through
  // TransformWriter::Create). Output fields may not be variable-length.
  [[nodiscard]] virtual absl::StatusOr<SampleLayout> OutputLayout(
      const BatchLayout& input) const = 0;

  // Returns whether input batch field `name` is consumed (not delivered to
  // the consumer). Fields not consumed are delivered after the outputs;
  // their names must not repeat an output's.
  virtual bool Consumes(absl::string_view name) const = 0;

  // Queues the transform of `batch` on `stream` (after the copy; the ready
  // event is recorded after it). Returns the status of queueing it; the
  // work itself cannot report an error later, so validate in OutputLayout.
  // Must not allocate device memory or synchronise.
  [[nodiscard]] virtual absl::Status Run(const DeviceTransformBatch& batch,
                                         const Stream& stream) const = 0;

  // Returns whether Run() (or the work it queues) reads the pinned slot
  // (DeviceTransformBatch::host_input), as a GPU JPEG decoder does with the
  // compressed bytes. The stage then recycles the slot only after the
  // stream has passed the transform's work, not right after the copy.
  virtual bool ReadsHostInput() const { return false; }

  // Returns whether input batch field `name` is read only from the pinned
  // slot (host_input), never from the device: the stage then neither copies
  // it to the device nor allocates device memory for it (its `input` view
  // has no data). Only for a transform that ReadsHostInput() and consumes
  // the field (TransformWriter::Create refuses others). The GPU JPEG decoder
  // says so of the compressed bytes: nvJPEG reads them from the slot.
  virtual bool ReadsOnlyOnHost(absl::string_view name) const {
    (void)name;
    return false;
  }
};

}  // namespace pinwheel

#endif  // PINWHEEL_TRANSFER_DEVICE_TRANSFORM_H_
