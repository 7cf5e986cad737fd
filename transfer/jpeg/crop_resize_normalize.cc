#include "transfer/jpeg/crop_resize_normalize.h"

#include "absl/strings/str_cat.h"

#include "pinning/base/cuda_device_guard.h"
#include "pinning/base/cuda_status.h"
#include "pinning/base/status_macros.h"
#include "transfer/jpeg/crop_resize_kernel.h"

namespace pinwheel::internal {

CropResizeNormalize::CropResizeNormalize(
    int device, cudaStream_t stream, const CropResizeNormalizeOptions& options)
    : device_(device), stream_(stream), options_(options) {}

absl::StatusOr<std::unique_ptr<CropResizeNormalize>>
CropResizeNormalize::Create(int device, cudaStream_t stream,
                            const CropResizeNormalizeOptions& options) {
  if (options.max_batch_size < 1 || options.max_batch_size > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("CropResizeNormalizeOptions.max_batch_size is ",
                     options.max_batch_size, "; it must be 1 to 65535"));
  }
  if (options.out_height < 1 || options.out_width < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("CropResizeNormalizeOptions.out_height x out_width is ",
                     options.out_height, " x ", options.out_width,
                     "; both must be 1 or more"));
  }
  for (int c = 0; c < 3; ++c) {
    if (!(options.std[c] > 0)) {
      return absl::InvalidArgumentError(
          absl::StrCat("CropResizeNormalizeOptions.std[", c, "] is ",
                       options.std[c], "; it must be > 0"));
    }
  }
  std::unique_ptr<CropResizeNormalize> transform(
      new CropResizeNormalize(device, stream, options));
  ScopedCudaDevice on_device(device);
  PINWHEEL_RETURN_IF_ERROR(on_device.status());
  const size_t bytes = options.max_batch_size * sizeof(CropResizeSampleDesc);
  PINWHEEL_CUDA_RETURN_IF_ERROR(
      cudaHostAlloc(reinterpret_cast<void**>(&transform->pinned_), bytes,
                    cudaHostAllocDefault));
  PINWHEEL_CUDA_RETURN_IF_ERROR(
      cudaMalloc(reinterpret_cast<void**>(&transform->descriptors_), bytes));
  PINWHEEL_CUDA_RETURN_IF_ERROR(
      cudaEventCreateWithFlags(&transform->done_, cudaEventDisableTiming));
  return transform;
}

CropResizeNormalize::~CropResizeNormalize() {
  ScopedCudaDevice on_device(device_);
  if (done_ != nullptr) {
    if (issued_) cudaEventSynchronize(done_);
    cudaEventDestroy(done_);
  }
  if (descriptors_ != nullptr) cudaFree(descriptors_);
  if (pinned_ != nullptr) cudaFreeHost(pinned_);
}

size_t CropResizeNormalize::allocated_bytes() const {
  return 2 * options_.max_batch_size * sizeof(CropResizeSampleDesc);
}

absl::Status CropResizeNormalize::Run(absl::Span<const DeviceRgbImage> images,
                                      absl::Span<const ImageCrop> crops,
                                      void* out) {
  if (crops.size() != images.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "CropResizeNormalize::Run: ", images.size(), " images and ",
        crops.size(), " crops; they must be equal"));
  }
  if (images.size() > static_cast<size_t>(options_.max_batch_size)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "CropResizeNormalize::Run: ", images.size(),
        " images, more than max_batch_size ", options_.max_batch_size));
  }
  if (out == nullptr && !images.empty()) {
    return absl::InvalidArgumentError("CropResizeNormalize::Run: out is null");
  }
  for (size_t i = 0; i < images.size(); ++i) {
    const DeviceRgbImage& image = images[i];
    if (image.rgb == nullptr) continue;
    const ImageCrop& crop = crops[i];
    if (image.width < 1 || image.height < 1 ||
        image.pitch < 3 * static_cast<size_t>(image.width)) {
      return absl::InvalidArgumentError(
          absl::StrCat("sample ", i, ": image of ", image.width, " x ",
                       image.height, " pixels with pitch ", image.pitch,
                       " (needs 1 x 1 or more and pitch >= 3 * width)"));
    }
    if (crop.width < 1 || crop.height < 1 || crop.x < 0 || crop.y < 0 ||
        crop.x > image.width - crop.width ||
        crop.y > image.height - crop.height) {
      return absl::InvalidArgumentError(absl::StrCat(
          "sample ", i, ": crop of ", crop.width, " x ", crop.height, " at (",
          crop.x, ", ", crop.y, ") is not inside its ", image.width, " x ",
          image.height, " image"));
    }
  }
  ScopedCudaDevice on_device(device_);
  PINWHEEL_RETURN_IF_ERROR(on_device.status());
  if (issued_) PINWHEEL_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(done_));
  for (size_t i = 0; i < images.size(); ++i) {
    const ImageCrop& crop = crops[i];
    pinned_[i] = CropResizeSampleDesc{
        images[i].rgb, images[i].pitch, crop.x,           crop.y,
        crop.width,    crop.height,     crop.flip ? 1 : 0};
  }
  NormalizeDesc normalize;
  for (int c = 0; c < 3; ++c) {
    normalize.scale[c] = 1.0f / (255.0f * options_.std[c]);
    normalize.bias[c] = -options_.mean[c] / options_.std[c];
  }
  const size_t bytes = images.size() * sizeof(CropResizeSampleDesc);
  PINWHEEL_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(
      descriptors_, pinned_, bytes, cudaMemcpyHostToDevice, stream_));
  PINWHEEL_RETURN_IF_ERROR(LaunchStatus(
      LaunchCropResizeNormalize(descriptors_, static_cast<int>(images.size()),
                                options_.out_height, options_.out_width,
                                normalize, out, stream_),
      "crop-resize-normalize"));
  PINWHEEL_CUDA_RETURN_IF_ERROR(cudaEventRecord(done_, stream_));
  issued_ = true;
  return absl::OkStatus();
}

}  // namespace pinwheel::internal
