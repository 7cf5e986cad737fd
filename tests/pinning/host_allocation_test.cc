// Tests of HostAllocation: pageable blocks are zero-filled and page
// aligned, moves transfer ownership, impossible sizes and page-locked memory
// without CUDA fail with the documented codes.
#include "pinning/host_allocation.h"

#include <cstdint>
#include <cstring>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <thread>
#include <unistd.h>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

#include "tests/support/skip_without_gpu.h"
#include "transfer/device.h"

#ifdef PINWHEEL_HAVE_CUDA
#include "pinning/base/cuda_device_guard.h"
#endif

namespace pinwheel {
namespace {

using ::testing::HasSubstr;

bool HasGpu() {
  return Device::CudaBackendBuilt() && Device::CudaDeviceCount() > 0;
}

TEST(HostAllocation, PageableIsZeroFilledAndPageAligned) {
  constexpr size_t kBytes = 3 * 4096 + 17;
  absl::StatusOr<HostAllocation> block =
      HostAllocation::Allocate(kBytes, HostMemoryKind::kPageable);
  ASSERT_TRUE(block.ok()) << block.status();
  ASSERT_NE(block->data(), nullptr);
  EXPECT_EQ(block->size(), kBytes);
  EXPECT_EQ(block->kind(), HostMemoryKind::kPageable);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(block->data()) % 4096, 0u);
  for (size_t i = 0; i < kBytes; ++i) {
    ASSERT_EQ(block->data()[i], std::byte{0}) << "byte " << i;
  }
  std::memset(block->data(), 0xab, kBytes);  // all of it is writable
}

TEST(HostAllocation, ZeroBytesIsInvalidArgument) {
  absl::StatusOr<HostAllocation> block =
      HostAllocation::Allocate(0, HostMemoryKind::kPageable);
  EXPECT_EQ(block.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(HostAllocation, DefaultIsEmpty) {
  HostAllocation block;
  EXPECT_EQ(block.data(), nullptr);
  EXPECT_EQ(block.size(), 0u);
}

TEST(HostAllocation, MoveConstructorTransfersOwnership) {
  absl::StatusOr<HostAllocation> block =
      HostAllocation::Allocate(4096, HostMemoryKind::kPageable);
  ASSERT_TRUE(block.ok());
  std::byte* const data = block->data();
  data[0] = std::byte{7};
  HostAllocation moved(*std::move(block));
  EXPECT_EQ(moved.data(), data);
  EXPECT_EQ(moved.size(), 4096u);
  EXPECT_EQ(moved.data()[0], std::byte{7});
  EXPECT_EQ(block->data(), nullptr);  // NOLINT(bugprone-use-after-move)
  EXPECT_EQ(block->size(), 0u);
}

TEST(HostAllocation, MoveAssignmentFreesTheOldBlockAndTakesTheNew) {
  absl::StatusOr<HostAllocation> a =
      HostAllocation::Allocate(4096, HostMemoryKind::kPageable);
  absl::StatusOr<HostAllocation> b =
      HostAllocation::Allocate(8192, HostMemoryKind::kPageable);
  ASSERT_TRUE(a.ok() && b.ok());
  std::byte* const b_data = b->data();
  *a = std::move(*b);  // a's old block is freed (ASan reports a leak if not)
  EXPECT_EQ(a->data(), b_data);
  EXPECT_EQ(a->size(), 8192u);
  EXPECT_EQ(b->data(), nullptr);  // NOLINT(bugprone-use-after-move)

  HostAllocation& self = *a;
  *a = std::move(self);  // self-move keeps the block
  EXPECT_EQ(a->data(), b_data);
  EXPECT_EQ(a->size(), 8192u);
}

TEST(HostAllocation, MoreThanPhysicalMemoryIsResourceExhaustedNamingTheSize) {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page_size = sysconf(_SC_PAGESIZE);
  ASSERT_GT(pages, 0);
  ASSERT_GT(page_size, 0);
  const size_t bytes =
      static_cast<size_t>(pages) * static_cast<size_t>(page_size) * 2;
  absl::StatusOr<HostAllocation> block =
      HostAllocation::Allocate(bytes, HostMemoryKind::kPageable);
  EXPECT_EQ(block.status().code(), absl::StatusCode::kResourceExhausted)
      << block.status();
  EXPECT_THAT(std::string(block.status().message()),
              HasSubstr(absl::StrCat(bytes)));
}

TEST(HostAllocation, PageLockedWithoutCudaIsFailedPrecondition) {
  if (Device::CudaBackendBuilt()) {
    GTEST_SKIP() << "built with CUDA: see PageLockedIsZeroFilledAndAligned";
  }
  absl::StatusOr<HostAllocation> block =
      HostAllocation::Allocate(4096, HostMemoryKind::kPageLocked);
  EXPECT_EQ(block.status().code(), absl::StatusCode::kFailedPrecondition)
      << block.status();
  EXPECT_THAT(std::string(block.status().message()), HasSubstr("CUDA"));
}

TEST(HostAllocation, PageLockedWithoutAGpuFails) {
  if (HasGpu()) GTEST_SKIP() << "a GPU is present";
  absl::StatusOr<HostAllocation> block =
      HostAllocation::Allocate(4096, HostMemoryKind::kPageLocked);
  EXPECT_FALSE(block.ok());
  EXPECT_NE(block.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(HostAllocation, PageLockedIsZeroFilledAndAligned_CUDA) {
  SKIP_WITHOUT_GPU("GPU case");
  constexpr size_t kBytes = 2 * 4096 + 1;
  absl::StatusOr<HostAllocation> block =
      HostAllocation::Allocate(kBytes, HostMemoryKind::kPageLocked);
  ASSERT_TRUE(block.ok()) << block.status();
  EXPECT_EQ(block->kind(), HostMemoryKind::kPageLocked);
  EXPECT_EQ(block->size(), kBytes);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(block->data()) % 4096, 0u);
  for (size_t i = 0; i < kBytes; ++i) ASSERT_EQ(block->data()[i], std::byte{0});
}

// Runs here (no GPU): the device guard's failure is reported, not a crash.
TEST(HostAllocation, PageLockedForAGpuWithoutOneFailsNamingTheDevice) {
  if (HasGpu()) GTEST_SKIP() << "a GPU is present";
  absl::StatusOr<HostAllocation> block = HostAllocation::Allocate(
      4096, HostMemoryKind::kPageLocked, /*cuda_device=*/1);
  EXPECT_FALSE(block.ok());
  if (Device::CudaBackendBuilt()) {
    EXPECT_THAT(std::string(block.status().message()), HasSubstr("cuda:1"));
  }
}

// Allocated and freed with the device's context pushed and popped: a thread
// that had no current context has none afterwards (cudaHostAlloc on such a
// thread used to create and keep device 0's context).
TEST(HostAllocation, PageLockedForAGpuLeavesTheThreadWithoutAContext_CUDA) {
  SKIP_WITHOUT_GPU("GPU case");
#ifdef PINWHEEL_HAVE_CUDA
  const int last = Device::CudaDeviceCount() - 1;
  std::thread fresh([last] {
    ASSERT_FALSE(*internal::CudaThreadHasCurrentContext());
    {
      absl::StatusOr<HostAllocation> block =
          HostAllocation::Allocate(1 << 20, HostMemoryKind::kPageLocked, last);
      ASSERT_TRUE(block.ok()) << block.status();
      EXPECT_FALSE(*internal::CudaThreadHasCurrentContext())
          << "after Allocate";
    }
    EXPECT_FALSE(*internal::CudaThreadHasCurrentContext()) << "after the free";
  });
  fresh.join();
#endif
}

TEST(HostAllocation, KindNames) {
  EXPECT_EQ(HostMemoryKindName(HostMemoryKind::kPageLocked), "page-locked");
  EXPECT_EQ(HostMemoryKindName(HostMemoryKind::kPageable), "pageable");
}

}  // namespace
}  // namespace pinwheel
