// The decode option of the image datasets: decode = "cpu" | "gpu" | "auto".
// Open{ImageFolder,TarShard}Pipeline() open the dataset and build the
// device transform that goes with it, so that one loop serves both paths:
// either way the batches hold "image", bf16 [3, size, size] (CHW,
// normalised by mean and std), and "label", i64.
//   cpu: the workers decode and crop with libjpeg-turbo into u8 HWC pixels
//        (ImageDelivery::kPixels); NormalizeImage turns them into bf16 on
//        the device stage.
//   gpu: the workers read the JPEG bytes and draw the crop
//        (ImageDelivery::kJpeg); JpegDecodeTransform decodes, crops and
//        normalises on the GPU (nvJPEG).
//   auto: cpu where the GPU path cannot run (no CUDA GPU, no nvJPEG in
//        this build, the decoder does not start). Where both can, an image
//        folder measures both on its first file and takes the faster
//        (Note [decode = auto by measurement]); tar shards (no file to
//        measure before the first batch) take gpu. decode_report says
//        which and why, with the rates.
// A sample's crop and flip are the same on both paths (the same
// SampleRandom draws them); the pixels differ by the resampling (the CPU
// resize antialiases when it shrinks, the GPU one does not) and by the
// JPEG decoders' IDCTs.
//
// Example:
//   PINWHEEL_ASSIGN_OR_RETURN(ParsedImageDecode decode,
//                             ParseImageDecode(flag));  // "auto"
//   PINWHEEL_ASSIGN_OR_RETURN(ImageFolderPipeline train,
//       OpenImageFolderPipeline("/data/train", {.size = 224},
//                               {.decode = decode, .device = gpu,
//                                .batch_size = 256}));
//   std::cout << train.decode_report << "\n";  // "gpu: nvJPEG hardware ..."
//   PINWHEEL_ASSIGN_OR_RETURN(Loader loader,
//       LoaderBuilder(train.dataset).batch_size(256).device(gpu)
//           .device_transform(train.transform).Build());
//
// Thread-safe: functions without shared state.
#ifndef PINWHEEL_LOADER_IMAGE_IMAGE_PIPELINE_H_
#define PINWHEEL_LOADER_IMAGE_IMAGE_PIPELINE_H_

#include <array>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

#include "loader/image/image_folder_dataset.h"
#include "loader/image/tar_shards.h"
#include "transfer/device.h"
#include "transfer/device_transform.h"
#include "transfer/jpeg/jpeg_decode_choice.h"

namespace pinwheel {

enum class ImageDecode { kCpu, kGpu, kAuto };

// Returns the decode named "cpu", "gpu" or "auto", or InvalidArgument
// naming the value.
[[nodiscard]] absl::StatusOr<ImageDecode> ParseImageDecode(
    absl::string_view name);

struct ImagePipelineOptions {
  ImageDecode decode = ImageDecode::kAuto;
  // The loader's device (what LoaderBuilder::device gets).
  Device device = Device::Host();
  // The loader's batch_size (the GPU decoder's batch), 1 to 65535.
  int batch_size = 256;
  // Per channel, of pixel / 255: out = (pixel / 255 - mean) / std.
  std::array<float, 3> mean = {0.485f, 0.456f, 0.406f};
  std::array<float, 3> std = {0.229f, 0.224f, 0.225f};
  // gpu: the most device bytes the decoder may hold (measured at open; see
  // transfer/jpeg/jpeg_decode_transform.h); 0 means no limit.
  size_t gpu_device_bytes_limit = 0;
  // gpu: the decoder and its stream's priority (JpegDecodeTransformOptions'
  // backend and priority).
  JpegDecodeBackend gpu_backend = JpegDecodeBackend::kAuto;
  JpegDecodePriority gpu_priority = JpegDecodePriority::kHigh;
  // gpu: threads a batch's host checks run on
  // (JpegDecodeTransformOptions::check_threads), 1 to 64.
  int gpu_check_threads = 8;
  // auto: the loader's workers, for the CPU path's rate (Note [decode =
  // auto by measurement]); 0: the count kNumWorkersFromCpus gives (the
  // CPUs this process may use, less one). 0 or more.
  int cpu_workers = 0;
};

struct ImageFolderPipeline {
  std::shared_ptr<ImageFolderDataset> dataset;
  std::shared_ptr<const DeviceTransform> transform;  // never null
  bool gpu_decode = false;
  std::string decode_report;  // "gpu: nvJPEG ..." or "cpu: ..."
};

struct TarShardPipeline {
  std::shared_ptr<TarShardDataset> dataset;
  std::shared_ptr<const DeviceTransform> transform;  // never null
  bool gpu_decode = false;
  std::string decode_report;
};

// Opens the folder (ImageFolderDataset::Open, `options.delivery` set by the
// decode) and builds its transform. FailedPrecondition for decode = gpu
// where it cannot run (saying why); the dataset's and transforms' errors.
// gpu warms the decoder up with the folder's first file.
[[nodiscard]] absl::StatusOr<ImageFolderPipeline> OpenImageFolderPipeline(
    const std::string& root, const ImageFolderOptions& options,
    const ImagePipelineOptions& pipeline);

// The same for tar shards (no warm-up: the first batches may grow nvJPEG's
// buffers).
[[nodiscard]] absl::StatusOr<TarShardPipeline> OpenTarShardPipeline(
    std::vector<std::string> shards, const TarShardOptions& options,
    const ImagePipelineOptions& pipeline);

}  // namespace pinwheel

#endif  // PINWHEEL_LOADER_IMAGE_IMAGE_PIPELINE_H_
