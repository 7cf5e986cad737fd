#include "transfer/jpeg/jpeg_decode_transform.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <cuda_runtime_api.h>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/types/span.h"
#include "tbb/parallel_for.h"
#include "tbb/task_arena.h"

#include "pinning/base/cuda_device_guard.h"
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

// Note [decode lanes]
// With the hardware backend the GPU is not what bounds the decode: on one
// H200 (2026-11-27, W4, 14 workers, one lane) the 7 engines took 10.0 ms a
// batch of 256 while the transfer thread spent 7.3 ms in the host checks
// and 9.6 ms inside nvjpegDecodeBatched (nvJPEG parses every stream on the
// calling thread), 16.9 ms a batch: 14,459 img/s against the engines'
// 25,600. So a batch is split into `lanes` contiguous shares, each decoded
// by a lane of its own (an NvJpegDecoder with its own nvJPEG handle, so
// that no state is shared; see NvJpegDecoder's Note [overlapping batches])
// on its own stream, the lanes' Decode() calls run side by side on a oneTBB
// arena of `lanes` threads (the calling thread one of them). Lane 0's
// stream is the transform's; the crop waits for the other lanes' events.
// A lane's results name samples by their place in its share; Run() maps
// them back to the batch.
//
// Note [the decode's priority]
// The transform's streams get the device's greatest or least priority
// (JpegDecodeTransformOptions::priority). With the hardware backend the
// decode itself runs on the engines, not the SMs; what competes with a
// training step's kernels is the crop (and nvJPEG's colour conversion):
// with the greatest priority their blocks are scheduled ahead of a GEMM's
// waiting blocks, with the least behind them.

struct JpegDecodeTransform::State {
  // One decoder and its stream (Note [decode lanes]).
  struct Lane {
    std::unique_ptr<NvJpegDecoder> decoder;
    cudaStream_t stream = nullptr;  // lane 0: State::stream (not owned)
    cudaEvent_t done = nullptr;     // lanes 1..: after this batch's decode
    size_t begin = 0;               // this batch's share of the candidates
    size_t end = 0;
    absl::Status status;  // this batch's Decode() call
  };
  int device = 0;
  cudaStream_t stream = nullptr;  // lane 0's decode and the crop
  cudaEvent_t copied = nullptr;   // on the transfer stream, before the decode
  cudaEvent_t decoded = nullptr;  // on `stream`, after the crop
  uint8_t* scratch = nullptr;     // scratch_bytes of decoded RGB
  size_t scratch_bytes = 0;
  std::vector<Lane> lanes;
  std::unique_ptr<tbb::task_arena> arena;  // lanes.size() threads
  std::atomic<int64_t> decode_wall_ns{0};  // JpegDecodeTiming::host_decode_ms
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
  for (State::Lane& lane : state_->lanes) {
    lane.decoder.reset();  // waits for its stream
    if (lane.done != nullptr) cudaEventDestroy(lane.done);
    if (lane.stream != nullptr && lane.stream != state_->stream) {
      cudaStreamDestroy(lane.stream);
    }
  }
  if (state_->scratch != nullptr) cudaFree(state_->scratch);
  if (state_->copied != nullptr) cudaEventDestroy(state_->copied);
  if (state_->decoded != nullptr) cudaEventDestroy(state_->decoded);
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
  if (options.lanes < 1 || options.lanes > 8) {
    return bad("lanes", options.lanes, "must be 1..8");
  }
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
  const int priority = options.priority == JpegDecodePriority::kLow
                           ? least_priority
                           : greatest_priority;
  PINWHEEL_CUDA_RETURN_IF_ERROR(
      cudaStreamCreateWithPriority(&s.stream, cudaStreamNonBlocking, priority));
  PINWHEEL_CUDA_RETURN_IF_ERROR(
      cudaEventCreateWithFlags(&s.copied, cudaEventDisableTiming));
  PINWHEEL_CUDA_RETURN_IF_ERROR(
      cudaEventCreateWithFlags(&s.decoded, cudaEventDisableTiming));
  s.scratch_bytes = options.scratch_bytes != 0
                        ? options.scratch_bytes
                        : static_cast<size_t>(options.max_batch_size) * 3 << 20;
  PINWHEEL_CUDA_RETURN_IF_ERROR(
      cudaMalloc(reinterpret_cast<void**>(&s.scratch), s.scratch_bytes));
  internal::NvJpegDecoderOptions decoder_options;
  const int share =
      (options.max_batch_size + options.lanes - 1) / options.lanes;
  decoder_options.max_batch_size = share;
  decoder_options.max_image_width = options.max_image_width;
  decoder_options.max_image_height = options.max_image_height;
  decoder_options.backend = ToDecoderBackend(options.backend);
  decoder_options.check_threads = options.check_threads;
  s.lanes.resize(static_cast<size_t>(options.lanes));
  for (size_t l = 0; l < s.lanes.size(); ++l) {
    State::Lane& lane = s.lanes[l];
    if (l == 0) {
      lane.stream = s.stream;
    } else {
      PINWHEEL_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithPriority(
          &lane.stream, cudaStreamNonBlocking, priority));
      PINWHEEL_CUDA_RETURN_IF_ERROR(
          cudaEventCreateWithFlags(&lane.done, cudaEventDisableTiming));
    }
    PINWHEEL_ASSIGN_OR_RETURN(
        lane.decoder,
        NvJpegDecoder::Create(options.device, lane.stream, decoder_options));
  }
  if (s.lanes.size() > 1) {
    s.arena = std::make_unique<tbb::task_arena>(options.lanes);
  }
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
    const int n = static_cast<int>(
        std::min<size_t>(share, s.scratch_bytes / image_bytes));
    for (int i = 0; i < n; ++i) {
      s.jpegs[i] = jpeg;
      s.outputs[i] = {s.scratch + i * image_bytes, pitch, width, height};
    }
    // Once per decoder state of each lane: nvJPEG sizes each on its first
    // batch. The lanes write the same scratch, one after another.
    for (State::Lane& lane : s.lanes) {
      for (int k = 0; k < NvJpegDecoder::kStates; ++k) {
        PINWHEEL_RETURN_IF_ERROR(
            lane.decoder->Decode(absl::MakeConstSpan(s.jpegs.data(), n),
                                 absl::MakeConstSpan(s.outputs.data(), n),
                                 absl::MakeSpan(s.results.data(), n)));
      }
      PINWHEEL_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(lane.stream));
    }
    warmup =
        absl::StrCat("after ", NvJpegDecoder::kStates, " warm-up batches of ",
                     n, " images of ", width, " x ", height);
  }
  const size_t free_after = FreeDeviceBytes();
  transform->device_bytes_ =
      free_before > free_after ? free_before - free_after : 0;
  const NvJpegDecoder& first = *s.lanes.front().decoder;
  transform->backend_ = internal::NvJpegBackendName(first.backend());
  internal::NvJpegMemory counted;
  for (const State::Lane& lane : s.lanes) {
    counted.device_bytes += lane.decoder->memory().device_bytes;
    counted.pinned_bytes += lane.decoder->memory().pinned_bytes;
  }
  transform->report_ = absl::StrCat(
      "nvJPEG ", first.backend_report(), ", ", options.lanes,
      options.lanes == 1 ? " lane, " : " lanes, ",
      options.priority == JpegDecodePriority::kLow ? "low" : "high",
      " stream priority; device memory ", transform->device_bytes_,
      " bytes by cudaMemGetInfo (", warmup, "; scratch ", s.scratch_bytes,
      ", nvJPEG through its hooks ", counted.device_bytes, " device + ",
      counted.pinned_bytes, " pinned)");
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
  JpegDecodeTiming out;
  out.lanes = static_cast<int>(state_->lanes.size());
  out.host_decode_ms = static_cast<double>(state_->decode_wall_ns.load()) / 1e6;
  for (const State::Lane& lane : state_->lanes) {
    const internal::NvJpegTiming t = lane.decoder->timing();
    if (&lane == &state_->lanes.front()) out.batches = t.batches;
    out.images += t.images;
    out.host_check_ms += t.check_ms;
    out.host_wait_ms += t.wait_ms;
    out.host_submit_ms += t.submit_ms;
    out.gpu_decode_ms += t.gpu_ms;
    out.gpu_batches += t.gpu_batches;
  }
  return out;
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
  // Each lane decodes its share (Note [decode lanes]).
  const size_t lanes = s.lanes.size();
  const size_t share = (candidates + lanes - 1) / lanes;
  for (size_t l = 0; l < lanes; ++l) {
    s.lanes[l].begin = std::min(candidates, l * share);
    s.lanes[l].end = std::min(candidates, s.lanes[l].begin + share);
    s.lanes[l].status = absl::OkStatus();
  }
  auto decode_lane = [&](size_t l) {
    State::Lane& lane = s.lanes[l];
    if (lane.begin == lane.end) return;
    // A lane's thread may be one of the arena's: set its device.
    ScopedCudaDevice lane_device(options_.device);
    lane.status = lane_device.status();
    const size_t count = lane.end - lane.begin;
    if (lane.status.ok()) {
      lane.status = lane.decoder->Decode(
          absl::MakeConstSpan(s.jpegs.data() + lane.begin, count),
          absl::MakeConstSpan(s.outputs.data() + lane.begin, count),
          absl::MakeSpan(s.results.data() + lane.begin, count));
    }
    if (lane.status.ok() && lane.done != nullptr) {
      lane.status = CudaStatus(cudaEventRecord(lane.done, lane.stream),
                               "cudaEventRecord");
    }
  };
  if (candidates > 0) {
    const internal::NvtxRange range("pinwheel decode");
    const absl::Time start = absl::Now();
    if (lanes == 1) {
      decode_lane(0);
    } else {
      s.arena->execute([&] {
        tbb::parallel_for(size_t{0}, lanes, decode_lane,
                          tbb::simple_partitioner());
      });
    }
    s.decode_wall_ns.fetch_add(absl::ToInt64Nanoseconds(absl::Now() - start));
  }
  for (const State::Lane& lane : s.lanes) {
    PINWHEEL_RETURN_IF_ERROR(lane.status);
    if (lane.done != nullptr && lane.begin != lane.end) {
      PINWHEEL_CUDA_RETURN_IF_ERROR(
          cudaStreamWaitEvent(s.stream, lane.done, 0));
    }
  }
  // The decoded images, packed in batch order (k >= good, so in place).
  size_t good = 0;
  for (size_t k = 0; k < candidates; ++k) {
    if (!s.results[k].status.ok()) {
      // The lane named the sample by its place in its share.
      const size_t in_share = share == 0 ? k : k % share;
      fault(s.places[k], s.results[k].status,
            absl::StrCat("sample ", in_share, ": "));
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
  if (batch.skipped != nullptr) {
    for (SampleFault& f : s.faults) batch.skipped->push_back(std::move(f));
  }
  return absl::OkStatus();
}

}  // namespace pinwheel
