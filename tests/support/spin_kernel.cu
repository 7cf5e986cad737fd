#include <cuda_runtime.h>

#include "tests/support/spin_kernel.h"

namespace pinwheel::testing_support {
namespace {

__global__ void Spin(long long cycles) {
  const long long start = clock64();
  while (clock64() - start < cycles) {
  }
}

}  // namespace

int LaunchSpin(void* stream, double milliseconds) {
  int device = 0;
  cudaGetDevice(&device);
  int clock_khz = 0;
  cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, device);
  if (clock_khz <= 0) clock_khz = 1'500'000;
  const long long cycles = static_cast<long long>(milliseconds * clock_khz);
  Spin<<<1, 1, 0, static_cast<cudaStream_t>(stream)>>>(cycles);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace pinwheel::testing_support
