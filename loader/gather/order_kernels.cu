// The order kernels (see order_kernels.h): one thread per position, in a
// grid-stride loop so that any count fits the grid's limits. Each thread's
// work is a few dozen 64-bit multiplies (more for the rare long cycle
// walks), so the launch, not the math, is the cost at batch sizes.
#include <cstdint>
#include <cuda_runtime.h>

#include "loader/epoch_order.h"
#include "loader/gather/order_kernels.h"

namespace pinwheel::internal {
namespace {

constexpr int kThreads = 256;
// Enough blocks to fill an H100 several times over; larger counts loop.
constexpr int64_t kMaxBlocks = 4096;

__global__ void DealIndicesKernel(order::Deal deal, int64_t first,
                                  int64_t count, int64_t* out) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       i < count; i += stride) {
    out[i] = order::DealAt(deal, first + i);
  }
}

__global__ void WindowStartsKernel(uint64_t seed, uint64_t starts,
                                   const int64_t* indices, int64_t count,
                                   int64_t* out) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       i < count; i += stride) {
    out[i] = order::WindowStart(seed, indices[i], starts);
  }
}

unsigned Blocks(int64_t count) {
  const int64_t blocks = (count + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < kMaxBlocks ? blocks : kMaxBlocks);
}

}  // namespace

int LaunchDealIndices(const order::Deal& deal, int64_t first, int64_t count,
                      int64_t* out_device, void* stream) {
  if (count <= 0) return cudaSuccess;
  DealIndicesKernel<<<Blocks(count), kThreads, 0,
                      static_cast<cudaStream_t>(stream)>>>(deal, first, count,
                                                           out_device);
  return cudaGetLastError();
}

int LaunchWindowStarts(uint64_t seed, uint64_t starts,
                       const int64_t* indices_device, int64_t count,
                       int64_t* out_device, void* stream) {
  if (count <= 0) return cudaSuccess;
  WindowStartsKernel<<<Blocks(count), kThreads, 0,
                       static_cast<cudaStream_t>(stream)>>>(
      seed, starts, indices_device, count, out_device);
  return cudaGetLastError();
}

}  // namespace pinwheel::internal
