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
  kPageLocked,  // cudaHostAlloc: DMA straight from it, truly asynchronous copies.
  kPageable,    // page-aligned host memory (host backend).
};

std::string HostMemoryKindName(HostMemoryKind kind);

// Thread-compatible. Move-only; the destructor frees the block.
class HostAllocation {
 public:
  // Returns a block of `bytes` (> 0) of `kind`, zero-filled.
  // ResourceExhausted (naming the size) when the memory cannot be had;
  // FailedPrecondition for kPageLocked in a build or on a machine without CUDA.
  [[nodiscard]] static absl::StatusOr<HostAllocation> Allocate(
      size_t bytes, HostMemoryKind kind);

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
  HostAllocation(std::byte* data, size_t size, HostMemoryKind kind)
      : data_(data), size_(size), kind_(kind) {}
  void Free();

  std::byte* data_ = nullptr;
  size_t size_ = 0;
  HostMemoryKind kind_ = HostMemoryKind::kPageable;
};

}  // namespace pinwheel

#endif  // PINWHEEL_PINNING_HOST_ALLOCATION_H_
