#include "loader/image/image_pipeline.h"

#include <algorithm>
#include <cstdint>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

#include "loader/cpu_budget.h"
#include "loader/image/image_transforms.h"
#include "loader/image/jpeg.h"
#include "loader/sample_random.h"
#include "pinning/base/status_macros.h"
#include "transfer/normalize_image.h"
#if defined(PINWHEEL_HAVE_NVJPEG)
#include "transfer/jpeg/jpeg_decode_transform.h"
#endif

namespace pinwheel {
namespace {

// The decision before anything is opened: gpu or not, and why.
struct Decision {
  bool gpu = false;
  std::string why;
};

absl::StatusOr<Decision> Decide(const ImagePipelineOptions& pipeline) {
  if (pipeline.cpu_workers < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ImagePipelineOptions::cpu_workers = ", pipeline.cpu_workers,
        ": must be >= 0"));
  }
  std::string unavailable;
#if !defined(PINWHEEL_HAVE_NVJPEG)
  unavailable = "this build has no nvJPEG (PINWHEEL_HAVE_NVJPEG off)";
#endif
  if (unavailable.empty() && !pipeline.device.is_cuda()) {
    unavailable =
        absl::StrCat("the device is ", pipeline.device.ToString(), ", no GPU");
  }
  switch (pipeline.decode) {
    case ImageDecode::kCpu:
      return Decision{false, "cpu (decode = cpu)"};
    case ImageDecode::kGpu:
      if (!unavailable.empty()) {
        return absl::FailedPreconditionError(
            absl::StrCat("decode = gpu: ", unavailable));
      }
      return Decision{true, "decode = gpu"};
    case ImageDecode::kAuto:
      if (!unavailable.empty()) {
        return Decision{false,
                        absl::StrCat("cpu (decode = auto: ", unavailable, ")")};
      }
      return Decision{true, "decode = auto"};
  }
  return absl::InvalidArgumentError("unknown ImageDecode");
}

absl::StatusOr<std::shared_ptr<const DeviceTransform>> CpuTransform(
    const ImagePipelineOptions& pipeline) {
  NormalizeImageOptions options;
  options.field = "image";
  options.input_layout = ImageLayout::kHWC;
  options.output_dtype = DType::kBFloat16;
  for (int c = 0; c < 3; ++c) {
    options.mean.push_back(255.0f * pipeline.mean[c]);
    options.std.push_back(255.0f * pipeline.std[c]);
  }
  PINWHEEL_ASSIGN_OR_RETURN(std::shared_ptr<NormalizeImage> normalize,
                            NormalizeImage::Create(std::move(options)));
  return std::shared_ptr<const DeviceTransform>(std::move(normalize));
}

// Note [decode = auto by measurement]
// Which path is faster depends on the machine: on one H200 with its JPEG
// engines the GPU path decodes W4 at 15,000-22,000 img/s on 4-5 cores
// while 14 workers reach 7,500-8,400 on the CPU (2026-11-27), but a GPU
// without engines decodes with its SMs (nvJPEG's GPU hybrid backend: 4,700
// img/s there) and a host with many fast cores can pass that. So where both
// paths can run, an image folder weighs them on its first file: the GPU
// transform's warm-up batch, timed (JpegDecodeTransform::
// warmup_images_per_second: nvJPEG's decode alone, the crop left out), and
// the CPU path's decode, crop and resize of the same file timed on this
// thread (16 training crops after 4 untimed), times the workers
// (cpu_workers, else the kNumWorkersFromCpus count). The faster wins; a
// tie goes to the GPU, which leaves the CPUs to the training loop. Both
// rates are in decode_report. The cost: one more batch on the GPU and
// about 20 decodes on the CPU, once, at open.

#if defined(PINWHEEL_HAVE_NVJPEG)
// One worker's CPU-path images a second on `jpeg`: the time of
// DecodeResizedCrop with training crops, on this thread; 0 when it fails.
double CpuImagesPerSecond(const std::vector<uint8_t>& jpeg, int size) {
  const absl::Span<const std::byte> bytes(
      reinterpret_cast<const std::byte*>(jpeg.data()), jpeg.size());
  absl::StatusOr<JpegInfo> info = ReadJpegInfo(bytes, "the first file");
  if (!info.ok()) return 0;
  std::vector<uint8_t> out(static_cast<size_t>(size) * size * 3);
  constexpr int kUntimed = 4;
  constexpr int kTimed = 16;
  absl::Time start;
  for (int k = 0; k < kUntimed + kTimed; ++k) {
    if (k == kUntimed) start = absl::Now();
    SampleRandom random(/*seed=*/0, /*epoch=*/0, /*key=*/k);
    const CropRegion crop =
        RandomResizedCropRegion(info->width, info->height, random);
    if (!DecodeResizedCrop(bytes, "the first file", crop, size, size,
                           /*flip=*/false, absl::MakeSpan(out))
             .ok()) {
      return 0;
    }
  }
  return kTimed / std::max(1e-9, absl::ToDoubleSeconds(absl::Now() - start));
}
#endif  // PINWHEEL_HAVE_NVJPEG

// The GPU transform, or its error.
absl::StatusOr<std::pair<std::shared_ptr<const DeviceTransform>, std::string>>
GpuTransform(const ImagePipelineOptions& pipeline, int size,
             std::vector<uint8_t> warmup) {
#if defined(PINWHEEL_HAVE_NVJPEG)
  JpegDecodeTransformOptions options;
  options.device = pipeline.device.ordinal();
  options.max_batch_size = pipeline.batch_size;
  options.size = size;
  options.mean = pipeline.mean;
  options.std = pipeline.std;
  options.warmup_jpeg = std::move(warmup);
  options.device_bytes_limit = pipeline.gpu_device_bytes_limit;
  options.backend = pipeline.gpu_backend;
  options.priority = pipeline.gpu_priority;
  options.check_threads = pipeline.gpu_check_threads;
  options.measure_warmup_rate = pipeline.decode == ImageDecode::kAuto;
  PINWHEEL_ASSIGN_OR_RETURN(std::shared_ptr<JpegDecodeTransform> decode,
                            JpegDecodeTransform::Create(options));
  std::string report = decode->report();
  if (pipeline.decode == ImageDecode::kAuto) {
    // Note [decode = auto by measurement].
    const double gpu = decode->warmup_images_per_second();
    const std::vector<uint8_t>& first = options.warmup_jpeg;
    const double one_worker =
        first.empty() ? 0 : CpuImagesPerSecond(first, size);
    if (gpu <= 0 || one_worker <= 0) {
      absl::StrAppend(
          &report, "; not weighed against the CPU path (",
          first.empty() ? "no file to measure on" : "a measurement failed",
          ")");
    } else {
      const int workers = pipeline.cpu_workers > 0
                              ? pipeline.cpu_workers
                              : WorkersFromCpus(ReadCpuBudget());
      const double cpu = one_worker * workers;
      const std::string weighed = absl::StrFormat(
          "measured on the first file: GPU %.0f img/s, CPU %d workers x %.0f "
          "= %.0f img/s",
          gpu, workers, one_worker, cpu);
      if (cpu > gpu) {
        return absl::UnavailableError(
            absl::StrCat("the CPU path measured faster: ", weighed));
      }
      report = absl::StrCat(weighed, "; ", report);
    }
  }
  return std::make_pair(std::shared_ptr<const DeviceTransform>(decode),
                        std::move(report));
#else
  (void)pipeline;
  (void)size;
  (void)warmup;
  return absl::FailedPreconditionError("this build has no nvJPEG");
#endif
}

// Opens the dataset with `open(delivery)` and builds its transform.
template <typename Pipeline, typename Open, typename Warmup>
absl::StatusOr<Pipeline> Build(const ImagePipelineOptions& pipeline, int size,
                               Open open, Warmup warmup) {
  PINWHEEL_ASSIGN_OR_RETURN(Decision decision, Decide(pipeline));
  Pipeline out;
  if (decision.gpu) {
    PINWHEEL_ASSIGN_OR_RETURN(out.dataset, open(ImageDelivery::kJpeg));
    absl::StatusOr<
        std::pair<std::shared_ptr<const DeviceTransform>, std::string>>
        gpu = GpuTransform(pipeline, size, warmup(*out.dataset));
    if (gpu.ok()) {
      out.transform = std::move(gpu->first);
      out.gpu_decode = true;
      out.decode_report =
          absl::StrCat("gpu (", decision.why, "): ", gpu->second);
      return out;
    }
    if (pipeline.decode == ImageDecode::kGpu) return gpu.status();
    decision.why =
        gpu.status().code() == absl::StatusCode::kUnavailable
            ? absl::StrCat("cpu (decode = auto: ", gpu.status().message(), ")")
            : absl::StrCat(
                  "cpu (decode = auto: the GPU decoder did not "
                  "start: ",
                  gpu.status().message(), ")");
  }
  PINWHEEL_ASSIGN_OR_RETURN(out.dataset, open(ImageDelivery::kPixels));
  PINWHEEL_ASSIGN_OR_RETURN(out.transform, CpuTransform(pipeline));
  out.decode_report = decision.why;
  return out;
}

}  // namespace

absl::StatusOr<ImageDecode> ParseImageDecode(absl::string_view name) {
  if (name == "cpu") return ImageDecode::kCpu;
  if (name == "gpu") return ImageDecode::kGpu;
  if (name == "auto") return ImageDecode::kAuto;
  return absl::InvalidArgumentError(absl::StrCat(
      "decode = \"", name, "\": must be \"cpu\", \"gpu\" or \"auto\""));
}

absl::StatusOr<ImageFolderPipeline> OpenImageFolderPipeline(
    const std::string& root, const ImageFolderOptions& options,
    const ImagePipelineOptions& pipeline) {
  return Build<ImageFolderPipeline>(
      pipeline, options.size,
      [&](ImageDelivery delivery) {
        ImageFolderOptions with = options;
        with.delivery = delivery;
        return ImageFolderDataset::Open(root, with);
      },
      [&](const ImageFolderDataset& dataset) {
        std::vector<std::byte> bytes;
        if (dataset.size() == 0 ||
            !ReadWholeFile(dataset.path(0), options.max_jpeg_bytes, bytes)
                 .ok()) {
          return std::vector<uint8_t>();
        }
        const auto* data = reinterpret_cast<const uint8_t*>(bytes.data());
        return std::vector<uint8_t>(data, data + bytes.size());
      });
}

absl::StatusOr<TarShardPipeline> OpenTarShardPipeline(
    std::vector<std::string> shards, const TarShardOptions& options,
    const ImagePipelineOptions& pipeline) {
  return Build<TarShardPipeline>(
      pipeline, options.transform.size,
      [&](ImageDelivery delivery) {
        TarShardOptions with = options;
        with.transform.delivery = delivery;
        return TarShardDataset::Open(shards, with);
      },
      [](const TarShardDataset&) { return std::vector<uint8_t>(); });
}

}  // namespace pinwheel
