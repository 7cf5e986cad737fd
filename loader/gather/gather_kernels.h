// The gather path's copies (loader/gather_source.h): rows or token windows
// read from registered host memory at per-sample keys, written into a
// device buffer. Each has a host loop (the host backend, run on its copy
// thread) and a CUDA kernel (gather_kernels.cu); both write the same bytes.
//
// Example (host backend, inside Stream::EnqueueHostTask):
//   GatherRowsOnHost(keys, samples, fields);
#ifndef PINWHEEL_LOADER_GATHER_GATHER_KERNELS_H_
#define PINWHEEL_LOADER_GATHER_GATHER_KERNELS_H_

#include <cstddef>
#include <cstdint>

#include "loader/epoch_order.h"

namespace pinwheel::internal {

// One output field: sample s (key k) copies `bytes` bytes from
// source + k * stride to output + s * bytes. `source` is already offset to
// the field; on the cuda backend it is the registered memory's device
// address, `output` device memory.
struct GatherField {
  const std::byte* source = nullptr;
  uint64_t stride = 0;
  uint64_t bytes = 0;
  std::byte* output = nullptr;
};

// At most this many fields per launch (a kernel argument array).
inline constexpr int kMaxGatherFields = 16;

// Token windows widened: sample s (key k) writes input[s][t] = tokens[k + t]
// and target[s][t] = tokens[k + t + 1] for t < seq_len, tokens of
// token_bytes (1, 2, 4, 8) each, sign-extended when `is_signed`.
struct GatherWindows {
  const std::byte* tokens = nullptr;
  int token_bytes = 2;
  bool is_signed = false;
  int64_t seq_len = 0;
  int64_t* input = nullptr;
  int64_t* target = nullptr;
};

// A batch's keys computed where the gather runs (Note [the order on the
// device] in loader/gather/gather_plan.h): sample s is dataset index
// order::DealAt(deal, first + s), and its key is that index, or with
// window_starts > 0 order::WindowStart(window_seed, index, window_starts).
// Trivially copyable: a kernel argument.
struct GatherOrder {
  order::Deal deal;
  int64_t first = 0;
  uint64_t window_seed = 0;
  uint64_t window_starts = 0;  // 0: the key is the index
};

// Writes the keys of samples 0..samples-1 of `order` into `keys` (host).
void OrderedKeys(const GatherOrder& order, int64_t samples, int64_t* keys);

// The host loops. REQUIRES: every key in range (checked when the key was
// made), `keys` holds `samples` keys.
void GatherRowsOnHost(const int64_t* keys, int64_t samples,
                      const GatherField* fields, int num_fields);
void GatherWindowsOnHost(const int64_t* keys, int64_t samples,
                         const GatherWindows& windows);

// The kernels, queued on cudaStream_t `stream`; return the cudaError_t of
// the launch (0: cudaSuccess). `keys` is device memory. Only in CUDA
// builds. REQUIRES: num_fields <= kMaxGatherFields.
int LaunchGatherRows(const int64_t* keys, int64_t samples,
                     const GatherField* fields, int num_fields, void* stream);
int LaunchGatherWindows(const int64_t* keys, int64_t samples,
                        const GatherWindows& windows, void* stream);
// The same, each sample's key computed on the device from `order`.
int LaunchGatherRowsOrdered(const GatherOrder& order, int64_t samples,
                            const GatherField* fields, int num_fields,
                            void* stream);
int LaunchGatherWindowsOrdered(const GatherOrder& order, int64_t samples,
                               const GatherWindows& windows, void* stream);
// Queues `count` host-to-device copies (dsts[i] <- srcs[i], sizes[i]
// bytes; srcs in page-locked or registered host memory) on `stream` as one
// batch for the copy engines (cudaMemcpyBatchAsync). Returns the
// cudaError_t (0: cudaSuccess). Only in CUDA builds.
int EnqueueRowCopies(void* const* dsts, const void* const* srcs,
                     const size_t* sizes, size_t count, void* stream);

}  // namespace pinwheel::internal

#endif  // PINWHEEL_LOADER_GATHER_GATHER_KERNELS_H_
