// Device: where batches go. Either a CUDA GPU (the cuda backend: page-locked
// slots, cudaMemcpyAsync on a side stream, CUDA events) or the host (the host
// backend: page-aligned slots, copies on a thread, completion flags as
// events). The pipeline code is the same for both.
//
// Example:
//   Device device = Device::FirstGpuOrHost();
//   PINWHEEL_ASSIGN_OR_RETURN(Device gpu1, Device::Cuda(1));
//   PINWHEEL_ASSIGN_OR_RETURN(Device d, Device::Parse("cuda:0"));
#ifndef PINWHEEL_TRANSFER_DEVICE_H_
#define PINWHEEL_TRANSFER_DEVICE_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace pinwheel {

// Thread-compatible value type.
class Device {
 public:
  enum class Kind { kHost, kCuda };

  // Returns the host backend's device.
  static Device Host() { return Device(Kind::kHost, 0); }
  // Returns CUDA device `ordinal`, or FailedPrecondition when this build has
  // no CUDA backend or the machine no GPU, or OutOfRange naming the ordinal
  // and the device count.
  [[nodiscard]] static absl::StatusOr<Device> Cuda(int ordinal);
  // Returns the first GPU if there is one, else the host.
  static Device FirstGpuOrHost();
  // Returns the number of usable CUDA devices (0 without the cuda backend).
  static int CudaDeviceCount();
  // Returns whether this build has the cuda backend.
  static bool CudaBackendBuilt();
  // Parses "auto" (FirstGpuOrHost), "cpu" or "host", "cuda" (device 0) and
  // "cuda:N". InvalidArgument for anything else.
  [[nodiscard]] static absl::StatusOr<Device> Parse(absl::string_view spec);

  Device() = default;  // the host

  Kind kind() const { return kind_; }
  bool is_cuda() const { return kind_ == Kind::kCuda; }
  int ordinal() const { return ordinal_; }
  // "host" or "cuda:0".
  std::string ToString() const;
  // "host (N cores)" or "cuda:0 (NVIDIA H100 80GB HBM3, 132 SMs)".
  std::string Describe() const;

  // Returns the NUMA node the GPU is attached to (from sysfs), or -1 for the
  // host, or when the platform does not say.
  int NumaNode() const;

  friend bool operator==(const Device& a, const Device& b) {
    return a.kind_ == b.kind_ && a.ordinal_ == b.ordinal_;
  }

 private:
  Device(Kind kind, int ordinal) : kind_(kind), ordinal_(ordinal) {}

  Kind kind_ = Kind::kHost;
  int ordinal_ = 0;
};

}  // namespace pinwheel

#endif  // PINWHEEL_TRANSFER_DEVICE_H_
