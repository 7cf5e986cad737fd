// SKIP_WITHOUT_GPU(): the first statement of a GPU test case (a name ending
// in _CUDA). It skips the case, saying why, on a machine without a CUDA
// device or in a build without CUDA, so that CI (no GPU) reports the GPU
// suites as skipped rather than passed.
//
// Example:
//   TEST(GatherPath, RowsAreTheWorkerPathsBytes_CUDA) {
//     SKIP_WITHOUT_GPU();
//     ...
//   }
#ifndef PINWHEEL_TESTS_SUPPORT_SKIP_WITHOUT_GPU_H_
#define PINWHEEL_TESTS_SUPPORT_SKIP_WITHOUT_GPU_H_

#include "gtest/gtest.h"

#include "transfer/device.h"

#ifdef PINWHEEL_HAVE_CUDA
#define SKIP_WITHOUT_GPU()                        \
  if (::pinwheel::Device::CudaDeviceCount() == 0) \
  GTEST_SKIP() << "no CUDA device on this machine: GPU suite not run here"
#else
#define SKIP_WITHOUT_GPU() \
  GTEST_SKIP() << "built without CUDA: GPU suite not run"
#endif

#endif  // PINWHEEL_TESTS_SUPPORT_SKIP_WITHOUT_GPU_H_
