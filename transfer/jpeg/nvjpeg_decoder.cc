#include "transfer/jpeg/nvjpeg_decoder.h"

#include <nvjpeg.h>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "tbb/parallel_for.h"

#include "pinning/base/cuda_device_guard.h"
#include "pinning/base/cuda_status.h"
#include "pinning/base/mutex.h"
#include "pinning/base/status_macros.h"
#include "transfer/jpeg/jpeg_framing.h"
#include "transfer/jpeg/nvjpeg_handles.h"
#include "transfer/jpeg/nvjpeg_status.h"

namespace pinwheel::internal {

std::string NvJpegBackendName(NvJpegBackend backend) {
  switch (backend) {
    case NvJpegBackend::kAuto:
      return "auto";
    case NvJpegBackend::kHardware:
      return "hardware";
    case NvJpegBackend::kGpuHybrid:
      return "gpu_hybrid";
    case NvJpegBackend::kDefault:
      return "default";
  }
  return "unknown";
}

namespace {

nvjpegBackend_t ToNvJpeg(NvJpegBackend backend) {
  switch (backend) {
    case NvJpegBackend::kHardware:
      return NVJPEG_BACKEND_HARDWARE;
    case NvJpegBackend::kGpuHybrid:
      return NVJPEG_BACKEND_GPU_HYBRID;
    case NvJpegBackend::kAuto:
    case NvJpegBackend::kDefault:
      break;
  }
  return NVJPEG_BACKEND_DEFAULT;
}

absl::Status SampleError(size_t i, const absl::Status& status) {
  return absl::Status(status.code(),
                      absl::StrCat("sample ", i, ": ", status.message()));
}

// nvJPEG's header parse of `jpeg` into `parsed`, then the frame's size
// (`width`, `height`) and colour components against the decoder's limits
// and `output`. Returns the first check that fails.
absl::Status CheckHeader(nvjpegHandle_t handle, nvjpegJpegStream_t parsed,
                         absl::Span<const uint8_t> jpeg,
                         const NvJpegOutput& output,
                         const NvJpegDecoderOptions& options,
                         unsigned int& width, unsigned int& height) {
  // The header only: the batched call parses the whole stream itself,
  // and a full parse here cost about 40 us an image of 100 KB on the
  // transfer thread (the one-image path parses in full, DecodeAlone).
  absl::Status status = NvJpegStatus(
      nvjpegJpegStreamParseHeader(handle, jpeg.data(), jpeg.size(), parsed),
      "nvjpegJpegStreamParseHeader");
  unsigned int components = 0;
  if (status.ok()) {
    status = NvJpegStatus(
        nvjpegJpegStreamGetFrameDimensions(parsed, &width, &height),
        "nvjpegJpegStreamGetFrameDimensions");
  }
  if (status.ok()) {
    status = NvJpegStatus(nvjpegJpegStreamGetComponentsNum(parsed, &components),
                          "nvjpegJpegStreamGetComponentsNum");
  }
  if (status.ok() && components != 1 && components != 3) {
    status = absl::UnimplementedError(absl::StrCat(
        components,
        " colour components (CMYK or YCCK?); the GPU decoder takes 1 or 3"));
  }
  if (status.ok() &&
      (width == 0 || height == 0 ||
       width > static_cast<unsigned>(options.max_image_width) ||
       height > static_cast<unsigned>(options.max_image_height))) {
    status = absl::InvalidArgumentError(
        absl::StrCat("image of ", width, " x ", height,
                     " pixels; the decoder takes 1 x 1 to ",
                     options.max_image_width, " x ", options.max_image_height));
  }
  if (status.ok() && (width > static_cast<unsigned>(output.max_width) ||
                      height > static_cast<unsigned>(output.max_height))) {
    status = absl::InvalidArgumentError(
        absl::StrCat("image of ", width, " x ", height,
                     " pixels does not fit its output of ", output.max_width,
                     " x ", output.max_height));
  }
  return status;
}

}  // namespace

#define PINWHEEL_NVJPEG_RETURN_IF_ERROR(call) \
  PINWHEEL_RETURN_IF_ERROR(NvJpegStatus((call), #call))

NvJpegDecoder::NvJpegDecoder(int device, cudaStream_t stream,
                             const NvJpegDecoderOptions& options)
    : device_(device), stream_(stream), options_(options) {}

absl::StatusOr<std::unique_ptr<NvJpegDecoder>> NvJpegDecoder::Create(
    int device, cudaStream_t stream, const NvJpegDecoderOptions& options) {
  if (options.max_batch_size < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("NvJpegDecoderOptions.max_batch_size is ",
                     options.max_batch_size, "; it must be 1 or more"));
  }
  if (options.max_image_width < 1 || options.max_image_height < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "NvJpegDecoderOptions.max_image_width x max_image_height is ",
        options.max_image_width, " x ", options.max_image_height,
        "; both must be 1 or more"));
  }
  if (options.check_threads < 1 || options.check_threads > 64) {
    return absl::InvalidArgumentError(
        absl::StrCat("NvJpegDecoderOptions.check_threads is ",
                     options.check_threads, "; it must be 1..64"));
  }
  std::unique_ptr<NvJpegDecoder> decoder(
      new NvJpegDecoder(device, stream, options));
  ScopedCudaDevice on_device(device);
  PINWHEEL_RETURN_IF_ERROR(on_device.status());
  PINWHEEL_RETURN_IF_ERROR(decoder->Start());
  return decoder;
}

absl::Status NvJpegDecoder::Start() {
  accounting_ = std::make_unique<Accounting>();
  {
    MutexLock lock(&accounting_->mu);
    accounting_->device.limit = options_.device_bytes_limit;
    accounting_->pinned.limit = options_.pinned_bytes_limit;
  }
  std::vector<NvJpegBackend> candidates;
  if (options_.backend == NvJpegBackend::kAuto) {
    candidates = {NvJpegBackend::kHardware, NvJpegBackend::kGpuHybrid,
                  NvJpegBackend::kDefault};
  } else {
    candidates = {options_.backend};
  }
  std::string skipped;
  absl::Status last;
  for (NvJpegBackend candidate : candidates) {
    auto handles = std::make_unique<Handles>();
    handles->device_allocator = CountedDeviceAllocator(accounting_.get());
    handles->pinned_allocator = CountedPinnedAllocator(accounting_.get());
    last = NvJpegStatus(
        nvjpegCreateExV2(ToNvJpeg(candidate), &handles->device_allocator,
                         &handles->pinned_allocator, NVJPEG_FLAGS_DEFAULT,
                         &handles->handle),
        "nvjpegCreateExV2");
    if (last.ok() && candidate == NvJpegBackend::kHardware) {
      unsigned int engines = 0;
      unsigned int cores = 0;
      last = NvJpegStatus(
          nvjpegGetHardwareDecoderInfo(handles->handle, &engines, &cores),
          "nvjpegGetHardwareDecoderInfo");
      if (last.ok() && engines == 0) {
        last = absl::FailedPreconditionError("the GPU has no JPEG engines");
      }
      if (last.ok()) {
        backend_report_ = absl::StrCat("hardware (", engines, " engines x ",
                                       cores, " cores)");
      }
    } else if (last.ok()) {
      backend_report_ = NvJpegBackendName(candidate);
    }
    if (!last.ok()) {
      absl::StrAppend(&skipped, skipped.empty() ? "" : "; ",
                      NvJpegBackendName(candidate), ": ", last.message());
      continue;
    }
    backend_ = candidate;
    handles_ = std::move(handles);
    break;
  }
  if (handles_ == nullptr) {
    return absl::Status(
        last.code(), absl::StrCat("no nvJPEG backend could start: ", skipped));
  }
  if (!skipped.empty()) absl::StrAppend(&backend_report_, " (", skipped, ")");

  Handles& h = *handles_;
  const size_t n = options_.max_batch_size;
  for (Handles::Batched& b : h.states) {
    PINWHEEL_NVJPEG_RETURN_IF_ERROR(nvjpegJpegStateCreate(h.handle, &b.state));
    PINWHEEL_CUDA_RETURN_IF_ERROR(
        cudaEventCreateWithFlags(&b.done, cudaEventDisableTiming));
    PINWHEEL_CUDA_RETURN_IF_ERROR(cudaEventCreate(&b.gpu_start));
    PINWHEEL_CUDA_RETURN_IF_ERROR(cudaEventCreate(&b.gpu_stop));
    b.data.reserve(n);
    b.lengths.reserve(n);
    b.destinations.reserve(n);
  }
  h.streams.reserve(options_.max_batch_size);
  for (int i = 0; i < options_.max_batch_size; ++i) {
    nvjpegJpegStream_t s = nullptr;
    PINWHEEL_NVJPEG_RETURN_IF_ERROR(nvjpegJpegStreamCreate(h.handle, &s));
    h.streams.push_back(s);
  }
  PINWHEEL_NVJPEG_RETURN_IF_ERROR(
      nvjpegDecoderCreate(h.handle, NVJPEG_BACKEND_HYBRID, &h.alone_decoder));
  PINWHEEL_NVJPEG_RETURN_IF_ERROR(
      nvjpegDecoderStateCreate(h.handle, h.alone_decoder, &h.alone_state));
  PINWHEEL_NVJPEG_RETURN_IF_ERROR(nvjpegBufferPinnedCreateV2(
      h.handle, &h.pinned_allocator, &h.alone_pinned));
  PINWHEEL_NVJPEG_RETURN_IF_ERROR(nvjpegBufferDeviceCreateV2(
      h.handle, &h.device_allocator, &h.alone_device));
  PINWHEEL_NVJPEG_RETURN_IF_ERROR(
      nvjpegStateAttachPinnedBuffer(h.alone_state, h.alone_pinned));
  PINWHEEL_NVJPEG_RETURN_IF_ERROR(
      nvjpegStateAttachDeviceBuffer(h.alone_state, h.alone_device));
  PINWHEEL_NVJPEG_RETURN_IF_ERROR(
      nvjpegDecodeParamsCreate(h.handle, &h.alone_params));
  PINWHEEL_NVJPEG_RETURN_IF_ERROR(
      nvjpegDecodeParamsSetOutputFormat(h.alone_params, NVJPEG_OUTPUT_RGBI));
  PINWHEEL_CUDA_RETURN_IF_ERROR(
      cudaEventCreateWithFlags(&h.done, cudaEventDisableTiming));
  h.batched.reserve(n);
  h.alone.reserve(n);
  h.route.resize(n);
  if (options_.check_threads > 1) {
    h.check_arena = std::make_unique<tbb::task_arena>(options_.check_threads);
  }
  return absl::OkStatus();
}

NvJpegDecoder::~NvJpegDecoder() {
  ScopedCudaDevice on_device(device_);
  if (handles_ != nullptr && handles_->done != nullptr && issued_) {
    cudaEventSynchronize(handles_->done);
  }
  handles_.reset();
}

NvJpegTiming NvJpegDecoder::timing() const {
  MutexLock lock(&accounting_->mu);
  return accounting_->timing;
}

NvJpegMemory NvJpegDecoder::memory() const {
  NvJpegMemory memory;
  MutexLock lock(&accounting_->mu);
  memory.device_bytes = accounting_->device.bytes;
  memory.pinned_bytes = accounting_->pinned.bytes;
  memory.device_peak_bytes = accounting_->device.peak;
  memory.pinned_peak_bytes = accounting_->pinned.peak;
  memory.device_allocations = accounting_->device.allocations;
  memory.pinned_allocations = accounting_->pinned.allocations;
  memory.refused_allocations = accounting_->refused;
  return memory;
}

absl::Status NvJpegDecoder::Decode(
    absl::Span<const absl::Span<const uint8_t>> jpegs,
    absl::Span<const NvJpegOutput> outputs,
    absl::Span<NvJpegSampleResult> results) {
  if (outputs.size() != jpegs.size() || results.size() != jpegs.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "NvJpegDecoder::Decode: ", jpegs.size(), " images, ", outputs.size(),
        " outputs and ", results.size(), " results; they must be equal"));
  }
  if (jpegs.size() > static_cast<size_t>(options_.max_batch_size)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "NvJpegDecoder::Decode: ", jpegs.size(),
        " images, more than max_batch_size ", options_.max_batch_size));
  }
  ScopedCudaDevice on_device(device_);
  PINWHEEL_RETURN_IF_ERROR(on_device.status());
  Handles& h = *handles_;
  const absl::Time start = absl::Now();
  // The one-image path reuses the parsed streams and its one state: after
  // a batch that took it, wait for everything before parsing again.
  if (issued_ && !h.alone.empty()) {
    PINWHEEL_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(h.done));
  }

  // Host checks first (Note [one bad image fails alone]), on several
  // threads when asked (Note [parallel checks]).
  auto check = [&](size_t i) {
    h.route[i] = CheckSample(i, jpegs[i], outputs[i], results[i]);
  };
  if (h.check_arena != nullptr && jpegs.size() > 1) {
    h.check_arena->execute(
        [&] { tbb::parallel_for(size_t{0}, jpegs.size(), check); });
  } else {
    for (size_t i = 0; i < jpegs.size(); ++i) check(i);
  }
  h.batched.clear();
  h.alone.clear();
  for (size_t i = 0; i < jpegs.size(); ++i) {
    if (h.route[i] == kBatched) h.batched.push_back(i);
    if (h.route[i] == kAlone) h.alone.push_back(i);
  }

  const absl::Time checked = absl::Now();
  // This batch's state is free once its last user has been decoded (Note
  // [overlapping batches]).
  const size_t state = static_cast<size_t>(h.next_state);
  Handles::Batched& b = h.states[state];
  float gpu_ms = -1;
  if (b.issued) {
    PINWHEEL_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(b.done));
    PINWHEEL_CUDA_RETURN_IF_ERROR(
        cudaEventElapsedTime(&gpu_ms, b.gpu_start, b.gpu_stop));
  }
  const absl::Time waited = absl::Now();
  PINWHEEL_CUDA_RETURN_IF_ERROR(cudaEventRecord(b.gpu_start, stream_));

  if (!h.batched.empty()) DecodeBatched(state, jpegs, outputs, results);
  bool alone_issued = false;
  for (size_t i : h.alone) {
    if (alone_issued) {
      // The one-image path stages through one pinned buffer.
      PINWHEEL_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
    }
    DecodeAlone(i, jpegs, outputs, results);
    alone_issued = true;
  }

  PINWHEEL_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  PINWHEEL_CUDA_RETURN_IF_ERROR(cudaEventRecord(b.gpu_stop, stream_));
  PINWHEEL_CUDA_RETURN_IF_ERROR(cudaEventRecord(b.done, stream_));
  PINWHEEL_CUDA_RETURN_IF_ERROR(cudaEventRecord(h.done, stream_));
  b.issued = true;
  h.next_state = (h.next_state + 1) % kStates;
  issued_ = true;
  const absl::Time submitted = absl::Now();
  MutexLock lock(&accounting_->mu);
  NvJpegTiming& t = accounting_->timing;
  ++t.batches;
  t.images += static_cast<int64_t>(jpegs.size());
  t.check_ms += absl::ToDoubleMilliseconds(checked - start);
  t.wait_ms += absl::ToDoubleMilliseconds(waited - checked);
  t.submit_ms += absl::ToDoubleMilliseconds(submitted - waited);
  if (gpu_ms >= 0) {
    t.gpu_ms += gpu_ms;
    ++t.gpu_batches;
  }
  return absl::OkStatus();
}

NvJpegDecoder::Route NvJpegDecoder::CheckSample(size_t i,
                                                absl::Span<const uint8_t> jpeg,
                                                const NvJpegOutput& output,
                                                NvJpegSampleResult& result) {
  Handles& h = *handles_;
  result = NvJpegSampleResult{};
  if (output.rgb == nullptr || output.max_width < 1 || output.max_height < 1 ||
      output.pitch < 3 * static_cast<size_t>(output.max_width)) {
    result.status = absl::InvalidArgumentError(absl::StrCat(
        "sample ", i, ": output buffer ",
        output.rgb == nullptr ? "is null" : "has", " pitch ", output.pitch,
        " for ", output.max_width, " x ", output.max_height,
        " pixels (needs a device pointer and pitch >= 3 * max_width)"));
    return kFailed;
  }
  absl::Status framed = CheckJpegFraming(jpeg);
  if (!framed.ok()) {
    result.status = SampleError(i, framed);
    return kFailed;
  }
  nvjpegJpegStream_t parsed = h.streams[i];
  unsigned int width = 0;
  unsigned int height = 0;
  absl::Status status =
      CheckHeader(h.handle, parsed, jpeg, output, options_, width, height);
  if (!status.ok()) {
    result.status = SampleError(i, status);
    return kFailed;
  }
  result.width = static_cast<int>(width);
  result.height = static_cast<int>(height);
  bool batchable = true;
  if (backend_ == NvJpegBackend::kHardware) {
    int unsupported = 1;
    const nvjpegStatus_t supported =
        nvjpegDecodeBatchedSupported(h.handle, parsed, &unsupported);
    batchable = supported == NVJPEG_STATUS_SUCCESS && unsupported == 0;
  }
  return batchable ? kBatched : kAlone;
}

void NvJpegDecoder::DecodeBatched(
    size_t state, absl::Span<const absl::Span<const uint8_t>> jpegs,
    absl::Span<const NvJpegOutput> outputs,
    absl::Span<NvJpegSampleResult> results) {
  Handles& h = *handles_;
  Handles::Batched& b = h.states[state];
  b.data.clear();
  b.lengths.clear();
  b.destinations.clear();
  for (size_t i : h.batched) {
    b.data.push_back(jpegs[i].data());
    b.lengths.push_back(jpegs[i].size());
    nvjpegImage_t destination{};
    destination.channel[0] = outputs[i].rgb;
    destination.pitch[0] = outputs[i].pitch;
    b.destinations.push_back(destination);
  }
  absl::Status batch =
      NvJpegStatus(nvjpegDecodeBatchedInitialize(
                       h.handle, b.state, static_cast<int>(h.batched.size()),
                       /*max_cpu_threads=*/1, NVJPEG_OUTPUT_RGBI),
                   "nvjpegDecodeBatchedInitialize");
  if (batch.ok()) {
    batch = NvJpegStatus(
        nvjpegDecodeBatched(h.handle, b.state, b.data.data(), b.lengths.data(),
                            b.destinations.data(), stream_),
        "nvjpegDecodeBatched");
  }
  if (batch.ok()) {
    for (size_t i : h.batched) {
      results[i].hardware = backend_ == NvJpegBackend::kHardware;
    }
  } else if (batch.code() == absl::StatusCode::kResourceExhausted) {
    // Out of budget: every sample of the call failed alike.
    for (size_t i : h.batched) results[i].status = SampleError(i, batch);
  } else {
    // Find the sample(s) at fault, one at a time.
    for (size_t i : h.batched) h.alone.push_back(i);
  }
}

void NvJpegDecoder::DecodeAlone(
    size_t i, absl::Span<const absl::Span<const uint8_t>> jpegs,
    absl::Span<const NvJpegOutput> outputs,
    absl::Span<NvJpegSampleResult> results) {
  Handles& h = *handles_;
  nvjpegImage_t destination{};
  destination.channel[0] = outputs[i].rgb;
  destination.pitch[0] = outputs[i].pitch;
  // The checks parsed the header only; this path needs the whole stream.
  absl::Status status =
      NvJpegStatus(nvjpegJpegStreamParse(
                       h.handle, jpegs[i].data(), jpegs[i].size(),
                       /*save_metadata=*/0, /*save_stream=*/0, h.streams[i]),
                   "nvjpegJpegStreamParse");
  if (status.ok()) {
    status = NvJpegStatus(
        nvjpegDecodeJpegHost(h.handle, h.alone_decoder, h.alone_state,
                             h.alone_params, h.streams[i]),
        "nvjpegDecodeJpegHost");
  }
  if (status.ok()) {
    status = NvJpegStatus(
        nvjpegDecodeJpegTransferToDevice(h.handle, h.alone_decoder,
                                         h.alone_state, h.streams[i], stream_),
        "nvjpegDecodeJpegTransferToDevice");
  }
  if (status.ok()) {
    status = NvJpegStatus(
        nvjpegDecodeJpegDevice(h.handle, h.alone_decoder, h.alone_state,
                               &destination, stream_),
        "nvjpegDecodeJpegDevice");
  }
  results[i].hardware = false;
  if (!status.ok()) results[i].status = SampleError(i, status);
}

}  // namespace pinwheel::internal
