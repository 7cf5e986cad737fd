// Tests of DeviceBufferPool on the host backend: creation errors, buffers
// reused only after their `consumed` fence, Cancel(), and the accounting.
#include "transfer/device_buffer_pool.h"

#include <cstring>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

#include "tests/support/async_acquire.h"
#include "tests/support/manual_fence.h"
#include "tests/support/notification.h"
#include "transfer/device.h"
#include "transfer/static_device_buffer.h"

namespace pinwheel {
namespace {

using ::pinwheel::testing_support::AsyncAcquire;
using ::pinwheel::testing_support::Eventually;
using ::pinwheel::testing_support::kHangLimit;

using ::pinwheel::testing_support::ManualFence;
using ::testing::HasSubstr;

constexpr absl::Duration kGrace =
    absl::Milliseconds(20);  // never decides a pass

std::shared_ptr<DeviceBufferPool> MakePool(int buffers, size_t bytes) {
  absl::StatusOr<std::shared_ptr<DeviceBufferPool>> pool =
      DeviceBufferPool::Create(Device::Host(), buffers, bytes);
  EXPECT_TRUE(pool.ok()) << pool.status();
  return pool.ok() ? *pool : nullptr;
}

TEST(DeviceBufferPool, RejectsBadSizes) {
  struct Case {
    int buffers;
    size_t bytes;
    const char* mentions;
  };
  for (const Case& c :
       {Case{0, 64, "buffers = 0"}, Case{65, 64, "buffers = 65"},
        Case{-1, 64, "buffers = -1"}, Case{2, 0, "buffer_bytes = 0"}}) {
    absl::StatusOr<std::shared_ptr<DeviceBufferPool>> pool =
        DeviceBufferPool::Create(Device::Host(), c.buffers, c.bytes);
    EXPECT_EQ(pool.status().code(), absl::StatusCode::kInvalidArgument)
        << c.mentions;
    EXPECT_THAT(std::string(pool.status().message()), HasSubstr(c.mentions));
  }
  EXPECT_TRUE(DeviceBufferPool::Create(Device::Host(), 64, 1).ok());
}

TEST(DeviceBufferPool, MoreThanTheMachineHasIsResourceExhausted) {
  absl::StatusOr<std::shared_ptr<DeviceBufferPool>> pool =
      DeviceBufferPool::Create(Device::Host(), 2, size_t{1} << 50);
  EXPECT_EQ(pool.status().code(), absl::StatusCode::kResourceExhausted)
      << pool.status();
  EXPECT_THAT(std::string(pool.status().message()), HasSubstr("buffer 0"));
}

TEST(DeviceBufferPool, BuffersAreDistinctDisjointAndAccountedFor) {
  constexpr int kBuffers = 4;
  constexpr size_t kBytes = 3000;
  std::shared_ptr<DeviceBufferPool> pool = MakePool(kBuffers, kBytes);
  ASSERT_NE(pool, nullptr);
  EXPECT_EQ(pool->buffers(), kBuffers);
  EXPECT_EQ(pool->buffer_bytes(), kBytes);
  EXPECT_EQ(pool->bytes_allocated(), kBuffers * kBytes);
  EXPECT_EQ(pool->device(), Device::Host());

  std::set<int> indices;
  std::vector<DeviceBufferPool::Buffer> held;
  for (int i = 0; i < kBuffers; ++i) {
    absl::StatusOr<DeviceBufferPool::Buffer> b = pool->Acquire();
    ASSERT_TRUE(b.ok()) << b.status();
    EXPECT_TRUE(indices.insert(b->index).second);
    EXPECT_EQ(b->size, kBytes);
    ASSERT_NE(b->data, nullptr);
    std::memset(b->data, b->index + 1, kBytes);  // host memory on host backend
    held.push_back(*b);
  }
  for (const DeviceBufferPool::Buffer& b : held) {
    for (size_t k = 0; k < kBytes; ++k) {
      ASSERT_EQ(static_cast<int>(b.data[k]), b.index + 1) << "buffers overlap";
    }
  }
  EXPECT_EQ(pool->TryAcquire(), std::nullopt);
  FreeListStats s = pool->stats();
  EXPECT_EQ(s.entries, kBuffers);
  EXPECT_EQ(s.held, kBuffers);
  EXPECT_EQ(s.acquires, kBuffers);
  for (const DeviceBufferPool::Buffer& b : held)
    pool->Release(b.index, nullptr);
  EXPECT_EQ(pool->stats().held, 0);
}

TEST(DeviceBufferPool, AcquireBlocksUntilABufferIsReleased) {
  std::shared_ptr<DeviceBufferPool> pool = MakePool(1, 64);
  ASSERT_NE(pool, nullptr);
  absl::StatusOr<DeviceBufferPool::Buffer> held = pool->Acquire();
  ASSERT_TRUE(held.ok());
  AsyncAcquire waiter(pool.get());
  ASSERT_TRUE(Eventually([&] { return pool->stats().acquire_waits == 1; }));
  absl::SleepFor(kGrace);
  EXPECT_FALSE(waiter.returned());
  pool->Release(held->index, nullptr);
  absl::StatusOr<DeviceBufferPool::Buffer> got = waiter.Result();
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->index, held->index);
  EXPECT_EQ(got->data, held->data);
}

TEST(DeviceBufferPool, ReusesBufferOnlyAfterConsumed) {
  std::shared_ptr<DeviceBufferPool> pool = MakePool(2, 64);
  ASSERT_NE(pool, nullptr);
  absl::StatusOr<DeviceBufferPool::Buffer> a = pool->Acquire();
  absl::StatusOr<DeviceBufferPool::Buffer> b = pool->Acquire();
  ASSERT_TRUE(a.ok() && b.ok());
  auto consumed = std::make_shared<ManualFence>();
  pool->Release(a->index, consumed);
  EXPECT_EQ(pool->TryAcquire(), std::nullopt)
      << "buffer reused before consumed";

  AsyncAcquire waiter(pool.get());
  ASSERT_TRUE(Eventually([&] { return consumed->waits() == 1; }));
  absl::SleepFor(kGrace);
  EXPECT_FALSE(waiter.returned()) << "buffer reused before consumed";
  consumed->Complete();
  absl::StatusOr<DeviceBufferPool::Buffer> got = waiter.Result();
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->index, a->index);
}

TEST(DeviceBufferPool, TryAcquireRespectsConsumedWithoutBlocking) {
  std::shared_ptr<DeviceBufferPool> pool = MakePool(1, 64);
  ASSERT_NE(pool, nullptr);
  std::optional<DeviceBufferPool::Buffer> b = pool->TryAcquire();
  ASSERT_TRUE(b.has_value());
  auto consumed = std::make_shared<ManualFence>();
  pool->Release(b->index, consumed);
  EXPECT_EQ(pool->TryAcquire(), std::nullopt);
  EXPECT_EQ(consumed->waits(), 0);
  consumed->Complete();
  std::optional<DeviceBufferPool::Buffer> again = pool->TryAcquire();
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->index, b->index);
}

TEST(DeviceBufferPool, CancelWakesABlockedAcquire) {
  std::shared_ptr<DeviceBufferPool> pool = MakePool(1, 64);
  ASSERT_NE(pool, nullptr);
  absl::StatusOr<DeviceBufferPool::Buffer> held = pool->Acquire();
  ASSERT_TRUE(held.ok());
  AsyncAcquire waiter(pool.get());
  ASSERT_TRUE(Eventually([&] { return pool->stats().acquire_waits == 1; }));
  pool->Cancel();
  EXPECT_EQ(waiter.Result().status().code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(pool->Acquire().status().code(), absl::StatusCode::kCancelled);
  pool->Release(held->index, nullptr);
}

TEST(DeviceBufferPool, DestructorWaitsForConsumedBeforeFreeing) {
  std::shared_ptr<DeviceBufferPool> pool = MakePool(1, 64);
  ASSERT_NE(pool, nullptr);
  absl::StatusOr<DeviceBufferPool::Buffer> b = pool->Acquire();
  ASSERT_TRUE(b.ok());
  auto consumed = std::make_shared<ManualFence>();
  pool->Release(b->index, consumed);
  ::pinwheel::testing_support::Notification destroyed;
  std::thread completer([&] {
    EXPECT_TRUE(Eventually([&] { return consumed->waits() == 1; }));
    absl::SleepFor(kGrace);
    EXPECT_FALSE(destroyed.HasBeenNotified())
        << "buffers freed while a consumer could still read them";
    consumed->Complete();
  });
  pool.reset();
  destroyed.Notify();
  completer.join();
}

TEST(DeviceBufferPool, BorrowRefusesEachBadBufferNamingIt) {
  alignas(256) static std::byte memory[4][512];
  struct Case {
    const char* what;
    std::vector<StaticDeviceBuffer> buffers;
    const char* mentions;
  };
  const std::vector<Case> cases = {
      {"none", {}, "0 given: must be 1..64"},
      {"null",
       {{memory[0], 256}, {nullptr, 256}},
       "static device buffer 1 of 2 (0x0, 256 bytes): is a null pointer"},
      {"misaligned", {{memory[0] + 1, 256}}, "not aligned to 256 bytes"},
      {"too small",
       {{memory[0], 256}, {memory[1], 255}},
       "static device buffer 1 of 2"},
      {"overlapping",
       {{memory[0], 512}, {memory[0] + 0, 256}},
       "overlaps static device buffer 0"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<std::shared_ptr<DeviceBufferPool>> pool =
        DeviceBufferPool::Borrow(Device::Host(), c.buffers, 256);
    EXPECT_EQ(pool.status().code(), absl::StatusCode::kInvalidArgument)
        << c.what;
    EXPECT_THAT(std::string(pool.status().message()), HasSubstr(c.mentions))
        << c.what;
  }
  EXPECT_THAT(
      std::string(DeviceBufferPool::Borrow(
                      Device::Host(), {{memory[0], 256}, {memory[1], 255}}, 256)
                      .status()
                      .message()),
      HasSubstr("is too small: each batch needs 256 bytes"));
  EXPECT_EQ(DeviceBufferPool::Borrow(Device::Host(), {{memory[0], 256}}, 0)
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  // Adjacent, not overlapping: fine.
  EXPECT_TRUE(DeviceBufferPool::Borrow(
                  Device::Host(), {{memory[0], 512}, {memory[1], 512}}, 512)
                  .ok());
}

TEST(DeviceBufferPool, BorrowedBuffersRotateBehindFencesAndStayTheCallers) {
  alignas(256) static std::byte memory[3][256];
  absl::StatusOr<std::shared_ptr<DeviceBufferPool>> pool =
      DeviceBufferPool::Borrow(
          Device::Host(),
          {{memory[0], 256}, {memory[1], 256}, {memory[2], 256}}, 200);
  ASSERT_TRUE(pool.ok()) << pool.status();
  EXPECT_FALSE((*pool)->owns_buffers());
  EXPECT_EQ((*pool)->bytes_allocated(), 0u);
  EXPECT_EQ((*pool)->buffer_bytes(), 200u);
  std::set<std::byte*> seen;
  std::vector<DeviceBufferPool::Buffer> held;
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<DeviceBufferPool::Buffer> b = (*pool)->Acquire();
    ASSERT_TRUE(b.ok());
    EXPECT_EQ(b->data, memory[b->index]);
    EXPECT_EQ(b->size, 200u);
    seen.insert(b->data);
    held.push_back(*b);
  }
  EXPECT_EQ(seen.size(), 3u);
  EXPECT_FALSE((*pool)->TryAcquire().has_value());
  auto consumed = std::make_shared<ManualFence>();
  (*pool)->Release(held[1].index, consumed);
  EXPECT_FALSE((*pool)->TryAcquire().has_value())
      << "a borrowed buffer handed out before its fence completed";
  consumed->Complete();
  std::optional<DeviceBufferPool::Buffer> again = (*pool)->TryAcquire();
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->data, memory[1]);
  for (const DeviceBufferPool::Buffer& b : held) {
    if (b.index != 1) (*pool)->Release(b.index, nullptr);
  }
  (*pool)->Release(again->index, nullptr);
  pool->reset();  // frees nothing: the memory is the caller's (ASan checks)
  memory[0][0] = std::byte{1};
}

TEST(DeviceBufferPool, BorrowRefusesMemoryAnotherLivePoolBorrowed) {
  alignas(256) static std::byte memory[3][256];
  absl::StatusOr<std::shared_ptr<DeviceBufferPool>> first =
      DeviceBufferPool::Borrow(Device::Host(),
                               {{memory[0], 256}, {memory[1], 256}}, 256);
  ASSERT_TRUE(first.ok()) << first.status();
  absl::StatusOr<std::shared_ptr<DeviceBufferPool>> second =
      DeviceBufferPool::Borrow(Device::Host(),
                               {{memory[2], 256}, {memory[1], 256}}, 256);
  EXPECT_EQ(second.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(second.status().message()),
              HasSubstr("static device buffer 1 of 2"));
  // Refused, it registered nothing: memory[2] is still free.
  EXPECT_TRUE(
      DeviceBufferPool::Borrow(Device::Host(), {{memory[2], 256}}, 256).ok());
  first->reset();
  EXPECT_TRUE(DeviceBufferPool::Borrow(
                  Device::Host(), {{memory[2], 256}, {memory[1], 256}}, 256)
                  .ok());
}

}  // namespace
}  // namespace pinwheel
