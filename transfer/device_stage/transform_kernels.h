// The CUDA kernels of the shipped device transforms (NormalizeImage,
// WidenTokens), behind plain C++ launchers (no CUDA or Abseil types) so any
// translation unit can call them; compiled from transform_kernels.cu by nvcc
// only in a CUDA build. Each returns at once: 0 (cudaSuccess) when the
// kernel was queued, else the launch's cudaError_t or kBadKernelArguments
// (LaunchStatus() in pinning/base/cuda_status.h makes either a Status).
// Thread-safe (no state).
#ifndef PINWHEEL_TRANSFER_DEVICE_STAGE_TRANSFORM_KERNELS_H_
#define PINWHEEL_TRANSFER_DEVICE_STAGE_TRANSFORM_KERNELS_H_

#include <cstdint>

namespace pinwheel::internal {

// Returned when the arguments cannot describe a batch (a null pointer with
// work to do, a count out of range, an unknown width).
inline constexpr int kBadKernelArguments = -1;

inline constexpr int kMaxNormalizeChannels = 16;

// What NormalizeImage writes: f32, f16 (binary16) or bf16.
enum class NormalizeOutput : int { kFloat32 = 0, kFloat16 = 1, kBFloat16 = 2 };

// Per-channel constants, passed by value to the kernel.
struct NormalizeConstants {
  float mean[kMaxNormalizeChannels];
  float scale[kMaxNormalizeChannels];  // 1 / std
};

// Queues on `stream` (a cudaStream_t) the normalisation of `samples` u8
// images of `channels` x `height` x `width` (HWC when `input_hwc`, else
// CHW) into CHW `output`: out = (x - mean[c]) * scale[c], rounded once per
// operation (no fused multiply-add), converted to `kind` rounding to
// nearest even. samples == 0 queues nothing.
int LaunchNormalizeImage(const uint8_t* input, bool input_hwc, int64_t samples,
                         int channels, int64_t height, int64_t width,
                         const NormalizeConstants& constants,
                         NormalizeOutput kind, void* output, void* stream);

// Queues on `stream` (a cudaStream_t; nullptr: the legacy default stream)
// one kernel that reads `batch` rows of seq_len + 1 little-endian tokens of
// `token_bytes` bytes at device address `windows` (row-major, rows packed;
// `windows` aligned to token_bytes, as a batch field is) and writes int64
// `input`[b][k] = token[b][k] and `target`[b][k] = token[b][k + 1] for
// k < seq_len (8-byte aligned device arrays of batch * seq_len),
// sign-extending when `signed_tokens` (8-byte tokens are copied as they
// are). token_bytes must be 1, 2, 4 or 8; batch == 0 queues nothing.
int LaunchWidenTokenWindows(const void* windows, int token_bytes,
                            bool signed_tokens, int64_t batch, int64_t seq_len,
                            int64_t* input, int64_t* target, void* stream);

}  // namespace pinwheel::internal

#endif  // PINWHEEL_TRANSFER_DEVICE_STAGE_TRANSFORM_KERNELS_H_
