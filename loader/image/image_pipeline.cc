#include "loader/image/image_pipeline.h"

#include <cstdint>
#include <utility>

#include "absl/strings/str_cat.h"

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
  PINWHEEL_ASSIGN_OR_RETURN(std::shared_ptr<JpegDecodeTransform> decode,
                            JpegDecodeTransform::Create(options));
  std::string report = decode->report();
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
    decision.why = absl::StrCat(
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
