#include "transfer/device.h"

#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

#include "pinning/base/small_file.h"
#include "transfer/internal/backend.h"

namespace pinwheel {

bool Device::CudaBackendBuilt() { return internal::CudaBackend() != nullptr; }

int Device::CudaDeviceCount() { return internal::CudaDeviceCountImpl(); }

absl::StatusOr<Device> Device::Cuda(int ordinal) {
  if (!CudaBackendBuilt()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "device cuda:", ordinal, ": pinwheel was built without CUDA"));
  }
  const int count = CudaDeviceCount();
  if (count == 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("device cuda:", ordinal, ": this machine has no GPU"));
  }
  if (ordinal < 0 || ordinal >= count) {
    return absl::OutOfRangeError(absl::StrCat(
        "device cuda:", ordinal, " does not exist: this machine has ", count,
        " GPU(s), cuda:0..cuda:", count - 1));
  }
  return Device(Kind::kCuda, ordinal);
}

Device Device::FirstGpuOrHost() {
  if (CudaDeviceCount() > 0) return Device(Kind::kCuda, 0);
  return Host();
}

absl::StatusOr<Device> Device::Parse(absl::string_view spec) {
  if (spec == "auto") return FirstGpuOrHost();
  if (spec == "cpu" || spec == "host") return Host();
  if (spec == "cuda") return Cuda(0);
  if (absl::ConsumePrefix(&spec, "cuda:")) {
    int ordinal = 0;
    if (absl::SimpleAtoi(spec, &ordinal) && ordinal >= 0) return Cuda(ordinal);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("device '", spec,
                   "' not understood: use auto, cpu, host, cuda or cuda:N"));
}

std::string Device::ToString() const {
  return is_cuda() ? absl::StrCat("cuda:", ordinal_) : "host";
}

std::string Device::Describe() const {
  if (is_cuda()) {
    return absl::StrCat(ToString(), " (",
                        internal::CudaDeviceDescription(ordinal_), ")");
  }
  return absl::StrCat("host (", std::thread::hardware_concurrency(), " cores)");
}

int Device::NumaNode() const {
  if (!is_cuda()) return -1;
  const std::string bus = internal::CudaPciBusId(ordinal_);
  if (bus.empty()) return -1;
  const std::optional<std::string> text = internal::ReadSmallFile(
      absl::StrCat("/sys/bus/pci/devices/", bus, "/numa_node"));
  int node = -1;
  if (!text || !absl::SimpleAtoi(absl::StripAsciiWhitespace(*text), &node)) {
    return -1;
  }
  return node;
}

}  // namespace pinwheel
