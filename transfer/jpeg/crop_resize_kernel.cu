#include <cuda_bf16.h>

#include "transfer/jpeg/crop_resize_kernel.h"

namespace pinwheel::internal {
namespace {

__global__ void CropResizeNormalizeKernel(const CropResizeSampleDesc* samples,
                                          int out_height, int out_width,
                                          NormalizeDesc normalize,
                                          __nv_bfloat16* out) {
  const int ox = blockIdx.x * blockDim.x + threadIdx.x;
  const int oy = blockIdx.y * blockDim.y + threadIdx.y;
  const int n = blockIdx.z;
  if (ox >= out_width || oy >= out_height) return;
  const CropResizeSampleDesc s = samples[n];
  const size_t plane = static_cast<size_t>(out_height) * out_width;
  __nv_bfloat16* dst = out + static_cast<size_t>(n) * 3 * plane +
                       static_cast<size_t>(oy) * out_width + ox;
  if (s.rgb == nullptr) {
    for (int c = 0; c < 3; ++c) dst[c * plane] = __float2bfloat16_rn(0.f);
    return;
  }
  // Output column in the (unflipped) crop.
  const int cx = s.flip ? out_width - 1 - ox : ox;
  const float fx =
      (cx + 0.5f) * (static_cast<float>(s.crop_width) / out_width) - 0.5f;
  const float fy =
      (oy + 0.5f) * (static_cast<float>(s.crop_height) / out_height) - 0.5f;
  const float x = fminf(fmaxf(fx, 0.f), static_cast<float>(s.crop_width - 1));
  const float y = fminf(fmaxf(fy, 0.f), static_cast<float>(s.crop_height - 1));
  const int x0 = static_cast<int>(x);
  const int y0 = static_cast<int>(y);
  const int x1 = min(x0 + 1, s.crop_width - 1);
  const int y1 = min(y0 + 1, s.crop_height - 1);
  const float wx = x - x0;
  const float wy = y - y0;
  const uint8_t* row0 = s.rgb + static_cast<size_t>(s.crop_y + y0) * s.pitch;
  const uint8_t* row1 = s.rgb + static_cast<size_t>(s.crop_y + y1) * s.pitch;
  const int px0 = (s.crop_x + x0) * 3;
  const int px1 = (s.crop_x + x1) * 3;
  for (int c = 0; c < 3; ++c) {
    const float top = row0[px0 + c] + (row0[px1 + c] - row0[px0 + c]) * wx;
    const float bottom = row1[px0 + c] + (row1[px1 + c] - row1[px0 + c]) * wx;
    const float v = top + (bottom - top) * wy;
    dst[c * plane] =
        __float2bfloat16_rn(v * normalize.scale[c] + normalize.bias[c]);
  }
}

}  // namespace

cudaError_t LaunchCropResizeNormalize(const CropResizeSampleDesc* samples,
                                      int count, int out_height, int out_width,
                                      const NormalizeDesc& normalize, void* out,
                                      cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  const dim3 block(32, 8);
  const dim3 grid((out_width + block.x - 1) / block.x,
                  (out_height + block.y - 1) / block.y, count);
  CropResizeNormalizeKernel<<<grid, block, 0, stream>>>(
      samples, out_height, out_width, normalize,
      static_cast<__nv_bfloat16*>(out));
  return cudaGetLastError();
}

}  // namespace pinwheel::internal
