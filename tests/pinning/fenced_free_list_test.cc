// Tests of FencedFreeList: entries are handed out once, an entry released
// behind a fence is reused only after the fence completes, Cancel() wakes
// waiters, and the counters add up.
#include "pinning/fenced_free_list.h"

#include <atomic>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <memory>
#include <optional>
#include <set>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

#include "tests/support/async_acquire.h"
#include "tests/support/manual_fence.h"
#include "tests/support/notification.h"

namespace pinwheel {
namespace {

using ::pinwheel::testing_support::AsyncAcquire;
using ::pinwheel::testing_support::Eventually;
using ::pinwheel::testing_support::kHangLimit;

using ::pinwheel::testing_support::ManualFence;

// Generous bound against hangs; never a timing assertion.
// How long a buggy implementation is given to return early from a call that
// must block. Passing never depends on it.
constexpr absl::Duration kGrace = absl::Milliseconds(20);

TEST(FencedFreeList, HandsOutEveryEntryExactlyOnce) {
  FencedFreeList list(4);
  std::set<int> seen;
  for (int i = 0; i < 4; ++i) {
    absl::StatusOr<int> entry = list.Acquire();
    ASSERT_TRUE(entry.ok()) << entry.status();
    EXPECT_GE(*entry, 0);
    EXPECT_LT(*entry, 4);
    EXPECT_TRUE(seen.insert(*entry).second) << "entry " << *entry << " twice";
  }
  EXPECT_EQ(list.InUse(), 4);
  EXPECT_EQ(list.TryAcquire(), std::nullopt);
}

TEST(FencedFreeList, AcquireBlocksUntilAnEntryIsReleased) {
  FencedFreeList list(2);
  ASSERT_TRUE(list.Acquire().ok());
  absl::StatusOr<int> second = list.Acquire();
  ASSERT_TRUE(second.ok());

  AsyncAcquire waiter(&list);
  ASSERT_TRUE(Eventually([&] { return list.stats().acquire_waits == 1; }));
  absl::SleepFor(kGrace);
  EXPECT_FALSE(waiter.returned()) << "Acquire() returned with no entry free";

  list.Release(*second, nullptr);
  absl::StatusOr<int> got = waiter.Result();
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, *second);
}

TEST(FencedFreeList, ReleaseWithoutFenceIsReusableAtOnce) {
  FencedFreeList list(1);
  absl::StatusOr<int> entry = list.Acquire();
  ASSERT_TRUE(entry.ok());
  list.Release(*entry, nullptr);
  EXPECT_EQ(list.InUse(), 0);
  EXPECT_EQ(list.TryAcquire(), std::optional<int>(*entry));
}

TEST(FencedFreeList, ReusesEntryOnlyAfterItsFenceCompletes) {
  FencedFreeList list(2);
  absl::StatusOr<int> a = list.Acquire();
  absl::StatusOr<int> b = list.Acquire();
  ASSERT_TRUE(a.ok() && b.ok());
  auto fence = std::make_shared<ManualFence>();
  list.Release(*b, fence);
  EXPECT_EQ(list.InUse(), 2) << "an entry behind a fence is still in use";

  AsyncAcquire waiter(&list);
  // The waiter has taken the fenced entry and is waiting on its fence.
  ASSERT_TRUE(Eventually([&] { return fence->waits() == 1; }));
  absl::SleepFor(kGrace);
  EXPECT_FALSE(waiter.returned()) << "entry handed out before its fence";

  fence->Complete();
  absl::StatusOr<int> got = waiter.Result();
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, *b);
}

TEST(FencedFreeList, AcquireTakesFencedEntriesInReleaseOrder) {
  FencedFreeList list(3);
  std::vector<int> entries;
  for (int i = 0; i < 3; ++i) entries.push_back(*list.Acquire());
  auto f0 = std::make_shared<ManualFence>();
  auto f1 = std::make_shared<ManualFence>();
  auto f2 = std::make_shared<ManualFence>();
  list.Release(entries[2], f0);
  list.Release(entries[0], f1);
  list.Release(entries[1], f2);
  f0->Complete();
  f1->Complete();
  f2->Complete();
  EXPECT_EQ(*list.Acquire(), entries[2]);
  EXPECT_EQ(*list.Acquire(), entries[0]);
  EXPECT_EQ(*list.Acquire(), entries[1]);
}

TEST(FencedFreeList, TryAcquireNeverWaitsOnAnIncompleteFence) {
  FencedFreeList list(1);
  absl::StatusOr<int> entry = list.Acquire();
  ASSERT_TRUE(entry.ok());
  auto fence = std::make_shared<ManualFence>();
  list.Release(*entry, fence);

  // Would hang here if TryAcquire waited on the fence.
  EXPECT_EQ(list.TryAcquire(), std::nullopt);
  EXPECT_EQ(list.TryAcquire(), std::nullopt);
  EXPECT_EQ(fence->waits(), 0);
  EXPECT_GE(fence->queries(), 1);
  // The failed attempts did not lose the entry.
  EXPECT_EQ(list.stats().fenced, 1);
  EXPECT_EQ(list.stats().held, 0);

  fence->Complete();
  EXPECT_EQ(list.TryAcquire(), std::optional<int>(*entry));
  EXPECT_EQ(list.TryAcquire(), std::nullopt);
}

TEST(FencedFreeList, CancelWakesABlockedAcquireWithCancelled) {
  FencedFreeList list(1);
  ASSERT_TRUE(list.Acquire().ok());
  AsyncAcquire waiter(&list);
  ASSERT_TRUE(Eventually([&] { return list.stats().acquire_waits == 1; }));

  list.Cancel();
  absl::StatusOr<int> got = waiter.Result();
  EXPECT_EQ(got.status().code(), absl::StatusCode::kCancelled) << got.status();
}

TEST(FencedFreeList, CancelFailsLaterCallsUntilResume) {
  FencedFreeList list(2);
  list.Cancel();
  list.Cancel();  // idempotent
  EXPECT_EQ(list.Acquire().status().code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(list.TryAcquire(), std::nullopt);

  list.Resume();
  absl::StatusOr<int> entry = list.Acquire();
  ASSERT_TRUE(entry.ok()) << entry.status();
  EXPECT_TRUE(list.TryAcquire().has_value());
  // Blocks again after Resume (rather than failing at once).
  AsyncAcquire waiter(&list);
  ASSERT_TRUE(Eventually([&] { return list.stats().acquire_waits == 1; }));
  absl::SleepFor(kGrace);
  EXPECT_FALSE(waiter.returned());
  list.Release(*entry, nullptr);
  EXPECT_TRUE(waiter.Result().ok());
}

// The header: "Wakes every blocked Acquire() with Cancelled". An Acquire()
// blocked on the fence of the oldest fenced entry is blocked too.
TEST(FencedFreeList, CancelWakesAnAcquireWaitingOnAFence) {
  FencedFreeList list(1);
  absl::StatusOr<int> entry = list.Acquire();
  ASSERT_TRUE(entry.ok());
  auto fence = std::make_shared<ManualFence>();
  list.Release(*entry, fence);
  AsyncAcquire waiter(&list);
  ASSERT_TRUE(Eventually([&] { return fence->waits() == 1; }));

  list.Cancel();
  ::pinwheel::testing_support::Notification woken;
  std::thread watch([&] {
    // Unblock a waiter that Cancel() did not wake, so the test ends.
    if (!woken.WaitForNotificationWithTimeout(absl::Seconds(5))) {
      fence->Complete();
    }
  });
  absl::StatusOr<int> got = waiter.Result();
  woken.Notify();
  watch.join();
  EXPECT_EQ(got.status().code(), absl::StatusCode::kCancelled)
      << "Acquire() blocked on a fence was not woken by Cancel(); got "
      << (got.ok() ? absl::OkStatus() : got.status());
}

TEST(FencedFreeList, AcquirePropagatesTheFenceError) {
  FencedFreeList list(1);
  absl::StatusOr<int> entry = list.Acquire();
  ASSERT_TRUE(entry.ok());
  auto fence = std::make_shared<ManualFence>();
  fence->Fail(absl::DataLossError("copy failed"));
  list.Release(*entry, fence);

  absl::StatusOr<int> got = list.Acquire();
  EXPECT_EQ(got.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(got.status().message()),
              ::testing::HasSubstr("copy failed"));
}

TEST(FencedFreeList, WaitForFencesFreesEveryFencedEntry) {
  FencedFreeList list(3);
  std::vector<int> entries;
  for (int i = 0; i < 3; ++i) entries.push_back(*list.Acquire());
  auto ok_fence = std::make_shared<ManualFence>();
  auto bad_fence = std::make_shared<ManualFence>();
  list.Release(entries[0], ok_fence);
  list.Release(entries[1], bad_fence);
  bad_fence->Fail(absl::InternalError("boom"));

  ::pinwheel::testing_support::Notification waited;
  std::thread completer([&] {
    // WaitForFences must still be waiting: ok_fence is not complete.
    EXPECT_TRUE(Eventually([&] { return ok_fence->waits() == 1; }));
    EXPECT_FALSE(waited.HasBeenNotified());
    ok_fence->Complete();
  });
  absl::Status status = list.WaitForFences();
  waited.Notify();
  completer.join();
  EXPECT_EQ(status.code(), absl::StatusCode::kInternal) << status;
  EXPECT_EQ(list.InUse(), 1);  // entries[2] is still held
  EXPECT_EQ(list.stats().fenced, 0);
}

TEST(FencedFreeList, StatsCountAcquiresWaitsHeldAndFenced) {
  FencedFreeList list(2);
  FreeListStats s = list.stats();
  EXPECT_EQ(s.entries, 2);
  EXPECT_EQ(s.held, 0);
  EXPECT_EQ(s.fenced, 0);
  EXPECT_EQ(s.acquires, 0);
  EXPECT_EQ(s.acquire_waits, 0);

  absl::StatusOr<int> a = list.Acquire();
  absl::StatusOr<int> b = list.Acquire();
  ASSERT_TRUE(a.ok() && b.ok());
  auto fence = std::make_shared<ManualFence>();
  list.Release(*a, fence);
  s = list.stats();
  EXPECT_EQ(s.held, 1);
  EXPECT_EQ(s.fenced, 1);
  EXPECT_EQ(s.acquires, 2);
  EXPECT_EQ(s.acquire_waits, 0);

  {
    AsyncAcquire waiter(&list);  // takes a (behind the fence)
    ASSERT_TRUE(Eventually([&] { return fence->waits() == 1; }));
    fence->Complete();
    ASSERT_TRUE(waiter.Result().ok());
  }
  {
    AsyncAcquire waiter(&list);  // nothing free: blocks
    ASSERT_TRUE(Eventually([&] { return list.stats().acquire_waits >= 1; }));
    list.Release(*b, nullptr);
    ASSERT_TRUE(waiter.Result().ok());
  }
  s = list.stats();
  EXPECT_EQ(s.acquires, 4);
  EXPECT_EQ(s.held, 2);
  EXPECT_EQ(s.fenced, 0);
  EXPECT_GE(s.acquire_waits, 1);
  EXPECT_GT(s.time_waited, absl::ZeroDuration());
}

// acquire_waits: "acquires that had to block". An Acquire() that blocks on
// the fence of a released entry (the steady state of a full ring: every slot
// behind its copy_done) had to block.
TEST(FencedFreeList, CountsAnAcquireBlockedOnAFenceAsAWait) {
  FencedFreeList list(1);
  absl::StatusOr<int> entry = list.Acquire();
  ASSERT_TRUE(entry.ok());
  auto fence = std::make_shared<ManualFence>();
  list.Release(*entry, fence);
  AsyncAcquire waiter(&list);
  ASSERT_TRUE(Eventually([&] { return fence->waits() == 1; }));
  fence->Complete();
  ASSERT_TRUE(waiter.Result().ok());
  EXPECT_EQ(list.stats().acquire_waits, 1);
}

// fence_time_waited: the part of the wait spent on a fence (for the ring,
// the copy out of a slot), apart from a wait that found every entry held
// (slots being filled), so that the auto-tuner can tell the two apart.
TEST(FencedFreeList, SplitsTheWaitOnAFenceFromAWaitForAHeldEntry) {
  FencedFreeList list(1);
  absl::StatusOr<int> entry = list.Acquire();
  ASSERT_TRUE(entry.ok());
  {
    AsyncAcquire waiter(&list);  // the one entry is held: blocks
    ASSERT_TRUE(Eventually([&] { return list.stats().acquire_waits == 1; }));
    absl::SleepFor(absl::Milliseconds(20));
    list.Release(*entry, nullptr);
    entry = waiter.Result();
    ASSERT_TRUE(entry.ok());
  }
  FreeListStats s = list.stats();
  EXPECT_GE(s.time_waited, absl::Milliseconds(20));
  EXPECT_EQ(s.fence_time_waited, absl::ZeroDuration());
  const absl::Duration held_wait = s.time_waited;
  auto fence = std::make_shared<ManualFence>();
  list.Release(*entry, fence);
  {
    AsyncAcquire waiter(&list);  // takes the entry, waits on its fence
    ASSERT_TRUE(Eventually([&] { return fence->waits() == 1; }));
    absl::SleepFor(absl::Milliseconds(20));
    fence->Complete();
    ASSERT_TRUE(waiter.Result().ok());
  }
  s = list.stats();
  EXPECT_GE(s.fence_time_waited, absl::Milliseconds(20));
  EXPECT_EQ(s.time_waited, held_wait + s.fence_time_waited);
}

TEST(FencedFreeList, ConcurrentUsersNeverShareAnEntry) {
  constexpr int kEntries = 3;
  constexpr int kThreads = 6;
  constexpr int kRounds = 300;
  FencedFreeList list(kEntries);
  std::vector<std::atomic<int>> owners(kEntries);
  for (auto& o : owners) o.store(0);
  std::atomic<int> errors{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int r = 0; r < kRounds; ++r) {
        std::optional<int> entry;
        if ((r + t) % 3 == 0) {
          entry = list.TryAcquire();
          if (!entry) continue;
        } else {
          absl::StatusOr<int> got = list.Acquire();
          if (!got.ok()) {
            errors.fetch_add(1);
            return;
          }
          entry = *got;
        }
        if (owners[*entry].fetch_add(1) != 0) errors.fetch_add(1);
        owners[*entry].fetch_sub(1);
        std::shared_ptr<ManualFence> fence;
        if (r % 2 == 0) {
          fence = std::make_shared<ManualFence>();
          fence->Complete();
        }
        list.Release(*entry, fence);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(list.stats().held, 0);
  EXPECT_TRUE(list.WaitForFences().ok());
  EXPECT_EQ(list.InUse(), 0);
}

}  // namespace
}  // namespace pinwheel
