// See Note [current device without a stray context] in the header.
#include "pinning/base/cuda_device_guard.h"

#include <array>
#include <atomic>
#include <cuda.h>
#include <cuda_runtime_api.h>

#include "absl/strings/str_cat.h"

#include "pinning/base/cuda_status.h"

namespace pinwheel::internal {
namespace {

// The driver entry points, looked up once through the runtime.
struct DriverApi {
  CUresult (*ctx_get_current)(CUcontext*) = nullptr;
  CUresult (*ctx_push_current)(CUcontext) = nullptr;
  CUresult (*ctx_pop_current)(CUcontext*) = nullptr;
  CUresult (*device_get)(CUdevice*, int) = nullptr;
  CUresult (*primary_ctx_retain)(CUcontext*, CUdevice) = nullptr;
  CUresult (*primary_ctx_get_state)(CUdevice, unsigned int*, int*) = nullptr;
  absl::Status status;
};

template <typename Fn>
absl::Status Lookup(const char* symbol, Fn* fn) {
  void* ptr = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  const cudaError_t error = cudaGetDriverEntryPointByVersion(
      symbol, &ptr, 12000, cudaEnableDefault, &found);
  if (error != cudaSuccess) {
    cudaGetLastError();
    return CudaStatus(error, "cudaGetDriverEntryPointByVersion");
  }
  if (found != cudaDriverEntryPointSuccess || ptr == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("the CUDA driver has no ", symbol));
  }
  *fn = reinterpret_cast<Fn>(ptr);
  return absl::OkStatus();
}

const DriverApi& Driver() {
  static const DriverApi* api = [] {
    auto* d = new DriverApi;
    for (absl::Status s :
         {Lookup("cuCtxGetCurrent", &d->ctx_get_current),
          Lookup("cuCtxPushCurrent", &d->ctx_push_current),
          Lookup("cuCtxPopCurrent", &d->ctx_pop_current),
          Lookup("cuDeviceGet", &d->device_get),
          Lookup("cuDevicePrimaryCtxRetain", &d->primary_ctx_retain),
          Lookup("cuDevicePrimaryCtxGetState", &d->primary_ctx_get_state)}) {
      if (!s.ok() && d->status.ok()) d->status = s;
    }
    return d;
  }();
  return *api;
}

absl::Status DriverStatus(CUresult result, const char* call, int ordinal) {
  if (result == CUDA_SUCCESS) return absl::OkStatus();
  const std::string message =
      absl::StrCat(call, " on cuda:", ordinal, ": CUresult ", result);
  if (result == CUDA_ERROR_INVALID_DEVICE ||
      result == CUDA_ERROR_INVALID_VALUE) {
    return absl::InvalidArgumentError(message);
  }
  if (result == CUDA_ERROR_OUT_OF_MEMORY)
    return absl::ResourceExhaustedError(message);
  return absl::InternalError(message);
}

// Primary contexts retained once per ordinal and kept for the process's
// life (the runtime keeps them too). A race retains twice: harmless.
constexpr int kMaxCachedDevices = 64;
std::array<std::atomic<CUcontext>, kMaxCachedDevices> primary_contexts{};

absl::StatusOr<CUcontext> PrimaryContext(const DriverApi& api, int ordinal) {
  if (ordinal >= 0 && ordinal < kMaxCachedDevices) {
    CUcontext cached =
        primary_contexts[ordinal].load(std::memory_order_acquire);
    if (cached != nullptr) return cached;
  }
  CUdevice device = 0;
  absl::Status s =
      DriverStatus(api.device_get(&device, ordinal), "cuDeviceGet", ordinal);
  if (!s.ok()) return s;
  CUcontext context = nullptr;
  s = DriverStatus(api.primary_ctx_retain(&context, device),
                   "cuDevicePrimaryCtxRetain", ordinal);
  if (!s.ok()) return s;
  if (ordinal >= 0 && ordinal < kMaxCachedDevices) {
    primary_contexts[ordinal].store(context, std::memory_order_release);
  }
  return context;
}

}  // namespace

ScopedCudaDevice::ScopedCudaDevice(int ordinal) {
  const DriverApi& api = Driver();
  if (!api.status.ok()) {
    status_ = api.status;
    return;
  }
  absl::StatusOr<CUcontext> target = PrimaryContext(api, ordinal);
  if (!target.ok()) {
    status_ = target.status();
    return;
  }
  CUcontext current = nullptr;
  status_ =
      DriverStatus(api.ctx_get_current(&current), "cuCtxGetCurrent", ordinal);
  if (!status_.ok() || current == *target) return;
  status_ =
      DriverStatus(api.ctx_push_current(*target), "cuCtxPushCurrent", ordinal);
  pushed_ = status_.ok();
}

ScopedCudaDevice::~ScopedCudaDevice() {
  if (!pushed_) return;
  CUcontext popped = nullptr;
  Driver().ctx_pop_current(&popped);
}

absl::StatusOr<bool> CudaPrimaryContextActive(int ordinal) {
  const DriverApi& api = Driver();
  if (!api.status.ok()) return api.status;
  CUdevice device = 0;
  absl::Status s =
      DriverStatus(api.device_get(&device, ordinal), "cuDeviceGet", ordinal);
  if (!s.ok()) return s;
  unsigned int flags = 0;
  int active = 0;
  s = DriverStatus(api.primary_ctx_get_state(device, &flags, &active),
                   "cuDevicePrimaryCtxGetState", ordinal);
  if (!s.ok()) return s;
  return active != 0;
}

absl::StatusOr<bool> CudaThreadHasCurrentContext() {
  const DriverApi& api = Driver();
  if (!api.status.ok()) return api.status;
  CUcontext current = nullptr;
  absl::Status s =
      DriverStatus(api.ctx_get_current(&current), "cuCtxGetCurrent", -1);
  if (!s.ok()) return s;
  return current != nullptr;
}

}  // namespace pinwheel::internal
