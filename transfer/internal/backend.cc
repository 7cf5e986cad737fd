#include "transfer/internal/backend.h"

namespace pinwheel::internal {

Backend& BackendFor(const Device& device) {
  if (device.is_cuda()) {
    Backend* cuda = CudaBackend();
    if (cuda != nullptr) return *cuda;
  }
  return HostBackend();
}

#ifndef PINWHEEL_HAVE_CUDA
Backend* CudaBackend() { return nullptr; }
int CudaDeviceCountImpl() { return 0; }
std::string CudaDeviceDescription(int) { return ""; }
std::string CudaPciBusId(int) { return ""; }
#endif

}  // namespace pinwheel::internal
