// SKIP_WITHOUT_GPU(): the one GPU skip of every GPU test case (a name ending
// in _CUDA), its first statement. It skips the case, saying why, in a build
// without CUDA or on a machine with too few CUDA devices, so that CI (no GPU)
// reports the GPU suites as skipped rather than passed.
//
// SKIP_WITHOUT_GPU()                      "... GPU suite not run here"
// SKIP_WITHOUT_GPU("GPU crop suite")      names what is not run
// SKIP_WITHOUT_GPU("multi-GPU case", 2)   needs 2 devices
//
// Example:
//   TEST(GatherPath, RowsAreTheWorkerPathsBytes_CUDA) {
//     SKIP_WITHOUT_GPU();
//     ...
//   }
//
// Thread-safe: a pure function of the build and the machine.
#ifndef PINWHEEL_TESTS_SUPPORT_SKIP_WITHOUT_GPU_H_
#define PINWHEEL_TESTS_SUPPORT_SKIP_WITHOUT_GPU_H_

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "gtest/gtest.h"

#include "transfer/device.h"

namespace pinwheel::testing_support {

// Returns why a case needing `gpus` CUDA devices cannot run here ("built
// without CUDA: <what> not run", "no CUDA device on this machine: <what>
// not run here", "needs 2 CUDA device(s); this machine has 1: <what> not run
// here"), or "" when it can.
inline std::string WhyNoGpu(absl::string_view what = "GPU suite",
                            int gpus = 1) {
  if (!Device::CudaBackendBuilt()) {
    return absl::StrCat("built without CUDA: ", what, " not run");
  }
  const int count = Device::CudaDeviceCount();
  if (count >= gpus) return "";
  if (gpus == 1) {
    return absl::StrCat("no CUDA device on this machine: ", what,
                        " not run here");
  }
  return absl::StrCat("needs ", gpus, " CUDA device(s); this machine has ",
                      count, ": ", what, " not run here");
}

}  // namespace pinwheel::testing_support

// The empty then-branch keeps a following `else` from binding to the macro.
#define SKIP_WITHOUT_GPU(...)                                 \
  if (const std::string pinwheel_why_no_gpu =                 \
          ::pinwheel::testing_support::WhyNoGpu(__VA_ARGS__); \
      pinwheel_why_no_gpu.empty()) {                          \
  } else /* NOLINT */                                         \
    GTEST_SKIP() << pinwheel_why_no_gpu

#endif  // PINWHEEL_TESTS_SUPPORT_SKIP_WITHOUT_GPU_H_
