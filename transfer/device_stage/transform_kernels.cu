// The device transforms' kernels (see transform_kernels.h). The widening
// kernel came from samples/bench/widen_tokens.cu.
#include <cstdint>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include "transfer/device_stage/transform_kernels.h"

namespace pinwheel::internal {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxGridY = 65535;
constexpr int64_t kMaxBlocks = 65535 * 8;

template <typename Out>
__device__ Out Convert(float v);
template <>
__device__ float Convert<float>(float v) {
  return v;
}
template <>
__device__ __half Convert<__half>(float v) {
  return __float2half_rn(v);
}
template <>
__device__ __nv_bfloat16 Convert<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}

// One thread per output element (grid-stride), in output (CHW) order so the
// stores coalesce.
template <typename Out, bool kHwc>
__global__ void NormalizeKernel(const uint8_t* __restrict__ input,
                                int64_t total, int channels, int64_t plane,
                                NormalizeConstants k,
                                Out* __restrict__ output) {
  const int64_t image = channels * plane;
  for (int64_t i = blockIdx.x * int64_t{kThreads} + threadIdx.x; i < total;
       i += int64_t{gridDim.x} * kThreads) {
    const int64_t s = i / image;
    const int64_t within = i - s * image;
    const int c = static_cast<int>(within / plane);
    const int64_t p = within - int64_t{c} * plane;
    const uint8_t x = kHwc ? input[s * image + p * channels + c] : input[i];
    const float v =
        __fmul_rn(__fsub_rn(static_cast<float>(x), k.mean[c]), k.scale[c]);
    output[i] = Convert<Out>(v);
  }
}

template <typename Out>
int LaunchNormalize(const uint8_t* input, bool hwc, int64_t total, int channels,
                    int64_t plane, const NormalizeConstants& k, void* output,
                    cudaStream_t stream) {
  int64_t blocks = (total + kThreads - 1) / kThreads;
  if (blocks > kMaxBlocks) blocks = kMaxBlocks;
  const dim3 grid(static_cast<unsigned>(blocks));
  if (hwc) {
    NormalizeKernel<Out, true><<<grid, kThreads, 0, stream>>>(
        input, total, channels, plane, k, static_cast<Out*>(output));
  } else {
    NormalizeKernel<Out, false><<<grid, kThreads, 0, stream>>>(
        input, total, channels, plane, k, static_cast<Out*>(output));
  }
  return static_cast<int>(cudaGetLastError());
}

// Block (x, y) widens columns [x * kThreads, ...) of rows y, y + gridDim.y,
// ...; each thread one column k of a row: input[k] = w[k], target[k] =
// w[k + 1] (the second load hits the line the neighbour thread loaded).
template <typename T>
__global__ void WidenKernel(const T* __restrict__ windows, int64_t batch,
                            int64_t seq_len, int64_t* __restrict__ input,
                            int64_t* __restrict__ target) {
  const int64_t k = blockIdx.x * int64_t{kThreads} + threadIdx.x;
  if (k >= seq_len) return;
  for (int64_t b = blockIdx.y; b < batch; b += gridDim.y) {
    const T* row = windows + b * (seq_len + 1);
    const int64_t out = b * seq_len + k;
    input[out] = static_cast<int64_t>(row[k]);
    target[out] = static_cast<int64_t>(row[k + 1]);
  }
}

template <typename T>
int LaunchWiden(const void* windows, int64_t batch, int64_t seq_len,
                int64_t* input, int64_t* target, cudaStream_t stream) {
  const int64_t columns = (seq_len + kThreads - 1) / kThreads;
  if (columns > 0x7fffffff) return kBadKernelArguments;
  const dim3 grid(static_cast<unsigned>(columns),
                  static_cast<unsigned>(batch < kMaxGridY ? batch : kMaxGridY));
  WidenKernel<T><<<grid, kThreads, 0, stream>>>(static_cast<const T*>(windows),
                                                batch, seq_len, input, target);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace

int LaunchNormalizeImage(const uint8_t* input, bool input_hwc, int64_t samples,
                         int channels, int64_t height, int64_t width,
                         const NormalizeConstants& constants,
                         NormalizeOutput kind, void* output, void* stream) {
  if (samples < 0 || channels < 1 || channels > kMaxNormalizeChannels ||
      height < 1 || width < 1) {
    return kBadKernelArguments;
  }
  if (samples == 0) return 0;
  if (input == nullptr || output == nullptr) return kBadKernelArguments;
  const int64_t plane = height * width;
  const int64_t total = samples * channels * plane;
  const auto s = static_cast<cudaStream_t>(stream);
  switch (kind) {
    case NormalizeOutput::kFloat32:
      return LaunchNormalize<float>(input, input_hwc, total, channels, plane,
                                    constants, output, s);
    case NormalizeOutput::kFloat16:
      return LaunchNormalize<__half>(input, input_hwc, total, channels, plane,
                                     constants, output, s);
    case NormalizeOutput::kBFloat16:
      return LaunchNormalize<__nv_bfloat16>(input, input_hwc, total, channels,
                                            plane, constants, output, s);
  }
  return kBadKernelArguments;
}

int LaunchWidenTokenWindows(const void* windows, int token_bytes,
                            bool signed_tokens, int64_t batch, int64_t seq_len,
                            int64_t* input, int64_t* target, void* stream) {
  if (batch < 0 || seq_len < 1) return kBadKernelArguments;
  if (batch == 0) return 0;
  if (windows == nullptr || input == nullptr || target == nullptr) {
    return kBadKernelArguments;
  }
  const auto s = static_cast<cudaStream_t>(stream);
  switch (token_bytes) {
    case 1:
      return signed_tokens ? LaunchWiden<int8_t>(windows, batch, seq_len, input,
                                                 target, s)
                           : LaunchWiden<uint8_t>(windows, batch, seq_len,
                                                  input, target, s);
    case 2:
      return signed_tokens ? LaunchWiden<int16_t>(windows, batch, seq_len,
                                                  input, target, s)
                           : LaunchWiden<uint16_t>(windows, batch, seq_len,
                                                   input, target, s);
    case 4:
      return signed_tokens ? LaunchWiden<int32_t>(windows, batch, seq_len,
                                                  input, target, s)
                           : LaunchWiden<uint32_t>(windows, batch, seq_len,
                                                   input, target, s);
    case 8:
      return LaunchWiden<int64_t>(windows, batch, seq_len, input, target, s);
    default:
      return kBadKernelArguments;
  }
}

}  // namespace pinwheel::internal
