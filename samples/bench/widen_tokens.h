// WidenTokenWindows: the GPU half of TokenWindowDataset's kWindow output
// (issue 12). A batch of B windows of seq_len + 1 tokens in the file's width
// (u16 for a GPT-2 token file) becomes the int64 input = windows[:, :-1] and
// target = windows[:, 1:] that TokenOutput::kInputAndTargetInt64 would have
// shipped, 8x the bytes for u16, on the device instead of on the host.
//
// Plain C++ (no CUDA or Abseil types) so that any translation unit can call
// it; compiled from widen_tokens.cu by nvcc only in a CUDA build.
//
// Example (after DeviceBatch::WaitOn(consumer)):
//   const FieldView& tokens = batch.field(0);  // u16[B, seq_len + 1]
//   const int error = LaunchWidenTokenWindows(
//       tokens.data, /*token_bytes=*/2, /*signed_tokens=*/false, batch.size(),
//       seq_len, input, target, consumer_cuda_stream);
//   if (error != 0) ...  // a cudaError_t, or kWidenBadArguments
#ifndef PINWHEEL_SAMPLES_BENCH_WIDEN_TOKENS_H_
#define PINWHEEL_SAMPLES_BENCH_WIDEN_TOKENS_H_

#include <cstdint>

namespace pinwheel::bench {

// Returned when the arguments cannot describe a window batch: token_bytes
// not 1, 2, 4 or 8, batch < 0, seq_len < 1, or a null pointer with batch > 0.
inline constexpr int kWidenBadArguments = -1;

// Queues on `stream` (a cudaStream_t; nullptr: the legacy default stream)
// one kernel that reads `batch` rows of seq_len + 1 little-endian tokens of
// `token_bytes` bytes at device address `windows` (row-major, rows packed:
// row b starts at b * (seq_len + 1) * token_bytes; `windows` aligned to
// token_bytes, as a batch field is)
// and writes int64 `input`[b][k] = token[b][k] and `target`[b][k] =
// token[b][k + 1] for k < seq_len (device arrays of batch * seq_len,
// 8-byte aligned), sign-extending when `signed_tokens` (8-byte tokens are
// copied as they are). Returns at once: 0 (cudaSuccess) when the kernel was
// queued, else the launch's cudaError_t or kWidenBadArguments. batch == 0
// queues nothing and returns 0. Thread-safe (no state).
int LaunchWidenTokenWindows(const void* windows, int token_bytes,
                            bool signed_tokens, int64_t batch, int64_t seq_len,
                            int64_t* input, int64_t* target, void* stream);

}  // namespace pinwheel::bench

#endif  // PINWHEEL_SAMPLES_BENCH_WIDEN_TOKENS_H_
