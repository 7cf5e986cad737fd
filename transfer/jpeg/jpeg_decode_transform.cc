#include "transfer/jpeg/jpeg_decode_transform.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime_api.h>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "absl/types/span.h"

#include "pinning/base/cuda_device_guard.h"
#include "pinning/base/cuda_queues.h"
#include "pinning/base/cuda_status.h"
#include "pinning/base/mutex.h"
#include "pinning/base/nvtx_range.h"
#include "pinning/base/status_macros.h"
#include "transfer/jpeg/compressed_batch.h"
#include "transfer/jpeg/crop_resize_normalize.h"
#include "transfer/jpeg/nvjpeg_decoder.h"

namespace pinwheel {
namespace {

using internal::CropResizeNormalize;
using internal::DeviceRgbImage;
using internal::ImageCrop;
using internal::NvJpegDecoder;
using internal::NvJpegOutput;
using internal::NvJpegSampleResult;
using internal::ScopedCudaDevice;

constexpr size_t kImageAlignment = 256;

size_t AlignUp(size_t n) {
  return (n + kImageAlignment - 1) / kImageAlignment * kImageAlignment;
}

// The input fields the transform reads, by name: the compressed batch's all
// but "label".
constexpr const char* kConsumed[] = {
    kCompressedJpegName, kCompressedJpegLengthName, kCompressedCropName,
    kCompressedFlipName, kCompressedSourceSizeName, kCompressedSourceNameName};

// Returns the index of batch field `name` or -1.
int IndexOf(absl::Span<const FieldView> fields, absl::string_view name) {
  for (size_t f = 0; f < fields.size(); ++f) {
    if (fields[f].name == name) return static_cast<int>(f);
  }
  return -1;
}

// Reads the frame size from the first SOFn marker of `jpeg`: true when
// found.
bool JpegSize(absl::Span<const uint8_t> jpeg, int& width, int& height) {
  size_t i = 2;
  if (jpeg.size() < 4 || jpeg[0] != 0xFF || jpeg[1] != 0xD8) return false;
  while (i + 4 <= jpeg.size()) {
    if (jpeg[i] != 0xFF) return false;
    const uint8_t marker = jpeg[i + 1];
    if (marker == 0xFF) {
      ++i;
      continue;
    }
    const size_t length = (size_t{jpeg[i + 2]} << 8) | jpeg[i + 3];
    const bool sof = marker >= 0xC0 && marker <= 0xCF && marker != 0xC4 &&
                     marker != 0xC8 && marker != 0xCC;
    if (sof) {
      if (i + 9 > jpeg.size()) return false;
      height = (jpeg[i + 5] << 8) | jpeg[i + 6];
      width = (jpeg[i + 7] << 8) | jpeg[i + 8];
      return width > 0 && height > 0;
    }
    if (marker == 0xDA) return false;
    i += 2 + length;
  }
  return false;
}

// Returns the bytes per sample of batch field `view`.
size_t RowBytes(const FieldView& view) {
  return view.bytes / static_cast<size_t>(view.shape[0]);
}

internal::NvJpegBackend ToDecoderBackend(JpegDecodeBackend backend) {
  switch (backend) {
    case JpegDecodeBackend::kHardware:
      return internal::NvJpegBackend::kHardware;
    case JpegDecodeBackend::kGpuHybrid:
      return internal::NvJpegBackend::kGpuHybrid;
    case JpegDecodeBackend::kDefault:
      return internal::NvJpegBackend::kDefault;
    case JpegDecodeBackend::kAuto:
      break;
  }
  return internal::NvJpegBackend::kAuto;
}

size_t FreeDeviceBytes() {
  size_t free = 0, total = 0;
  if (cudaMemGetInfo(&free, &total) != cudaSuccess) return 0;
  return free;
}

}  // namespace

// Note [the decode's priority]
// The transform's stream gets the device's greatest or least priority
// (JpegDecodeTransformOptions::priority). With the hardware backend the
// decode runs on the JPEG engines, not the SMs; what competes with a
// training step's kernels is the crop and nvJPEG's colour conversion: with
// the greatest priority their blocks are scheduled ahead of a waiting
// GEMM's, with the least behind them. Measured on one H200 (2026-11-27,
// W4, 8 and 14 workers, two bf16 GEMMs of 20480 after each batch, 3
// rounds): the step was +14.6..+16.7 % over the GEMMs alone with the least
// priority and +15.6..+16.7 % with the greatest, no difference, so the
// default stays the greatest (the decode keeps its rate when the GPU is
// busy).

// Note [one scratch for consecutive batches]
// Every batch is decoded into one scratch, which earlier batches' crops
// read. Stream order alone does not keep them apart: nvJPEG's hardware
// path writes its outputs while it is called, not in stream order
// (reported in torchcodec pull request 1634, H100, nvJPEG 12.3-13.2), so a
// crop still waiting for the GPU would read the next batch's pixels. It
// did: image_pipeline_test's BatchesStayTheSameWhileTheSmsAreBusy_CUDA (a
// 20 ms kernel on every multiprocessor after each batch) passed 3 runs of
// 3 on one H200 (2026-11-28) but on 2 x H200 (2026-11-29, session 21)
// failed 5 runs of 28, with 1-2 of 16 batches holding other pixels.
// So the host waits, before decoding, for the crops that read the part of
// the scratch the decode will write (an event per half, `read[h]`). A
// batch whose images fit in half the scratch (batch 256 of images up to
// 1.5 MB of RGB with the default scratch) takes the halves in turn and
// waits only for the crop two batches back; a bigger one takes the whole
// scratch and waits for both. On 2 x H200 (session 21, W4 on the GPU path,
// 4 and 8 workers, medians of 3, two rounds alternated): waiting for the
// previous crop instead cost 2-12 % on a quiet GPU (21,149-21,854 against
// 22,305-23,976 img/s); the halves cost nothing measurable (22,034-24,706
// against 22,077-23,846), nor beside a 50 ms GEMM step (4,518 against
// 4,507 img/s); the busy-SMs case passed 22 runs of 22 with either wait.
// A second scratch would have doubled its memory (805 MB at batch 256).
struct JpegDecodeTransform::State {
  int device = 0;
  cudaStream_t stream = nullptr;  // the decoder's and the crop's
  cudaEvent_t copied = nullptr;   // on the transfer stream, before the decode
  cudaEvent_t decoded = nullptr;  // on `stream`, after the crop
  // Note [one scratch for consecutive batches]: per half of the scratch,
  // recorded after the last crop that read it; the half the next batch
  // takes.
  cudaEvent_t read[2] = {nullptr, nullptr};
  int next_half = 0;
  uint8_t* scratch = nullptr;  // scratch_bytes of decoded RGB
  size_t scratch_bytes = 0;
  std::unique_ptr<NvJpegDecoder> decoder;
  std::unique_ptr<CropResizeNormalize> crop;
  // Per batch, reused (sized max_batch_size at Create()).
  std::vector<absl::Span<const uint8_t>> jpegs;
  std::vector<NvJpegOutput> outputs;
  std::vector<NvJpegSampleResult> results;
  std::vector<DeviceRgbImage> images;
  std::vector<ImageCrop> crops;
  std::vector<size_t> places;       // the batch place of each decoded image
  std::vector<SampleFault> faults;  // this batch's, by place
};

JpegDecodeTransform::JpegDecodeTransform(JpegDecodeTransformOptions options)
    : options_(std::move(options)), state_(std::make_unique<State>()) {}

JpegDecodeTransform::~JpegDecodeTransform() {
  ScopedCudaDevice on_device(state_->device);
  if (state_->stream != nullptr) cudaStreamSynchronize(state_->stream);
  state_->crop.reset();
  state_->decoder.reset();
  if (state_->scratch != nullptr) cudaFree(state_->scratch);
  if (state_->copied != nullptr) cudaEventDestroy(state_->copied);
  if (state_->decoded != nullptr) cudaEventDestroy(state_->decoded);
  for (cudaEvent_t read : state_->read) {
    if (read != nullptr) cudaEventDestroy(read);
  }
  if (state_->stream != nullptr) cudaStreamDestroy(state_->stream);
}

absl::StatusOr<std::shared_ptr<JpegDecodeTransform>>
JpegDecodeTransform::Create(const JpegDecodeTransformOptions& options) {
  auto bad = [](absl::string_view field, auto value, absl::string_view rule) {
    return absl::InvalidArgumentError(absl::StrCat(
        "JpegDecodeTransformOptions::", field, " = ", value, ": ", rule));
  };
  if (options.max_batch_size < 1 || options.max_batch_size > 65535) {
    return bad("max_batch_size", options.max_batch_size, "must be 1..65535");
  }
  if (options.size < 1) return bad("size", options.size, "must be >= 1");
  if (options.check_threads < 1 || options.check_threads > 64) {
    return bad("check_threads", options.check_threads, "must be 1..64");
  }
  if (options.max_image_width < 1 || options.max_image_height < 1) {
    return bad(
        "max_image_width/height",
        absl::StrCat(options.max_image_width, "/", options.max_image_height),
        "must be >= 1");
  }
  std::shared_ptr<JpegDecodeTransform> transform(
      new JpegDecodeTransform(options));
  State& s = *transform->state_;
  s.device = options.device;
  ScopedCudaDevice on_device(options.device);
  PINWHEEL_RETURN_IF_ERROR(on_device.status());
  const size_t free_before = FreeDeviceBytes();
  // Note [the decode's priority].
  int least_priority = 0;
  int greatest_priority = 0;
  PINWHEEL_CUDA_RETURN_IF_ERROR(
      cudaDeviceGetStreamPriorityRange(&least_priority, &greatest_priority));
  PINWHEEL_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithPriority(
      &s.stream, cudaStreamNonBlocking,
      options.priority == JpegDecodePriority::kLow ? least_priority
                                                   : greatest_priority));
  PINWHEEL_CUDA_RETURN_IF_ERROR(
      cudaEventCreateWithFlags(&s.copied, cudaEventDisableTiming));
  PINWHEEL_CUDA_RETURN_IF_ERROR(
      cudaEventCreateWithFlags(&s.decoded, cudaEventDisableTiming));
  for (cudaEvent_t& read : s.read) {
    PINWHEEL_CUDA_RETURN_IF_ERROR(
        cudaEventCreateWithFlags(&read, cudaEventDisableTiming));
  }
  s.scratch_bytes = options.scratch_bytes != 0
                        ? options.scratch_bytes
                        : static_cast<size_t>(options.max_batch_size) * 3 << 20;
  PINWHEEL_CUDA_RETURN_IF_ERROR(
      cudaMalloc(reinterpret_cast<void**>(&s.scratch), s.scratch_bytes));
  internal::NvJpegDecoderOptions decoder_options;
  decoder_options.max_batch_size = options.max_batch_size;
  decoder_options.max_image_width = options.max_image_width;
  decoder_options.max_image_height = options.max_image_height;
  decoder_options.backend = ToDecoderBackend(options.backend);
  decoder_options.check_threads = options.check_threads;
  PINWHEEL_ASSIGN_OR_RETURN(
      s.decoder,
      NvJpegDecoder::Create(options.device, s.stream, decoder_options));
  internal::CropResizeNormalizeOptions crop_options;
  crop_options.max_batch_size = options.max_batch_size;
  crop_options.out_height = options.size;
  crop_options.out_width = options.size;
  crop_options.mean = options.mean;
  crop_options.std = options.std;
  PINWHEEL_ASSIGN_OR_RETURN(
      s.crop,
      CropResizeNormalize::Create(options.device, s.stream, crop_options));
  s.jpegs.resize(options.max_batch_size);
  s.outputs.resize(options.max_batch_size);
  s.results.resize(options.max_batch_size);
  s.images.resize(options.max_batch_size);
  s.crops.resize(options.max_batch_size);
  s.places.resize(options.max_batch_size);
  s.faults.reserve(options.max_batch_size);
  std::string warmup = "no warm-up JPEG: nvJPEG may still grow";
  if (!options.warmup_jpeg.empty()) {
    // nvJPEG grows its buffers to the largest batch it has seen: decode a
    // full batch of the typical image once, and wait for it.
    const absl::Span<const uint8_t> jpeg(options.warmup_jpeg);
    int width = 0, height = 0;
    if (!JpegSize(jpeg, width, height)) {
      return absl::InvalidArgumentError(
          "JpegDecodeTransformOptions::warmup_jpeg: no JPEG frame header "
          "(SOFn) found");
    }
    const size_t pitch = 3 * static_cast<size_t>(width);
    const size_t image_bytes = AlignUp(pitch * height);
    const int n = static_cast<int>(std::min<size_t>(
        options.max_batch_size, s.scratch_bytes / image_bytes));
    for (int i = 0; i < n; ++i) {
      s.jpegs[i] = jpeg;
      s.outputs[i] = {s.scratch + i * image_bytes, pitch, width, height};
    }
    // Once per decoder state: nvJPEG sizes each on its first batch.
    for (int k = 0; k < NvJpegDecoder::kStates; ++k) {
      PINWHEEL_RETURN_IF_ERROR(
          s.decoder->Decode(absl::MakeConstSpan(s.jpegs.data(), n),
                            absl::MakeConstSpan(s.outputs.data(), n),
                            absl::MakeSpan(s.results.data(), n)));
    }
    PINWHEEL_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(s.stream));
    int batches = NvJpegDecoder::kStates;
    if (options.measure_warmup_rate) {
      // Once more, warm, timed: the rate decode = "auto" weighs.
      const absl::Time start = absl::Now();
      PINWHEEL_RETURN_IF_ERROR(
          s.decoder->Decode(absl::MakeConstSpan(s.jpegs.data(), n),
                            absl::MakeConstSpan(s.outputs.data(), n),
                            absl::MakeSpan(s.results.data(), n)));
      PINWHEEL_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(s.stream));
      transform->warmup_rate_ =
          n / std::max(1e-9, absl::ToDoubleSeconds(absl::Now() - start));
      ++batches;
    }
    warmup = absl::StrCat("after ", batches, " warm-up batch",
                          batches == 1 ? "" : "es", " of ", n, " images of ",
                          width, " x ", height);
  }
  const size_t free_after = FreeDeviceBytes();
  transform->device_bytes_ =
      free_before > free_after ? free_before - free_after : 0;
  transform->backend_ = internal::NvJpegBackendName(s.decoder->backend());
  const internal::NvJpegMemory counted = s.decoder->memory();
  transform->report_ = absl::StrCat(
      "nvJPEG ", s.decoder->backend_report(), ", ", options.check_threads,
      options.check_threads == 1 ? " check thread, " : " check threads, ",
      options.priority == JpegDecodePriority::kLow ? "low" : "high",
      " stream priority; device memory ", transform->device_bytes_,
      " bytes by cudaMemGetInfo (", warmup, "; scratch ", s.scratch_bytes,
      ", nvJPEG through its hooks ", counted.device_bytes, " device + ",
      counted.pinned_bytes, " pinned); ",
      // See Note [hardware queues] in nvjpeg_decoder.h.
      CudaQueuesReport(std::getenv("CUDA_DEVICE_MAX_CONNECTIONS")));
  if (options.device_bytes_limit != 0 &&
      transform->device_bytes_ > options.device_bytes_limit) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "JpegDecodeTransform: ", transform->device_bytes_,
        " device bytes measured at Create(), over device_bytes_limit = ",
        options.device_bytes_limit, " (", transform->report_, ")"));
  }
  return transform;
}

absl::StatusOr<SampleLayout> JpegDecodeTransform::OutputLayout(
    const BatchLayout& input) const {
  // The fields read on the host, checked against the schema (the jpeg row's
  // maximum length is the dataset's).
  const std::vector<FieldSpec> schema = CompressedSampleFields(1);
  auto expect = [&](int field) -> absl::Status {
    const FieldSpec& want_spec = schema[static_cast<size_t>(field)];
    const absl::string_view name = want_spec.name;
    const bool variable = want_spec.variable_length;
    const std::vector<int64_t> shape =
        variable ? std::vector<int64_t>() : want_spec.shape;
    const int f = input.sample().FieldIndex(name);
    const std::string want = absl::StrCat(
        DTypeName(want_spec.dtype), "[",
        shape.empty() ? "" : absl::StrCat(shape.size() == 1 ? shape[0] : 0),
        "]", variable ? " (variable length)" : "");
    if (f < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("field '", name, "' is not in the batch (expected ",
                       want, "; open the dataset with ImageDelivery::kJpeg)"));
    }
    const FieldSpec& spec = input.sample().fields()[f];
    const bool shape_ok =
        variable ? spec.shape.size() == 1 : spec.shape == shape;
    if (spec.dtype != want_spec.dtype || spec.variable_length != variable ||
        !shape_ok) {
      return absl::InvalidArgumentError(absl::StrCat(
          "field '", name, "' is ", spec.ToString(), ", expected ", want));
    }
    return absl::OkStatus();
  };
  for (int field : {kCompressedJpegField, kCompressedCropField,
                    kCompressedFlipField, kCompressedSourceSizeField}) {
    PINWHEEL_RETURN_IF_ERROR(expect(field));
  }
  if (input.batch_size() > options_.max_batch_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("batch_size ", input.batch_size(),
                     " is more than the transform's max_batch_size ",
                     options_.max_batch_size));
  }
  return SampleLayout::Create({{.name = "image",
                                .dtype = DType::kBFloat16,
                                .shape = {3, options_.size, options_.size}}});
}

bool JpegDecodeTransform::Consumes(absl::string_view name) const {
  return std::find(std::begin(kConsumed), std::end(kConsumed), name) !=
         std::end(kConsumed);
}

JpegDecodeTiming JpegDecodeTransform::timing() const {
  const internal::NvJpegTiming t = state_->decoder->timing();
  return {.batches = t.batches,
          .images = t.images,
          .host_check_ms = t.check_ms,
          .host_wait_ms = t.wait_ms,
          .host_submit_ms = t.submit_ms,
          .gpu_decode_ms = t.gpu_ms,
          .gpu_batches = t.gpu_batches};
}

absl::Status JpegDecodeTransform::Run(const DeviceTransformBatch& batch,
                                      const Stream& stream) const {
  if (!stream.device().is_cuda() ||
      stream.device().ordinal() != options_.device) {
    return absl::FailedPreconditionError(
        absl::StrCat("jpeg_decode runs on CUDA device ", options_.device,
                     ", not on ", stream.device().ToString()));
  }
  // Loaders sharing this transform (a resumed loader beside the one it
  // resumes, a train and an eval loader) take turns: the decoder's buffers
  // are one batch's at a time.
  internal::MutexLock lock(&run_mu_);
  const absl::Span<const FieldView> host = batch.host_input;
  const int jpeg = IndexOf(host, kCompressedJpegName);
  const int length = IndexOf(host, kCompressedJpegLengthName);
  const int crop = IndexOf(host, kCompressedCropName);
  const int flip = IndexOf(host, kCompressedFlipName);
  const int source = IndexOf(host, kCompressedSourceSizeName);
  if (jpeg < 0 || length < 0 || crop < 0 || flip < 0 || source < 0) {
    return absl::InternalError(
        "jpeg_decode: the stage gave no host view of the compressed fields");
  }
  const int source_name = IndexOf(host, kCompressedSourceNameName);  // optional
  State& s = *state_;
  const size_t n = static_cast<size_t>(batch.samples);
  // Padding (pad_last_batch) is not decoded: its rows are zeroed below.
  const size_t real = n - static_cast<size_t>(std::clamp<int64_t>(
                              batch.padded, 0, batch.samples));
  const size_t row = RowBytes(host[jpeg]);
  // See Note [a sample that does not decode].
  s.faults.clear();
  auto fault = [&](size_t p, const absl::Status& cause,
                   absl::string_view prefix) {
    absl::string_view message = cause.message();
    absl::ConsumePrefix(&message, prefix);
    std::string names;
    if (p < batch.sample_indices.size() && batch.sample_indices[p] >= 0) {
      absl::StrAppend(&names, "dataset index ", batch.sample_indices[p]);
    }
    if (source_name >= 0) {
      const char* text = static_cast<const char*>(host[source_name].data) +
                         p * RowBytes(host[source_name]);
      const size_t size = strnlen(text, RowBytes(host[source_name]));
      if (size > 0) {
        absl::StrAppend(&names, names.empty() ? "" : ", ",
                        absl::string_view(text, size));
      }
    }
    s.faults.push_back(
        {static_cast<int64_t>(p),
         absl::Status(cause.code(),
                      absl::StrCat("sample ", p, " of the batch",
                                   names.empty() ? "" : " (", names,
                                   names.empty() ? "" : ")", ": ", message))});
  };
  // Host checks and the scratch plan; the samples to decode are packed at
  // the front of jpegs/outputs/images/crops, s.places[k] their place.
  size_t used = 0;
  size_t candidates = 0;
  for (size_t p = 0; p < real; ++p) {
    const int64_t bytes = host[length].data_as<int64_t>()[p];
    const int32_t* size = host[source].data_as<int32_t>() + 2 * p;
    const float* c = host[crop].data_as<float>() + 4 * p;
    const int width = size[0], height = size[1];
    if (width < 1 || height < 1 || width > options_.max_image_width ||
        height > options_.max_image_height) {
      fault(p,
            absl::InvalidArgumentError(absl::StrCat(
                kCompressedSourceSizeName, " ", width, " x ", height,
                " outside 1 x 1 .. ", options_.max_image_width, " x ",
                options_.max_image_height)),
            "");
      if (batch.skipped == nullptr) return s.faults.back().status;
      continue;
    }
    const size_t pitch = 3 * static_cast<size_t>(width);
    const size_t image_bytes = AlignUp(pitch * static_cast<size_t>(height));
    if (used + image_bytes > s.scratch_bytes) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "sample ", p, " of the batch (", width, " x ", height,
          "): the batch's decoded images need more than scratch_bytes = ",
          s.scratch_bytes));
    }
    const size_t k = candidates++;
    s.places[k] = p;
    s.jpegs[k] = absl::Span<const uint8_t>(
        static_cast<const uint8_t*>(host[jpeg].data) + p * row,
        static_cast<size_t>(bytes));
    s.outputs[k] = {s.scratch + used, pitch, width, height};
    s.images[k] = {s.scratch + used, pitch, width, height};
    used += image_bytes;
    // The crop in whole pixels (training crops are whole already; the eval
    // crop is rounded), kept inside the image.
    ImageCrop& box = s.crops[k];
    box.width = std::clamp(static_cast<int>(std::lround(c[2])), 1, width);
    box.height = std::clamp(static_cast<int>(std::lround(c[3])), 1, height);
    box.x =
        std::clamp(static_cast<int>(std::lround(c[0])), 0, width - box.width);
    box.y =
        std::clamp(static_cast<int>(std::lround(c[1])), 0, height - box.height);
    box.flip = host[flip].data_as<uint8_t>()[p] != 0;
  }
  ScopedCudaDevice on_device(options_.device);
  PINWHEEL_RETURN_IF_ERROR(on_device.status());
  cudaStream_t transfer = static_cast<cudaStream_t>(stream.native_handle());
  // The decode reads the slot's host bytes and writes the scratch (ours,
  // ordered by our stream), so it need not wait for the copy; the crop
  // writes the batch's output, so it waits for the transfer stream's work.
  PINWHEEL_CUDA_RETURN_IF_ERROR(cudaEventRecord(s.copied, transfer));
  // Note [one scratch for consecutive batches]: the halves this batch
  // writes, each once the crops that read it are done (an event never
  // recorded is complete).
  const size_t half_bytes =
      s.scratch_bytes / 2 / kImageAlignment * kImageAlignment;
  bool writes[2] = {true, true};
  if (candidates > 0 && used <= half_bytes) {
    const int h = s.next_half;
    s.next_half = 1 - h;
    writes[1 - h] = false;
    if (h == 1) {
      for (size_t k = 0; k < candidates; ++k) {
        s.outputs[k].rgb += half_bytes;
        s.images[k].rgb += half_bytes;
      }
    }
  }
  if (candidates > 0) {
    for (int h = 0; h < 2; ++h) {
      if (writes[h]) {
        PINWHEEL_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(s.read[h]));
      }
    }
    const internal::NvtxRange range("pinwheel decode");
    PINWHEEL_RETURN_IF_ERROR(
        s.decoder->Decode(absl::MakeConstSpan(s.jpegs.data(), candidates),
                          absl::MakeConstSpan(s.outputs.data(), candidates),
                          absl::MakeSpan(s.results.data(), candidates)));
  }
  // The decoded images, packed in batch order (k >= good, so in place).
  size_t good = 0;
  for (size_t k = 0; k < candidates; ++k) {
    if (!s.results[k].status.ok()) {
      fault(s.places[k], s.results[k].status, absl::StrCat("sample ", k, ": "));
      continue;
    }
    s.images[good] = s.images[k];
    s.crops[good] = s.crops[k];
    ++good;
  }
  std::sort(s.faults.begin(), s.faults.end(),
            [](const SampleFault& a, const SampleFault& b) {
              return a.place < b.place;
            });
  if (!s.faults.empty() && batch.skipped == nullptr) {
    // The queued decode still runs; the stream waits for it below, so the
    // slot stays fenced until it is done.
    PINWHEEL_CUDA_RETURN_IF_ERROR(cudaEventRecord(s.decoded, s.stream));
    PINWHEEL_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(transfer, s.decoded, 0));
    return s.faults.front().status;
  }
  PINWHEEL_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(s.stream, s.copied, 0));
  auto* out = static_cast<std::byte*>(batch.output[0].data);
  if (good > 0) {
    const internal::NvtxRange range("pinwheel crop");
    PINWHEEL_RETURN_IF_ERROR(
        s.crop->Run(absl::MakeConstSpan(s.images.data(), good),
                    absl::MakeConstSpan(s.crops.data(), good), out));
  }
  if (good < n) {
    // Padding, and the rows of skipped samples: zeros, never stale pixels.
    const size_t image_row = RowBytes(batch.output[0]);
    PINWHEEL_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(
        out + good * image_row, 0, (n - good) * image_row, s.stream));
  }
  PINWHEEL_CUDA_RETURN_IF_ERROR(cudaEventRecord(s.decoded, s.stream));
  PINWHEEL_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(transfer, s.decoded, 0));
  if (good > 0) {
    for (int h = 0; h < 2; ++h) {
      if (writes[h]) {
        PINWHEEL_CUDA_RETURN_IF_ERROR(cudaEventRecord(s.read[h], s.stream));
      }
    }
  }
  if (batch.skipped != nullptr) {
    for (SampleFault& f : s.faults) batch.skipped->push_back(std::move(f));
  }
  return absl::OkStatus();
}

}  // namespace pinwheel
