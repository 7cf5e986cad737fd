// The CUDA kernel behind CropResizeNormalize (crop_resize_normalize.h): one
// plain launcher, no Abseil, so that nvcc compiles its .cu alone.
#ifndef PINWHEEL_TRANSFER_JPEG_CROP_RESIZE_KERNEL_H_
#define PINWHEEL_TRANSFER_JPEG_CROP_RESIZE_KERNEL_H_

#include <cstddef>
#include <cstdint>
#include <cuda_runtime_api.h>

namespace pinwheel::internal {

// One sample's source and crop, as the kernel reads it from device memory.
struct CropResizeSampleDesc {
  const uint8_t* rgb;  // interleaved RGB, device; null: write zeros
  uint64_t pitch;      // bytes per source row
  int32_t crop_x;      // the crop, in source pixels, inside the image
  int32_t crop_y;
  int32_t crop_width;
  int32_t crop_height;
  int32_t flip;  // 1: mirror horizontally
};

// Per-channel normalisation: out = (pixel * scale[c]) + bias[c], with
// scale = 1 / (255 * std) and bias = -mean / std.
struct NormalizeDesc {
  float scale[3];
  float bias[3];
};

// Writes `count` samples of 3 x out_height x out_width bf16 (CHW, sample
// after sample) at `out`, each the bilinear resize (half-pixel centres,
// edges clamped to the crop) of its crop, mirrored when asked, normalised.
// Queued on `stream`; returns the launch error.
cudaError_t LaunchCropResizeNormalize(const CropResizeSampleDesc* samples,
                                      int count, int out_height, int out_width,
                                      const NormalizeDesc& normalize, void* out,
                                      cudaStream_t stream);

}  // namespace pinwheel::internal

#endif  // PINWHEEL_TRANSFER_JPEG_CROP_RESIZE_KERNEL_H_
