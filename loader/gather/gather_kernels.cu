// The gather path's kernels (see gather.h). One block per (sample, field):
// the row is read from registered host memory over PCIe in the widest
// aligned words (16, 8, 4 bytes or single bytes) the addresses and length
// allow, so a row of rows of 16-byte-aligned sizes moves as uint4 loads.
#include <cstdint>
#include <cuda_runtime.h>

#include "loader/gather/gather_kernels.h"

namespace pinwheel::internal {
namespace {

struct GatherArgs {
  GatherField fields[kMaxGatherFields];
};

// Where a kernel finds sample s's key: uploaded by the host, or computed
// from the batch's order on the device (Note [the order on the device] in
// loader/gather/gather_plan.h). Every thread of a block computes the same
// key: a few dozen integer operations, uniform across the block.
struct UploadedKeys {
  const int64_t* keys;
  __device__ int64_t operator()(int64_t s) const { return keys[s]; }
};

struct OrderedKeysOnDevice {
  GatherOrder order;
  __device__ int64_t operator()(int64_t s) const {
    const int64_t index = order::DealAt(order.deal, order.first + s);
    return order.window_starts == 0
               ? index
               : order::WindowStart(order.window_seed, index,
                                    order.window_starts);
  }
};

template <typename Word>
__device__ void CopyWords(const std::byte* src, std::byte* dst,
                          uint64_t bytes) {
  const Word* s = reinterpret_cast<const Word*>(src);
  Word* d = reinterpret_cast<Word*>(dst);
  const uint64_t words = bytes / sizeof(Word);
  for (uint64_t i = threadIdx.x; i < words; i += blockDim.x) d[i] = s[i];
}

template <typename Keys>
__global__ void GatherRowsKernel(Keys keys, GatherArgs args) {
  const int64_t s = blockIdx.x;
  const GatherField& field = args.fields[blockIdx.y];
  const std::byte* src =
      field.source + static_cast<uint64_t>(keys(s)) * field.stride;
  std::byte* dst = field.output + static_cast<uint64_t>(s) * field.bytes;
  const uint64_t alignment = reinterpret_cast<uintptr_t>(src) |
                             reinterpret_cast<uintptr_t>(dst) | field.bytes;
  if (alignment % 16 == 0) {
    CopyWords<uint4>(src, dst, field.bytes);
  } else if (alignment % 8 == 0) {
    CopyWords<uint2>(src, dst, field.bytes);
  } else if (alignment % 4 == 0) {
    CopyWords<uint32_t>(src, dst, field.bytes);
  } else {
    CopyWords<unsigned char>(src, dst, field.bytes);
  }
}

constexpr int kThreads = 256;
// A window kernel's block: a 1024-token window (W2) is one tile, so one
// round trip over PCIe per window rather than four (reads of mapped host
// memory are latency-bound). Not measured yet against 256.
constexpr int kWindowThreads = 1024;

// Each token is read from host memory once: a tile of kWindowThreads + 1
// tokens goes through shared memory, and input and target are both written
// from it.
template <typename T, typename Keys>
__global__ void GatherWindowsKernel(Keys keys, GatherWindows windows) {
  __shared__ T tile[kWindowThreads + 1];
  const int64_t s = blockIdx.x;
  const T* tokens = reinterpret_cast<const T*>(windows.tokens) + keys(s);
  int64_t* input = windows.input + s * windows.seq_len;
  int64_t* target = windows.target + s * windows.seq_len;
  for (int64_t base = 0; base < windows.seq_len; base += kWindowThreads) {
    const int64_t t = base + threadIdx.x;
    if (t <= windows.seq_len) tile[threadIdx.x] = tokens[t];
    if (threadIdx.x == 0 && base + kWindowThreads <= windows.seq_len) {
      tile[kWindowThreads] = tokens[base + kWindowThreads];
    }
    __syncthreads();
    if (t < windows.seq_len) {
      input[t] = static_cast<int64_t>(tile[threadIdx.x]);
      target[t] = static_cast<int64_t>(tile[threadIdx.x + 1]);
    }
    __syncthreads();
  }
}

template <typename Keys>
int LaunchRows(Keys keys, int64_t samples, const GatherField* fields,
               int num_fields, void* stream) {
  if (samples <= 0 || num_fields <= 0) return cudaSuccess;
  GatherArgs args{};
  for (int f = 0; f < num_fields; ++f) args.fields[f] = fields[f];
  const dim3 grid(static_cast<unsigned>(samples),
                  static_cast<unsigned>(num_fields));
  GatherRowsKernel<<<grid, kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      keys, args);
  return cudaGetLastError();
}

template <typename T, typename Keys>
void LaunchWindowsOf(Keys keys, int64_t samples, const GatherWindows& windows,
                     cudaStream_t stream) {
  GatherWindowsKernel<T>
      <<<dim3(static_cast<unsigned>(samples)), kWindowThreads, 0, stream>>>(
          keys, windows);
}

template <typename Keys>
int LaunchWindows(Keys keys, int64_t samples, const GatherWindows& windows,
                  void* stream) {
  if (samples <= 0) return cudaSuccess;
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  const bool is_signed = windows.is_signed;
  switch (windows.token_bytes) {
    case 1:
      is_signed ? LaunchWindowsOf<int8_t>(keys, samples, windows, s)
                : LaunchWindowsOf<uint8_t>(keys, samples, windows, s);
      break;
    case 2:
      is_signed ? LaunchWindowsOf<int16_t>(keys, samples, windows, s)
                : LaunchWindowsOf<uint16_t>(keys, samples, windows, s);
      break;
    case 4:
      is_signed ? LaunchWindowsOf<int32_t>(keys, samples, windows, s)
                : LaunchWindowsOf<uint32_t>(keys, samples, windows, s);
      break;
    default:
      LaunchWindowsOf<int64_t>(keys, samples, windows, s);
      break;
  }
  return cudaGetLastError();
}

}  // namespace

int LaunchGatherRows(const int64_t* keys, int64_t samples,
                     const GatherField* fields, int num_fields, void* stream) {
  return LaunchRows(UploadedKeys{keys}, samples, fields, num_fields, stream);
}

int LaunchGatherWindows(const int64_t* keys, int64_t samples,
                        const GatherWindows& windows, void* stream) {
  return LaunchWindows(UploadedKeys{keys}, samples, windows, stream);
}

int LaunchGatherRowsOrdered(const GatherOrder& order, int64_t samples,
                            const GatherField* fields, int num_fields,
                            void* stream) {
  return LaunchRows(OrderedKeysOnDevice{order}, samples, fields, num_fields,
                    stream);
}

int LaunchGatherWindowsOrdered(const GatherOrder& order, int64_t samples,
                               const GatherWindows& windows, void* stream) {
  return LaunchWindows(OrderedKeysOnDevice{order}, samples, windows, stream);
}

int EnqueueRowCopies(void* const* dsts, const void* const* srcs,
                     const size_t* sizes, size_t count, void* stream) {
  if (count == 0) return cudaSuccess;
  int device = 0;
  const cudaError_t current = cudaGetDevice(&device);
  if (current != cudaSuccess) return current;
  cudaMemcpyAttributes attributes{};
  attributes.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
  attributes.srcLocHint.type = cudaMemLocationTypeHost;
  attributes.dstLocHint.type = cudaMemLocationTypeDevice;
  attributes.dstLocHint.id = device;
  size_t first_with_attributes = 0;
  return cudaMemcpyBatchAsync(
      const_cast<void**>(dsts), const_cast<const void**>(srcs),
      const_cast<size_t*>(sizes), count, &attributes, &first_with_attributes, 1,
      static_cast<cudaStream_t>(stream));
}

}  // namespace pinwheel::internal
