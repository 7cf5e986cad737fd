#include "pinning/base/cuda_queues.h"

#include <cstdlib>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace pinwheel {
namespace {

constexpr char kName[] = "CUDA_DEVICE_MAX_CONNECTIONS";

std::string Fix() {
  return absl::StrCat("set ", kName, "=", kPreferredCudaConnections,
                      " before the process's first CUDA call (or import "
                      "pinwheel first, or call pinwheel::PreferCudaQueues())");
}

}  // namespace

bool PreferCudaQueues() {
  if (std::getenv(kName) != nullptr) return false;
  return setenv(kName, absl::StrCat(kPreferredCudaConnections).c_str(),
                /*overwrite=*/0) == 0;
}

std::string CudaQueuesReport(const char* value) {
  if (value == nullptr) {
    return absl::StrCat(kName,
                        " unset: CUDA's 8 hardware queues, so the decode can "
                        "wait behind every kernel a training step queued; ",
                        Fix());
  }
  int n = 0;
  if (!absl::SimpleAtoi(value, &n) || n < 1) {
    return absl::StrCat(kName, "='", value,
                        "' is not a number of queues (CUDA then keeps its 8); ",
                        Fix());
  }
  if (n < kPreferredCudaConnections) {
    return absl::StrCat(kName, "=", n, ": ", n, " hardware queue",
                        n == 1 ? "" : "s",
                        ", so the decode can wait behind every kernel a "
                        "training step queued (",
                        kPreferredCudaConnections, " measured best)");
  }
  return absl::StrCat(kName, "=", n);
}

}  // namespace pinwheel
