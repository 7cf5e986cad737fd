// HostAllocation: one block of host memory for pinned slots, either
// page-locked through the CUDA driver (cudaHostAlloc) or page-aligned
// ordinary memory (the host backend, or when no GPU is present).
//
// Both kinds are touched once at allocation so that every page is resident
// up front: the steady state never faults a page in.
//
// Example:
//   absl::StatusOr<HostAllocation> block =
//       HostAllocation::Allocate(64 << 20, HostMemoryKind::kPageLocked);
//   if (!block.ok()) return block.status();  // ResourceExhausted names size
#ifndef PINWHEEL_PINNING_HOST_ALLOCATION_H_
#define PINWHEEL_PINNING_HOST_ALLOCATION_H_

#include <cstddef>
#include <string>

#include "absl/status/statusor.h"

namespace pinwheel {

enum class HostMemoryKind {
  kPageLocked,  // cudaHostAlloc: DMA straight from it, truly asynchronous
                // copies.
  kPageable,    // page-aligned host memory (host backend).
};

std::string HostMemoryKindName(HostMemoryKind kind);

// Thread-compatible. Move-only; the destructor frees the block.
class HostAllocation {
 public:
  // Returns a block of `bytes` (> 0) of `kind`, zero-filled.
  // ResourceExhausted (naming the size) when the memory cannot be had;
  // FailedPrecondition for kPageLocked in a build or on a machine without CUDA.
  // `cuda_device` >= 0: a kPageLocked block is allocated and later freed with
  // that GPU's context current (and the caller's current device restored),
  // so no context is created on another GPU (see Note [current device
  // without a stray context] in pinning/base/cuda_device_guard.h);
  // -1: with whatever context is current on the calling thread.
  [[nodiscard]] static absl::StatusOr<HostAllocation> Allocate(
      size_t bytes, HostMemoryKind kind, int cuda_device = -1);

  HostAllocation() = default;
  HostAllocation(HostAllocation&& other) noexcept;
  HostAllocation& operator=(HostAllocation&& other) noexcept;
  HostAllocation(const HostAllocation&) = delete;
  HostAllocation& operator=(const HostAllocation&) = delete;
  ~HostAllocation();

  std::byte* data() const { return data_; }
  size_t size() const { return size_; }
  HostMemoryKind kind() const { return kind_; }

 private:
  HostAllocation(std::byte* data, size_t size, HostMemoryKind kind,
                 int cuda_device)
      : data_(data), size_(size), kind_(kind), cuda_device_(cuda_device) {}
  void Free();

  std::byte* data_ = nullptr;
  size_t size_ = 0;
  HostMemoryKind kind_ = HostMemoryKind::kPageable;
  int cuda_device_ = -1;  // the GPU whose context frees a kPageLocked block
};

}  // namespace pinwheel

#endif  // PINWHEEL_PINNING_HOST_ALLOCATION_H_
