#include <algorithm>
#include <cuda_runtime.h>

#include "tests/support/spin_kernel.h"

namespace pinwheel::testing_support {
namespace {

__global__ void Spin(long long cycles) {
  const long long start = clock64();
  while (clock64() - start < cycles) {
  }
}

// The cycles of `milliseconds` at the device's clock.
long long Cycles(double milliseconds) {
  int device = 0;
  cudaGetDevice(&device);
  int clock_khz = 0;
  cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, device);
  if (clock_khz <= 0) clock_khz = 1'500'000;
  return static_cast<long long>(milliseconds * clock_khz);
}

}  // namespace

int LaunchSpin(void* stream, double milliseconds) {
  Spin<<<1, 1, 0, static_cast<cudaStream_t>(stream)>>>(Cycles(milliseconds));
  return static_cast<int>(cudaGetLastError());
}

int LaunchSpinOnEverySm(void* stream, double milliseconds) {
  int device = 0;
  cudaGetDevice(&device);
  int sms = 0;
  int threads = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  cudaDeviceGetAttribute(&threads, cudaDevAttrMaxThreadsPerMultiProcessor,
                         device);
  // Blocks of 1024 threads, as many as fill every multiprocessor's slots.
  const int blocks = sms * std::max(1, threads / 1024);
  Spin<<<blocks, 1024, 0, static_cast<cudaStream_t>(stream)>>>(
      Cycles(milliseconds));
  return static_cast<int>(cudaGetLastError());
}

}  // namespace pinwheel::testing_support
