#include <cstdint>
#include <cuda_runtime_api.h>

#include "samples/bench/widen_tokens.h"

namespace pinwheel::bench {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxGridY = 65535;

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
int Launch(const void* windows, int64_t batch, int64_t seq_len, int64_t* input,
           int64_t* target, cudaStream_t stream) {
  const int64_t columns = (seq_len + kThreads - 1) / kThreads;
  if (columns > 0x7fffffff) return kWidenBadArguments;
  const dim3 grid(static_cast<unsigned>(columns),
                  static_cast<unsigned>(batch < kMaxGridY ? batch : kMaxGridY));
  WidenKernel<T><<<grid, kThreads, 0, stream>>>(static_cast<const T*>(windows),
                                                batch, seq_len, input, target);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace

int LaunchWidenTokenWindows(const void* windows, int token_bytes,
                            bool signed_tokens, int64_t batch, int64_t seq_len,
                            int64_t* input, int64_t* target, void* stream) {
  if (batch < 0 || seq_len < 1) return kWidenBadArguments;
  if (batch == 0) return 0;
  if (windows == nullptr || input == nullptr || target == nullptr) {
    return kWidenBadArguments;
  }
  const auto s = static_cast<cudaStream_t>(stream);
  switch (token_bytes) {
    case 1:
      return signed_tokens
                 ? Launch<int8_t>(windows, batch, seq_len, input, target, s)
                 : Launch<uint8_t>(windows, batch, seq_len, input, target, s);
    case 2:
      return signed_tokens
                 ? Launch<int16_t>(windows, batch, seq_len, input, target, s)
                 : Launch<uint16_t>(windows, batch, seq_len, input, target, s);
    case 4:
      return signed_tokens
                 ? Launch<int32_t>(windows, batch, seq_len, input, target, s)
                 : Launch<uint32_t>(windows, batch, seq_len, input, target, s);
    case 8:
      return Launch<int64_t>(windows, batch, seq_len, input, target, s);
    default:
      return kWidenBadArguments;
  }
}

}  // namespace pinwheel::bench
