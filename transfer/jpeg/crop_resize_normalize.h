// CropResizeNormalize: the GPU half of RandomResizedCrop + flip + resize +
// normalise, from decoded RGB images in device memory (NvJpegDecoder's
// outputs) into one fixed-shape bf16 batch (N x 3 x H x W, CHW).
//
// The crop rectangles and flips are computed on the host, by the same
// per-sample generator and function the CPU path uses, and handed in here
// as plain rectangles: a sample's crop is then the same whichever path
// decodes it, and resume stays exact.
//
// Example:
//   CropResizeNormalizeOptions options;  // 224 x 224, ImageNet mean/std
//   PINWHEEL_ASSIGN_OR_RETURN(auto crop, CropResizeNormalize::Create(0, stream,
//   options)); PINWHEEL_RETURN_IF_ERROR(crop->Run(images, crops, output_bf16));
//
// Resampling: bilinear with half-pixel centres, edges clamped to the crop
// (torchvision's bilinear without antialias); shrinking by more than 2x
// aliases, unlike an antialiased CPU resize. The descriptors of a batch go
// through one pinned and one device buffer, allocated once at Create().
//
// Thread-compatible: one thread at a time.
#ifndef PINWHEEL_TRANSFER_JPEG_CROP_RESIZE_NORMALIZE_H_
#define PINWHEEL_TRANSFER_JPEG_CROP_RESIZE_NORMALIZE_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <cuda_runtime_api.h>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace pinwheel::internal {

struct CropResizeSampleDesc;

// One decoded image in device memory: interleaved RGB.
struct DeviceRgbImage {
  const uint8_t* rgb = nullptr;  // null: the sample failed; output zeros
  size_t pitch = 0;              // bytes per row, >= 3 * width
  int width = 0;
  int height = 0;
};

// A crop of a source image, in its pixels, and whether to mirror it.
struct ImageCrop {
  int x = 0;
  int y = 0;
  int width = 0;
  int height = 0;
  bool flip = false;
};

struct CropResizeNormalizeOptions {
  int max_batch_size = 256;  // samples per Run(); 1 to 65535
  int out_height = 224;      // output pixels per side; 1 or more
  int out_width = 224;
  // Per-channel mean and standard deviation of pixel / 255 (ImageNet's by
  // default): out = (pixel / 255 - mean) / std. std > 0.
  std::array<float, 3> mean = {0.485f, 0.456f, 0.406f};
  std::array<float, 3> std = {0.229f, 0.224f, 0.225f};
};

class CropResizeNormalize {
 public:
  // Returns the transform for CUDA device `device`, queueing on `stream`
  // (borrowed; it must outlive the transform). InvalidArgument for bad
  // options, the CUDA error when the buffers cannot be had.
  static absl::StatusOr<std::unique_ptr<CropResizeNormalize>> Create(
      int device, cudaStream_t stream,
      const CropResizeNormalizeOptions& options);

  // Waits for the stream to pass the last Run(), then frees the buffers.
  ~CropResizeNormalize();
  CropResizeNormalize(const CropResizeNormalize&) = delete;
  CropResizeNormalize& operator=(const CropResizeNormalize&) = delete;

  // Queues, on the stream, the crop/resize/normalise of images[i] by
  // crops[i] into sample i of `out` (device memory, bf16, at least
  // images.size() * 3 * out_height * out_width elements). Waits first for
  // the stream to pass the previous Run() (its descriptors' pinned buffer).
  // InvalidArgument, naming the sample, for a crop outside its image or an
  // image whose pitch is short; more images than max_batch_size or
  // mismatched spans too. A sample with a null image is written as zeros.
  // REQUIRES: images stay allocated and unchanged until the stream passes.
  absl::Status Run(absl::Span<const DeviceRgbImage> images,
                   absl::Span<const ImageCrop> crops, void* out);

  // Returns the bytes allocated at Create() (pinned + device).
  size_t allocated_bytes() const;

 private:
  CropResizeNormalize(int device, cudaStream_t stream,
                      const CropResizeNormalizeOptions& options);

  const int device_;
  cudaStream_t const stream_;
  const CropResizeNormalizeOptions options_;
  CropResizeSampleDesc* pinned_ = nullptr;  // max_batch_size descriptors, host
  CropResizeSampleDesc* descriptors_ = nullptr;  // on the device
  cudaEvent_t done_ = nullptr;
  bool issued_ = false;
};

}  // namespace pinwheel::internal

#endif  // PINWHEEL_TRANSFER_JPEG_CROP_RESIZE_NORMALIZE_H_
