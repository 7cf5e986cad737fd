// The cuda backend: the CUDA runtime API, every error turned into a Status
// naming the call. Every call runs with its device's context current and
// puts the caller's back (ScopedCudaDevice, Note [current device without a
// stray context]); none calls cudaSetDevice.
#include <cuda_runtime_api.h>
#include <functional>
#include <memory>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

#include "pinning/base/cuda_device_guard.h"
#include "pinning/base/cuda_status.h"
#include "transfer/internal/backend.h"

// Makes `ordinal`'s context current for the rest of the scope; returns its
// error as a Status.
#define PINWHEEL_ON_DEVICE_OR_RETURN(ordinal)    \
  ScopedCudaDevice pinwheel_on_device_(ordinal); \
  if (!pinwheel_on_device_.status().ok()) return pinwheel_on_device_.status()

namespace pinwheel::internal {
namespace {

cudaStream_t AsStream(void* s) { return static_cast<cudaStream_t>(s); }
cudaEvent_t AsEvent(void* e) { return static_cast<cudaEvent_t>(e); }

class CudaBackendImpl final : public Backend {
 public:
  absl::StatusOr<void*> CreateStream(int ordinal) override {
    PINWHEEL_ON_DEVICE_OR_RETURN(ordinal);
    cudaStream_t stream = nullptr;
    PINWHEEL_CUDA_RETURN_IF_ERROR(
        cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    return static_cast<void*>(stream);
  }
  void DestroyStream(int ordinal, void* stream) override {
    ScopedCudaDevice on_device(ordinal);
    cudaStreamSynchronize(AsStream(stream));
    cudaStreamDestroy(AsStream(stream));
  }
  absl::StatusOr<void*> CreateEvent(int ordinal) override {
    PINWHEEL_ON_DEVICE_OR_RETURN(ordinal);
    cudaEvent_t event = nullptr;
    PINWHEEL_CUDA_RETURN_IF_ERROR(
        cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
    return static_cast<void*>(event);
  }
  void DestroyEvent(int ordinal, void* event) override {
    ScopedCudaDevice on_device(ordinal);
    cudaEventDestroy(AsEvent(event));
  }
  absl::Status RecordEvent(int ordinal, void* event, void* stream) override {
    PINWHEEL_ON_DEVICE_OR_RETURN(ordinal);
    PINWHEEL_CUDA_RETURN_IF_ERROR(
        cudaEventRecord(AsEvent(event), AsStream(stream)));
    return absl::OkStatus();
  }
  absl::StatusOr<bool> QueryEvent(int ordinal, void* event) override {
    PINWHEEL_ON_DEVICE_OR_RETURN(ordinal);
    const cudaError_t error = cudaEventQuery(AsEvent(event));
    if (error == cudaSuccess) return true;
    if (error == cudaErrorNotReady) {
      cudaGetLastError();
      return false;
    }
    return CudaStatus(error, "cudaEventQuery");
  }
  absl::Status SynchronizeEvent(int ordinal, void* event) override {
    PINWHEEL_ON_DEVICE_OR_RETURN(ordinal);
    PINWHEEL_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(AsEvent(event)));
    return absl::OkStatus();
  }
  absl::Status StreamWaitEvent(int ordinal, void* stream,
                               void* event) override {
    PINWHEEL_ON_DEVICE_OR_RETURN(ordinal);
    PINWHEEL_CUDA_RETURN_IF_ERROR(
        cudaStreamWaitEvent(AsStream(stream), AsEvent(event), 0));
    return absl::OkStatus();
  }
  absl::Status CopyAsync(int ordinal, void* stream, void* dst, const void* src,
                         size_t bytes, CopyDirection direction) override {
    PINWHEEL_ON_DEVICE_OR_RETURN(ordinal);
    PINWHEEL_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(
        dst, src, bytes,
        direction == CopyDirection::kHostToDevice   ? cudaMemcpyHostToDevice
        : direction == CopyDirection::kDeviceToHost ? cudaMemcpyDeviceToHost
                                                    : cudaMemcpyDeviceToDevice,
        AsStream(stream)));
    return absl::OkStatus();
  }
  absl::Status ZeroAsync(int ordinal, void* stream, void* dst,
                         size_t bytes) override {
    PINWHEEL_ON_DEVICE_OR_RETURN(ordinal);
    PINWHEEL_CUDA_RETURN_IF_ERROR(
        cudaMemsetAsync(dst, 0, bytes, AsStream(stream)));
    return absl::OkStatus();
  }
  absl::Status SynchronizeStream(int ordinal, void* stream) override {
    PINWHEEL_ON_DEVICE_OR_RETURN(ordinal);
    PINWHEEL_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(AsStream(stream)));
    return absl::OkStatus();
  }
  absl::Status LaunchHostTask(int ordinal, void* stream,
                              std::function<void()> task) override {
    PINWHEEL_ON_DEVICE_OR_RETURN(ordinal);
    auto* owned = new std::function<void()>(std::move(task));
    const cudaError_t error = cudaLaunchHostFunc(
        AsStream(stream),
        [](void* data) {
          std::unique_ptr<std::function<void()>> fn(
              static_cast<std::function<void()>*>(data));
          (*fn)();
        },
        owned);
    if (error != cudaSuccess) {
      delete owned;
      cudaGetLastError();
      return CudaStatus(error, "cudaLaunchHostFunc");
    }
    return absl::OkStatus();
  }
  absl::StatusOr<void*> AllocateDevice(int ordinal, size_t bytes) override {
    PINWHEEL_ON_DEVICE_OR_RETURN(ordinal);
    void* ptr = nullptr;
    const cudaError_t error = cudaMalloc(&ptr, bytes);
    if (error != cudaSuccess) {
      cudaGetLastError();
      absl::Status status = CudaStatus(error, "cudaMalloc");
      return absl::Status(
          status.code(),
          absl::StrCat("cannot allocate ", bytes, " bytes (", bytes >> 20,
                       " MiB) on cuda:", ordinal, ": ", status.message()));
    }
    return ptr;
  }
  void FreeDevice(int ordinal, void* ptr) override {
    ScopedCudaDevice on_device(ordinal);
    cudaFree(ptr);
  }
  absl::Status CheckDeviceMemory(int ordinal, const void* ptr) override {
    PINWHEEL_ON_DEVICE_OR_RETURN(ordinal);
    cudaPointerAttributes attributes{};
    const cudaError_t error = cudaPointerGetAttributes(&attributes, ptr);
    if (error != cudaSuccess) {
      cudaGetLastError();
      return CudaStatus(error, "cudaPointerGetAttributes");
    }
    if (attributes.type != cudaMemoryTypeDevice &&
        attributes.type != cudaMemoryTypeManaged) {
      return absl::InvalidArgumentError(
          attributes.type == cudaMemoryTypeHost
              ? "it is page-locked host memory (cudaMallocHost/cudaHostAlloc);"
                " allocate it with cudaMalloc"
              : "it is host memory CUDA does not know; allocate it with "
                "cudaMalloc");
    }
    if (attributes.device != ordinal) {
      return absl::InvalidArgumentError(
          absl::StrCat("it is memory of cuda:", attributes.device,
                       ", not of cuda:", ordinal));
    }
    return absl::OkStatus();
  }
};

}  // namespace

Backend* CudaBackend() {
  static Backend* backend = new CudaBackendImpl();
  return backend;
}

int CudaDeviceCountImpl() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return count;
}

std::string CudaDeviceDescription(int ordinal) {
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, ordinal) != cudaSuccess) {
    cudaGetLastError();
    return "unknown";
  }
  return absl::StrFormat("%s, %d SMs, %.1f GiB", prop.name,
                         prop.multiProcessorCount,
                         static_cast<double>(prop.totalGlobalMem) / (1 << 30));
}

std::string CudaPciBusId(int ordinal) {
  char bus[32] = {};
  if (cudaDeviceGetPCIBusId(bus, sizeof bus, ordinal) != cudaSuccess) {
    cudaGetLastError();
    return "";
  }
  return absl::AsciiStrToLower(bus);
}

}  // namespace pinwheel::internal
