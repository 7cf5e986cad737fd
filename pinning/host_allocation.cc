#include "pinning/host_allocation.h"

#include <cstdlib>
#include <cstring>
#include <optional>
#include <unistd.h>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

#ifdef PINWHEEL_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "pinning/base/cuda_device_guard.h"
#include "pinning/base/cuda_status.h"
#endif

namespace pinwheel {
namespace {

constexpr size_t kPageBytes = 4096;

size_t PhysicalMemoryBytes() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page_size = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page_size <= 0) return 0;
  return static_cast<size_t>(pages) * static_cast<size_t>(page_size);
}

std::string Size(size_t bytes) {
  return absl::StrCat(bytes, " bytes (", bytes >> 20, " MiB)");
}

}  // namespace

std::string HostMemoryKindName(HostMemoryKind kind) {
  return kind == HostMemoryKind::kPageLocked ? "page-locked" : "pageable";
}

absl::StatusOr<HostAllocation> HostAllocation::Allocate(size_t bytes,
                                                        HostMemoryKind kind,
                                                        int cuda_device) {
  if (bytes == 0) {
    return absl::InvalidArgumentError("host allocation of 0 bytes");
  }
  // Linux overcommits: refuse up front what the machine cannot hold rather
  // than be killed while touching the pages.
  const size_t physical = PhysicalMemoryBytes();
  if (physical != 0 && bytes > physical) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "cannot allocate ", Size(bytes), " of ", HostMemoryKindName(kind),
        " host memory: the machine has ", Size(physical)));
  }
  const size_t rounded = (bytes + kPageBytes - 1) / kPageBytes * kPageBytes;
  if (kind == HostMemoryKind::kPageLocked) {
#ifdef PINWHEEL_HAVE_CUDA
    std::optional<internal::ScopedCudaDevice> on_device;
    if (cuda_device >= 0) {
      on_device.emplace(cuda_device);
      if (!on_device->status().ok()) {
        return absl::Status(
            on_device->status().code(),
            absl::StrCat("cannot allocate ", Size(bytes),
                         " of page-locked host memory for cuda:", cuda_device,
                         ": ", on_device->status().message()));
      }
    }
    void* ptr = nullptr;
    const cudaError_t error =
        cudaHostAlloc(&ptr, rounded, cudaHostAllocPortable);
    if (error != cudaSuccess) {
      cudaGetLastError();  // clear the sticky-free error state
      absl::Status status = CudaStatus(error, "cudaHostAlloc");
      const std::string message =
          absl::StrCat("cannot allocate ", Size(bytes),
                       " of page-locked host memory: ", status.message());
      if (error == cudaErrorMemoryAllocation) {
        return absl::ResourceExhaustedError(message);
      }
      return absl::Status(status.code(), message);
    }
    std::memset(ptr, 0, rounded);
    return HostAllocation(static_cast<std::byte*>(ptr), bytes, kind,
                          cuda_device);
#else
    (void)cuda_device;
    return absl::FailedPreconditionError(absl::StrCat(
        "cannot allocate ", Size(bytes),
        " of page-locked host memory: pinwheel was built without CUDA"));
#endif
  }
  void* ptr = std::aligned_alloc(kPageBytes, rounded);
  if (ptr == nullptr) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "cannot allocate ", Size(bytes), " of pageable host memory"));
  }
  std::memset(ptr, 0, rounded);  // fault every page in now, not in the loop
  return HostAllocation(static_cast<std::byte*>(ptr), bytes, kind, -1);
}

HostAllocation::HostAllocation(HostAllocation&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      kind_(other.kind_),
      cuda_device_(other.cuda_device_) {}

HostAllocation& HostAllocation::operator=(HostAllocation&& other) noexcept {
  if (this != &other) {
    Free();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    kind_ = other.kind_;
    cuda_device_ = other.cuda_device_;
  }
  return *this;
}

HostAllocation::~HostAllocation() { Free(); }

void HostAllocation::Free() {
  if (data_ == nullptr) return;
  if (kind_ == HostMemoryKind::kPageLocked) {
#ifdef PINWHEEL_HAVE_CUDA
    std::optional<internal::ScopedCudaDevice> on_device;
    if (cuda_device_ >= 0) on_device.emplace(cuda_device_);
    cudaFreeHost(data_);
#endif
  } else {
    std::free(data_);
  }
  data_ = nullptr;
  size_ = 0;
}

}  // namespace pinwheel
