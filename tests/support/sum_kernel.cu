#include <cuda_runtime.h>

#include "tests/support/sum_kernel.h"

namespace pinwheel::testing_support {
namespace {

constexpr int kThreads = 256;

__global__ void SumIntoNext(const int32_t* x, int64_t n,
                            unsigned long long* sums, unsigned int capacity,
                            unsigned int* counter, unsigned long long* total) {
  __shared__ unsigned long long partial[kThreads];
  unsigned long long acc = 0;
  for (int64_t i = threadIdx.x; i < n; i += kThreads) {
    acc += static_cast<unsigned long long>(static_cast<uint32_t>(x[i]));
  }
  partial[threadIdx.x] = acc;
  __syncthreads();
  for (int stride = kThreads / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride)
      partial[threadIdx.x] += partial[threadIdx.x + stride];
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    const unsigned int k = *counter;
    if (k < capacity) sums[k] = partial[0];
    *total += partial[0];
    *counter = k + 1;
  }
}

}  // namespace

int LaunchSumIntoNext(void* stream, const int32_t* x, int64_t n,
                      unsigned long long* sums, unsigned int capacity,
                      unsigned int* counter, unsigned long long* total) {
  SumIntoNext<<<1, kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      x, n, sums, capacity, counter, total);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace pinwheel::testing_support
