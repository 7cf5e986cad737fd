// Tests of PinnedRing: options are validated, slots are distinct, aligned
// and disjoint, a slot is reused only after its copy_done fence, Acquire()
// gives back-pressure, Cancel()/Resume() work, and the counters add up.
#include "pinning/pinned_ring.h"

#include <cstdint>
#include <cstring>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <memory>
#include <set>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

#include "tests/support/async_acquire.h"
#include "tests/support/manual_fence.h"
#include "tests/support/notification.h"
#include "transfer/device.h"

namespace pinwheel {
namespace {

using ::pinwheel::testing_support::AsyncAcquire;
using ::pinwheel::testing_support::Eventually;
using ::pinwheel::testing_support::kHangLimit;

using ::pinwheel::testing_support::ManualFence;
using ::testing::HasSubstr;

constexpr absl::Duration kGrace =
    absl::Milliseconds(20);  // never decides a pass

std::unique_ptr<PinnedRing> MakeRing(int slots, size_t slot_bytes) {
  absl::StatusOr<std::unique_ptr<PinnedRing>> ring =
      PinnedRing::Create({.slots = slots,
                          .slot_bytes = slot_bytes,
                          .memory = HostMemoryKind::kPageable});
  EXPECT_TRUE(ring.ok()) << ring.status();
  return ring.ok() ? *std::move(ring) : nullptr;
}

TEST(PinnedRing, RejectsBadOptions) {
  struct Case {
    PinnedRingOptions options;
    const char* names;
  };
  const Case cases[] = {
      {{.slots = 0, .slot_bytes = 64, .memory = HostMemoryKind::kPageable},
       "slots = 0"},
      {{.slots = -1, .slot_bytes = 64, .memory = HostMemoryKind::kPageable},
       "slots = -1"},
      {{.slots = 1025, .slot_bytes = 64, .memory = HostMemoryKind::kPageable},
       "slots = 1025"},
      {{.slots = 4, .slot_bytes = 0, .memory = HostMemoryKind::kPageable},
       "slot_bytes = 0"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<std::unique_ptr<PinnedRing>> ring =
        PinnedRing::Create(c.options);
    EXPECT_EQ(ring.status().code(), absl::StatusCode::kInvalidArgument)
        << c.names;
    EXPECT_THAT(std::string(ring.status().message()), HasSubstr(c.names));
  }
  EXPECT_TRUE(
      PinnedRing::Create(
          {.slots = 1, .slot_bytes = 1, .memory = HostMemoryKind::kPageable})
          .ok());
  EXPECT_TRUE(
      PinnedRing::Create(
          {.slots = 1024, .slot_bytes = 1, .memory = HostMemoryKind::kPageable})
          .ok());
}

TEST(PinnedRing, RejectsOverflowingSize) {
  absl::StatusOr<std::unique_ptr<PinnedRing>> ring =
      PinnedRing::Create({.slots = 1024,
                          .slot_bytes = SIZE_MAX / 512,
                          .memory = HostMemoryKind::kPageable});
  EXPECT_FALSE(ring.ok());
  EXPECT_THAT(ring.status().code(),
              ::testing::AnyOf(absl::StatusCode::kInvalidArgument,
                               absl::StatusCode::kResourceExhausted));
}

TEST(PinnedRing, MoreThanTheMachineHasIsResourceExhausted) {
  // 1 PiB in 4 slots: no machine running this test has it.
  absl::StatusOr<std::unique_ptr<PinnedRing>> ring =
      PinnedRing::Create({.slots = 4,
                          .slot_bytes = size_t{1} << 48,
                          .memory = HostMemoryKind::kPageable});
  EXPECT_EQ(ring.status().code(), absl::StatusCode::kResourceExhausted)
      << ring.status();
  EXPECT_THAT(std::string(ring.status().message()), HasSubstr("4 slots"));
}

TEST(PinnedRing, PageLockedWithoutAGpuIsFailedPrecondition) {
  if (Device::CudaBackendBuilt() && Device::CudaDeviceCount() > 0) {
    GTEST_SKIP() << "a GPU is present: page-locked memory can be had";
  }
  absl::StatusOr<std::unique_ptr<PinnedRing>> ring = PinnedRing::Create(
      {.slots = 2, .slot_bytes = 4096, .memory = HostMemoryKind::kPageLocked});
  EXPECT_FALSE(ring.ok());
  if (!Device::CudaBackendBuilt()) {
    EXPECT_EQ(ring.status().code(), absl::StatusCode::kFailedPrecondition)
        << ring.status();
  }
}

TEST(PinnedRing, SlotsAreDistinctAlignedAndDisjoint) {
  constexpr int kSlots = 5;
  constexpr size_t kBytes = 5000;  // not a multiple of 4096
  std::unique_ptr<PinnedRing> ring = MakeRing(kSlots, kBytes);
  ASSERT_NE(ring, nullptr);
  EXPECT_EQ(ring->slots(), kSlots);
  EXPECT_EQ(ring->slot_bytes(), kBytes);
  EXPECT_EQ(ring->memory(), HostMemoryKind::kPageable);

  std::vector<PinnedRing::Slot> slots;
  std::set<int> indices;
  for (int i = 0; i < kSlots; ++i) {
    absl::StatusOr<PinnedRing::Slot> slot = ring->Acquire();
    ASSERT_TRUE(slot.ok()) << slot.status();
    EXPECT_TRUE(indices.insert(slot->index).second);
    EXPECT_EQ(slot->size, kBytes);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(slot->data) % 4096, 0u);
    EXPECT_EQ(ring->slot(slot->index).data, slot->data);
    slots.push_back(*slot);
  }
  for (size_t i = 0; i < slots.size(); ++i) {
    for (size_t j = i + 1; j < slots.size(); ++j) {
      const auto a = reinterpret_cast<uintptr_t>(slots[i].data);
      const auto b = reinterpret_cast<uintptr_t>(slots[j].data);
      EXPECT_TRUE(a + kBytes <= b || b + kBytes <= a)
          << "slots " << slots[i].index << " and " << slots[j].index
          << " overlap";
    }
  }
  // Every byte of every slot is usable and holds its own value.
  for (const PinnedRing::Slot& s : slots) {
    std::memset(s.data, s.index + 1, s.size);
  }
  for (const PinnedRing::Slot& s : slots) {
    for (size_t k = 0; k < s.size; ++k) {
      ASSERT_EQ(static_cast<int>(s.data[k]), s.index + 1) << "slot " << s.index;
    }
  }
}

TEST(PinnedRing, NewSlotsAreZeroFilled) {
  std::unique_ptr<PinnedRing> ring = MakeRing(2, 10000);
  ASSERT_NE(ring, nullptr);
  for (int i = 0; i < 2; ++i) {
    const PinnedRing::Slot s = ring->slot(i);
    for (size_t k = 0; k < s.size; ++k) ASSERT_EQ(s.data[k], std::byte{0});
  }
}

TEST(PinnedRing, AcquireBlocksWhileEverySlotIsInFlight) {
  std::unique_ptr<PinnedRing> ring = MakeRing(2, 64);
  ASSERT_NE(ring, nullptr);
  ASSERT_TRUE(ring->Acquire().ok());
  absl::StatusOr<PinnedRing::Slot> second = ring->Acquire();
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(ring->TryAcquire(), std::nullopt);

  AsyncAcquire waiter(ring.get());
  ASSERT_TRUE(Eventually([&] { return ring->stats().acquire_waits == 1; }));
  absl::SleepFor(kGrace);
  EXPECT_FALSE(waiter.returned())
      << "Acquire() returned with every slot in flight";
  ring->Recycle(second->index, nullptr);
  absl::StatusOr<PinnedRing::Slot> got = waiter.Result();
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->index, second->index);
}

TEST(PinnedRing, ReusesSlotOnlyAfterCopyDone) {
  std::unique_ptr<PinnedRing> ring = MakeRing(2, 64);
  ASSERT_NE(ring, nullptr);
  absl::StatusOr<PinnedRing::Slot> a = ring->Acquire();
  absl::StatusOr<PinnedRing::Slot> b = ring->Acquire();
  ASSERT_TRUE(a.ok() && b.ok());
  auto copy_done = std::make_shared<ManualFence>();
  ring->Recycle(a->index, copy_done);
  EXPECT_EQ(ring->TryAcquire(), std::nullopt)
      << "slot handed out before copy_done";

  AsyncAcquire waiter(ring.get());
  ASSERT_TRUE(Eventually([&] { return copy_done->waits() == 1; }));
  absl::SleepFor(kGrace);
  EXPECT_FALSE(waiter.returned()) << "slot handed out before copy_done";

  copy_done->Complete();
  absl::StatusOr<PinnedRing::Slot> got = waiter.Result();
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->index, a->index);
  EXPECT_EQ(got->data, a->data);
}

TEST(PinnedRing, TryAcquireNeverBlocksAndRespectsCopyDone) {
  std::unique_ptr<PinnedRing> ring = MakeRing(1, 64);
  ASSERT_NE(ring, nullptr);
  std::optional<PinnedRing::Slot> slot = ring->TryAcquire();
  ASSERT_TRUE(slot.has_value());
  EXPECT_EQ(ring->TryAcquire(), std::nullopt);
  auto copy_done = std::make_shared<ManualFence>();
  ring->Recycle(slot->index, copy_done);
  EXPECT_EQ(ring->TryAcquire(), std::nullopt);  // would hang if it waited
  EXPECT_EQ(copy_done->waits(), 0);
  copy_done->Complete();
  std::optional<PinnedRing::Slot> again = ring->TryAcquire();
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->index, slot->index);
}

TEST(PinnedRing, CancelWakesBlockedAcquireAndResumeReenables) {
  std::unique_ptr<PinnedRing> ring = MakeRing(1, 64);
  ASSERT_NE(ring, nullptr);
  absl::StatusOr<PinnedRing::Slot> held = ring->Acquire();
  ASSERT_TRUE(held.ok());
  {
    AsyncAcquire waiter(ring.get());
    ASSERT_TRUE(Eventually([&] { return ring->stats().acquire_waits == 1; }));
    ring->Cancel();
    EXPECT_EQ(waiter.Result().status().code(), absl::StatusCode::kCancelled);
  }
  ring->Cancel();  // idempotent
  EXPECT_EQ(ring->Acquire().status().code(), absl::StatusCode::kCancelled);
  ring->Recycle(held->index, nullptr);
  EXPECT_EQ(ring->TryAcquire(), std::nullopt)
      << "a cancelled ring hands out slots";

  ring->Resume();
  absl::StatusOr<PinnedRing::Slot> again = ring->Acquire();
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->index, held->index);
}

TEST(PinnedRing, AcquirePropagatesACopyDoneError) {
  std::unique_ptr<PinnedRing> ring = MakeRing(1, 64);
  ASSERT_NE(ring, nullptr);
  absl::StatusOr<PinnedRing::Slot> slot = ring->Acquire();
  ASSERT_TRUE(slot.ok());
  auto copy_done = std::make_shared<ManualFence>();
  copy_done->Fail(absl::UnavailableError("device lost"));
  ring->Recycle(slot->index, copy_done);
  absl::StatusOr<PinnedRing::Slot> got = ring->Acquire();
  EXPECT_EQ(got.status().code(), absl::StatusCode::kUnavailable)
      << got.status();
}

TEST(PinnedRing, StatsCountSlotsInFlightAcquiresAndBytes) {
  std::unique_ptr<PinnedRing> ring = MakeRing(3, 5000);
  ASSERT_NE(ring, nullptr);
  PinnedRingStats s = ring->stats();
  EXPECT_EQ(s.slots, 3);
  EXPECT_EQ(s.slots_in_flight, 0);
  EXPECT_EQ(s.acquires, 0);
  EXPECT_EQ(s.acquire_waits, 0);
  EXPECT_EQ(s.bytes_pinned, 3u * 8192u);  // each slot rounded to 4096

  absl::StatusOr<PinnedRing::Slot> a = ring->Acquire();
  absl::StatusOr<PinnedRing::Slot> b = ring->Acquire();
  ASSERT_TRUE(a.ok() && b.ok());
  auto copy_done = std::make_shared<ManualFence>();
  ring->Recycle(a->index, copy_done);
  s = ring->stats();
  EXPECT_EQ(s.slots_in_flight, 2) << "a slot behind copy_done is in flight";
  EXPECT_EQ(s.acquires, 2);

  ring->Recycle(b->index, nullptr);
  EXPECT_EQ(ring->stats().slots_in_flight, 1);
  ASSERT_TRUE(ring->Acquire().ok());
  ASSERT_TRUE(ring->Acquire().ok());
  {
    AsyncAcquire waiter(ring.get());  // the third waits on copy_done
    ASSERT_TRUE(Eventually([&] { return copy_done->waits() == 1; }));
    copy_done->Complete();
    ASSERT_TRUE(waiter.Result().ok());
  }
  {
    AsyncAcquire waiter(ring.get());  // none left: blocks
    ASSERT_TRUE(Eventually([&] { return ring->stats().acquire_waits >= 1; }));
    ring->Cancel();
    EXPECT_FALSE(waiter.Result().ok());
  }
  s = ring->stats();
  EXPECT_EQ(s.acquires, 5);
  EXPECT_EQ(s.slots_in_flight, 3);
  EXPECT_GE(s.acquire_waits, 1);
  EXPECT_EQ(s.bytes_pinned, 3u * 8192u);
}

TEST(PinnedRing, DestructorWaitsForCopyDoneBeforeFreeing) {
  std::unique_ptr<PinnedRing> ring = MakeRing(2, 64);
  ASSERT_NE(ring, nullptr);
  absl::StatusOr<PinnedRing::Slot> slot = ring->Acquire();
  ASSERT_TRUE(slot.ok());
  auto copy_done = std::make_shared<ManualFence>();
  ring->Recycle(slot->index, copy_done);

  ::pinwheel::testing_support::Notification destroyed;
  std::thread completer([&] {
    EXPECT_TRUE(Eventually([&] { return copy_done->waits() == 1; }));
    absl::SleepFor(kGrace);
    EXPECT_FALSE(destroyed.HasBeenNotified())
        << "the ring was freed while a copy could still read it";
    copy_done->Complete();
  });
  ring.reset();
  destroyed.Notify();
  completer.join();
}

TEST(PinnedRing, ManyProducersNeverShareASlot) {
  constexpr int kSlots = 3;
  std::unique_ptr<PinnedRing> ring = MakeRing(kSlots, 256);
  ASSERT_NE(ring, nullptr);
  std::atomic<int> errors{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int r = 0; r < 200; ++r) {
        absl::StatusOr<PinnedRing::Slot> slot = ring->Acquire();
        if (!slot.ok()) {
          errors.fetch_add(1);
          return;
        }
        // Write the whole slot, then check nobody else wrote it (TSan
        // reports any overlap as a race too).
        const int tag = t * 1000 + r;
        std::memset(slot->data, tag & 0xff, slot->size);
        for (size_t k = 0; k < slot->size; ++k) {
          if (static_cast<int>(slot->data[k]) != (tag & 0xff)) {
            errors.fetch_add(1);
            break;
          }
        }
        std::shared_ptr<ManualFence> copy_done;
        if (r % 2 == 1) {
          copy_done = std::make_shared<ManualFence>();
          copy_done->Complete();
        }
        ring->Recycle(slot->index, copy_done);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(ring->stats().acquires, 800);
}

// A ring that grows (allocate_on_first_use, Note [a ring that grows]).
std::unique_ptr<PinnedRing> MakeGrowingRing(int slots, int depth) {
  absl::StatusOr<std::unique_ptr<PinnedRing>> ring =
      PinnedRing::Create({.slots = slots,
                          .slot_bytes = 5000,  // 8192 a slot, page-rounded
                          .memory = HostMemoryKind::kPageable,
                          .allocate_on_first_use = true,
                          .depth = depth});
  EXPECT_TRUE(ring.ok()) << ring.status();
  return ring.ok() ? *std::move(ring) : nullptr;
}

TEST(PinnedRing, AGrowingRingAllocatesASlotOnlyWhenFirstAcquired) {
  std::unique_ptr<PinnedRing> ring = MakeGrowingRing(8, 2);
  ASSERT_NE(ring, nullptr);
  EXPECT_EQ(ring->stats().bytes_pinned, 0u);
  EXPECT_EQ(ring->slot(0).data, nullptr);
  absl::StatusOr<PinnedRing::Slot> a = ring->Acquire();
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->index, 0);
  ASSERT_NE(a->data, nullptr);
  std::memset(a->data, 1, a->size);  // writable, all of it
  EXPECT_EQ(ring->stats().bytes_pinned, 8192u);
  absl::StatusOr<PinnedRing::Slot> b = ring->Acquire();
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->index, 1);
  EXPECT_EQ(ring->stats().bytes_pinned, 2 * 8192u);
  // The depth is 2: a third waits, though six slots are unused.
  EXPECT_EQ(ring->TryAcquire(), std::nullopt);
  ring->Recycle(a->index, nullptr);
  absl::StatusOr<PinnedRing::Slot> again = ring->Acquire();
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->index, 0);  // reused, not a new one
  EXPECT_EQ(ring->stats().bytes_pinned, 2 * 8192u);
  EXPECT_EQ(ring->stats().depth, 2);
}

TEST(PinnedRing, AGrowingRingHandsOutMoreSlotsWhenItsDepthGrows) {
  std::unique_ptr<PinnedRing> ring = MakeGrowingRing(8, 1);
  ASSERT_NE(ring, nullptr);
  ASSERT_TRUE(ring->Acquire().ok());
  AsyncAcquire waiter(ring.get());
  absl::SleepFor(kGrace);
  EXPECT_FALSE(waiter.returned()) << "a slot above the depth handed out";
  ring->SetDepth(2);
  absl::StatusOr<PinnedRing::Slot> got = waiter.Result();
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->index, 1);
  EXPECT_EQ(ring->stats().bytes_pinned_peak, 2 * 8192u);
}

TEST(PinnedRing, AGrowingRingFreesIdleSlotsAboveALoweredDepth) {
  std::unique_ptr<PinnedRing> ring = MakeGrowingRing(4, 4);
  ASSERT_NE(ring, nullptr);
  std::vector<PinnedRing::Slot> slots;
  for (int i = 0; i < 4; ++i) slots.push_back(*ring->Acquire());
  EXPECT_EQ(ring->stats().bytes_pinned, 4 * 8192u);
  ring->SetDepth(2);
  // Slot 2 idle, slot 3 behind a copy not yet done: only slot 2 is freed.
  auto copy_done = std::make_shared<ManualFence>();
  ring->Recycle(2, nullptr);
  ring->Recycle(3, copy_done);
  EXPECT_EQ(ring->FreeIdleAboveDepth(), 8192u);
  EXPECT_EQ(ring->stats().bytes_pinned, 3 * 8192u);
  copy_done->Complete();
  EXPECT_EQ(ring->FreeIdleAboveDepth(), 8192u);
  EXPECT_EQ(ring->stats().bytes_pinned, 2 * 8192u);
  EXPECT_EQ(ring->stats().bytes_pinned_peak, 4 * 8192u);
  // Below the depth nothing moved; slots 2 and 3 stay out of reach.
  ring->Recycle(0, nullptr);
  EXPECT_EQ(ring->Acquire()->index, 0);
  EXPECT_EQ(ring->TryAcquire(), std::nullopt);
  // Raised again, a freed slot is allocated anew.
  ring->SetDepth(3);
  absl::StatusOr<PinnedRing::Slot> regrown = ring->Acquire();
  ASSERT_TRUE(regrown.ok()) << regrown.status();
  EXPECT_EQ(regrown->index, 2);
  EXPECT_NE(regrown->data, nullptr);
  EXPECT_EQ(ring->stats().bytes_pinned, 3 * 8192u);
}

TEST(PinnedRing, AGrowingPageLockedRingGivesSlotsUpAndPinsThemAgain_CUDA) {
  // The slots given up go to the ring's freeing thread (Note [slots freed
  // off the caller's thread] in pinning/deferred_free.h), which frees them
  // with GPU 0's context current; run under compute-sanitizer, a free that
  // failed there is an error in its summary.
  if (!Device::CudaBackendBuilt() || Device::CudaDeviceCount() == 0) {
    GTEST_SKIP() << "no CUDA device: page-locked memory cannot be had";
  }
  absl::StatusOr<std::unique_ptr<PinnedRing>> made =
      PinnedRing::Create({.slots = 4,
                          .slot_bytes = 5000,
                          .memory = HostMemoryKind::kPageLocked,
                          .cuda_device = 0,
                          .allocate_on_first_use = true,
                          .depth = 4});
  ASSERT_TRUE(made.ok()) << made.status();
  PinnedRing& ring = **made;
  for (int round = 0; round < 3; ++round) {
    std::vector<int> held;
    for (int i = 0; i < 4; ++i) {
      absl::StatusOr<PinnedRing::Slot> slot = ring.Acquire();
      ASSERT_TRUE(slot.ok()) << slot.status();
      std::memset(slot->data, round, slot->size);
      held.push_back(slot->index);
    }
    EXPECT_EQ(ring.stats().bytes_pinned, 4 * 8192u);
    for (const int index : held) ring.Recycle(index, nullptr);
    ring.SetDepth(1);
    EXPECT_EQ(ring.FreeIdleAboveDepth(), 3 * 8192u);
    EXPECT_EQ(ring.stats().bytes_pinned, 8192u);
    ring.SetDepth(4);
  }
}

TEST(PinnedRing, AGrowingRingRefusesADepthAboveItsSlots) {
  absl::StatusOr<std::unique_ptr<PinnedRing>> ring =
      PinnedRing::Create({.slots = 2,
                          .slot_bytes = 64,
                          .memory = HostMemoryKind::kPageable,
                          .allocate_on_first_use = true,
                          .depth = 3});
  ASSERT_FALSE(ring.ok());
  EXPECT_THAT(ring.status().message(), HasSubstr("depth = 3"));
}

}  // namespace
}  // namespace pinwheel
