#include "loader/storage/cache/cached_store.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include "loader/storage/cache/internal/block_file.h"
#include "pinning/base/mutex.h"
#include "tests/loader/storage/cache/cache_test_support.h"
#include "tests/loader/storage/cache/offline_minimum.h"

namespace pinwheel {
namespace {

using ::pinwheel::testing::BlockPlan;
using ::pinwheel::testing::FakeObjectStore;
using ::pinwheel::testing::kBlock;
using ::pinwheel::testing::Matches;
using ::pinwheel::testing::Objects;
using ::pinwheel::testing::OfflineMinimumFetches;
using ::pinwheel::testing::ReadBlock;
using ::pinwheel::testing::Url;
using ::testing::HasSubstr;

TEST(CachedStore, BeladyFetchesTheOfflineMinimumOnSmallPlans) {
  std::mt19937 random(7);
  for (int trial = 0; trial < 24; ++trial) {
    const int objects = 3;
    const int blocks_each = 4;
    std::vector<std::pair<int, int>> seq;
    std::vector<int> ids;
    for (int t = 0; t < 40; ++t) {
      const int object = static_cast<int>(random() % objects);
      const int block = static_cast<int>(random() % blocks_each);
      seq.push_back({object, block});
      ids.push_back(object * blocks_each + block);
    }
    const size_t capacity = 2 + trial % 4;
    const int64_t minimum = OfflineMinimumFetches(ids, capacity) * kBlock;
    for (const bool prefetch : {false, true}) {
      auto store = Objects(objects, blocks_each);
      absl::StatusOr<std::shared_ptr<CachedStore>> cache = CachedStore::Open(
          store, {.budget_bytes = static_cast<int64_t>(capacity) * kBlock,
                  .block_bytes = kBlock,
                  .prefetch = prefetch,
                  .prefetch_threads = 3});
      ASSERT_TRUE(cache.ok()) << cache.status();
      ASSERT_TRUE((*cache)->AppendPlan(BlockPlan(objects, seq)).ok());
      std::vector<std::byte> out;
      for (const auto& [object, block] : seq) {
        ASSERT_TRUE(ReadBlock(**cache, object, block, out).ok());
        ASSERT_TRUE(Matches(out, Url(object), block * kBlock));
      }
      const CacheStats stats = (*cache)->Stats();
      EXPECT_EQ(stats.bytes_fetched, minimum)
          << "trial " << trial << " capacity " << capacity << " prefetch "
          << prefetch;
      EXPECT_EQ(store->bytes(), minimum);
      EXPECT_EQ(stats.unplanned_reads, 0);
    }
  }
}

TEST(CachedStore, LruFetchesMoreThanBeladyOnARepeatedScan) {
  // Two epochs scanning 8 blocks with room for 4: LRU refetches all.
  std::vector<std::pair<int, int>> seq;
  for (int e = 0; e < 2; ++e) {
    for (int b = 0; b < 8; ++b) seq.push_back({0, b});
  }
  int64_t fetched[2];
  for (const CachePolicy policy : {CachePolicy::kBelady, CachePolicy::kLru}) {
    auto store = Objects(1, 8);
    auto cache = CachedStore::Open(store, {.budget_bytes = 4 * kBlock,
                                           .block_bytes = kBlock,
                                           .policy = policy,
                                           .prefetch = false});
    ASSERT_TRUE(cache.ok());
    ASSERT_TRUE((*cache)->AppendPlan(BlockPlan(1, seq)).ok());
    std::vector<std::byte> out;
    for (const auto& [object, block] : seq) {
      ASSERT_TRUE(ReadBlock(**cache, object, block, out).ok());
    }
    fetched[policy == CachePolicy::kLru] = (*cache)->Stats().bytes_fetched;
  }
  EXPECT_EQ(fetched[1], 16 * kBlock);
  EXPECT_EQ(fetched[0], 12 * kBlock);  // 8 + the 4 it had to drop
}

TEST(CachedStore, ReadersThatDriftWithinTheWindowStillHit) {
  auto store = Objects(4, 8);
  std::vector<std::pair<int, int>> seq;
  for (int b = 0; b < 8; ++b) {
    for (int o = 0; o < 4; ++o) seq.push_back({o, b});
  }
  auto cache = CachedStore::Open(store, {.budget_bytes = 32 * kBlock,
                                         .block_bytes = kBlock,
                                         .prefetch_threads = 4,
                                         .plan_window_blocks = 8});
  ASSERT_TRUE(cache.ok());
  ASSERT_TRUE((*cache)->AppendPlan(BlockPlan(4, seq)).ok());
  // Wait for the prefetcher to bring in the whole plan.
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while ((*cache)->Stats().prefetches < 32 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  ASSERT_EQ((*cache)->Stats().prefetches, 32);
  // Read in the plan's order, reversed within every run of 6.
  std::vector<std::pair<int, int>> drifted = seq;
  for (size_t i = 0; i + 6 <= drifted.size(); i += 6) {
    std::reverse(drifted.begin() + static_cast<std::ptrdiff_t>(i),
                 drifted.begin() + static_cast<std::ptrdiff_t>(i + 6));
  }
  std::vector<std::byte> out;
  for (const auto& [object, block] : drifted) {
    ASSERT_TRUE(ReadBlock(**cache, object, block, out).ok());
    ASSERT_TRUE(Matches(out, Url(object), block * kBlock));
  }
  const CacheStats stats = (*cache)->Stats();
  EXPECT_EQ(stats.hits, 32);
  EXPECT_EQ(stats.misses, 0);
  EXPECT_EQ(stats.unplanned_reads, 0);
  EXPECT_EQ(stats.bytes_fetched, 32 * kBlock);
}

TEST(CachedStore, StreamsThatDriftFarApartStillFollowThePlan) {
  // Two streams dealt in turns; one reads all of its blocks before the
  // other starts. Each is within the window of its own list.
  auto store = Objects(2, 20);
  ReadPlan plan;
  plan.urls = {Url(0), Url(1)};
  for (int b = 0; b < 20; ++b) {
    for (int s = 0; s < 2; ++s) {
      plan.reads.push_back({s, s, 0, b * kBlock, kBlock});
    }
  }
  auto cache = CachedStore::Open(store, {.budget_bytes = 4 * kBlock,
                                         .block_bytes = kBlock,
                                         .prefetch = false,
                                         .plan_window_blocks = 2});
  ASSERT_TRUE(cache.ok());
  ASSERT_TRUE((*cache)->AppendPlan(plan).ok());
  std::vector<std::byte> out;
  for (const int s : {1, 0}) {
    for (int b = 0; b < 20; ++b) {
      ASSERT_TRUE(ReadBlock(**cache, s, b, out).ok());
    }
  }
  const CacheStats stats = (*cache)->Stats();
  EXPECT_EQ(stats.unplanned_reads, 0);
  EXPECT_EQ(stats.skipped_positions, 0);
  EXPECT_EQ(stats.bytes_fetched, 40 * kBlock);
}

TEST(CachedStore, ReadsBeyondTheWindowCountAsUnplanned) {
  auto store = Objects(1, 16);
  std::vector<std::pair<int, int>> seq;
  for (int b = 0; b < 16; ++b) seq.push_back({0, b});
  auto cache = CachedStore::Open(store, {.budget_bytes = 4 * kBlock,
                                         .block_bytes = kBlock,
                                         .prefetch = false,
                                         .plan_window_blocks = 2});
  ASSERT_TRUE(cache.ok());
  ASSERT_TRUE((*cache)->AppendPlan(BlockPlan(1, seq)).ok());
  std::vector<std::byte> out;
  ASSERT_TRUE(ReadBlock(**cache, 0, 10, out).ok());
  ASSERT_TRUE(Matches(out, Url(0), 10 * kBlock));
  EXPECT_EQ((*cache)->Stats().unplanned_reads, 1);
}

TEST(CachedStore, AnEpochSkippedFreesItsBlocksForTheNextOnesPrefetch) {
  // Epoch 0 plans object 0's 8 blocks, epoch 1 object 1's; room for 8.
  // The reader leaves epoch 0 after 2 blocks. Until the skip, the 6 unread
  // blocks of epoch 0 are still needed first, so the prefetcher may not
  // evict them for epoch 1; after it, all of epoch 1 is fetched ahead.
  std::vector<std::pair<int, int>> first, second;
  for (int b = 0; b < 8; ++b) {
    first.push_back({0, b});
    second.push_back({1, b});
  }
  auto store = Objects(2, 8);
  auto cache = CachedStore::Open(
      store, {.budget_bytes = 8 * kBlock, .block_bytes = kBlock});
  ASSERT_TRUE(cache.ok());
  ASSERT_TRUE((*cache)->AppendPlan(BlockPlan(2, first, 0)).ok());
  ASSERT_TRUE((*cache)->AppendPlan(BlockPlan(2, second, 1)).ok());
  // Epoch 0 prefetched whole first (room for it all), so that the count
  // below does not depend on the prefetcher's pace.
  const auto fetched_at_least = [&](int64_t bytes) {
    const absl::Time deadline = absl::Now() + absl::Seconds(60);
    while ((*cache)->Stats().bytes_fetched < bytes && absl::Now() < deadline) {
      absl::SleepFor(absl::Milliseconds(2));
    }
    return (*cache)->Stats().bytes_fetched >= bytes;
  };
  ASSERT_TRUE(fetched_at_least(8 * kBlock));
  std::vector<std::byte> out;
  ASSERT_TRUE(ReadBlock(**cache, 0, 0, out).ok());
  ASSERT_TRUE(ReadBlock(**cache, 0, 1, out).ok());
  (*cache)->SkipPlanBefore(1);
  EXPECT_EQ((*cache)->Stats().skipped_positions, 6);
  fetched_at_least(16 * kBlock);
  ASSERT_EQ((*cache)->Stats().bytes_fetched, 16 * kBlock)
      << "the prefetcher did not fetch epoch 1 in place of epoch 0's rest";
  const CacheStats before = (*cache)->Stats();
  for (int b = 0; b < 8; ++b) {
    ASSERT_TRUE(ReadBlock(**cache, 1, b, out).ok());
    ASSERT_TRUE(Matches(out, Url(1), b * kBlock));
  }
  const CacheStats after = (*cache)->Stats();
  EXPECT_EQ(after.hits - before.hits, 8);
  EXPECT_EQ(after.bytes_fetched, 16 * kBlock);
  EXPECT_EQ(after.unplanned_reads, 0);
}

TEST(CachedStore, ServesAndCountsReadsOutsideThePlan) {
  auto store = Objects(2, 8);
  auto cache = CachedStore::Open(
      store, {.budget_bytes = 3 * kBlock, .block_bytes = kBlock});
  ASSERT_TRUE(cache.ok());
  // Unaligned ranges across block boundaries, no plan at all.
  std::mt19937 random(3);
  for (int i = 0; i < 50; ++i) {
    const int object = static_cast<int>(random() % 2);
    const int64_t offset = random() % (7 * kBlock);
    std::vector<std::byte> out(static_cast<size_t>(random() % kBlock + 1));
    ASSERT_TRUE((*cache)
                    ->Read({{.url = Url(object),
                             .offset = offset,
                             .destination = absl::MakeSpan(out)}})
                    .ok());
    ASSERT_TRUE(Matches(out, Url(object), offset));
  }
  const CacheStats stats = (*cache)->Stats();
  EXPECT_GE(stats.unplanned_reads, 50);
  EXPECT_EQ(stats.hits + stats.misses, stats.unplanned_reads);
  EXPECT_LE(stats.peak_bytes, 3 * kBlock);
}

TEST(CachedStore, RespectsTheBudgetAtEveryMomentUnderConcurrentReaders) {
  auto store = Objects(8, 8);
  constexpr int64_t kBudget = 5 * kBlock;
  // Declared before the cache, so that it outlives the prefetchers.
  std::atomic<int64_t> worst{0};
  std::shared_ptr<CachedStore> cache;
  store->set_on_read([&] {
    if (cache == nullptr) return;
    const int64_t held = cache->held_bytes();
    int64_t seen = worst.load();
    while (held > seen && !worst.compare_exchange_weak(seen, held)) {
    }
  });
  // Eight streams, each scanning its own object twice.
  ReadPlan plan;
  for (int o = 0; o < 8; ++o) plan.urls.push_back(Url(o));
  for (int e = 0; e < 2; ++e) {
    for (int b = 0; b < 8; ++b) {
      for (int o = 0; o < 8; ++o) {
        plan.reads.push_back({o, o, e, b * kBlock, kBlock});
      }
    }
  }
  auto opened = CachedStore::Open(store, {.budget_bytes = kBudget,
                                          .block_bytes = kBlock,
                                          .prefetch_threads = 4,
                                          .plan_window_blocks = 64});
  ASSERT_TRUE(opened.ok());
  cache = *opened;
  ASSERT_TRUE(cache->AppendPlan(plan).ok());
  std::vector<std::thread> readers;
  std::atomic<int> failures{0};
  for (int o = 0; o < 8; ++o) {
    readers.emplace_back([&, o] {
      std::vector<std::byte> out(kBlock / 4);
      for (int e = 0; e < 2; ++e) {
        for (int b = 0; b < 8; ++b) {
          // A block in quarters, as a tar reader reads members.
          for (int q = 0; q < 4; ++q) {
            const int64_t offset = b * kBlock + q * (kBlock / 4);
            if (!cache
                     ->Read({{.url = Url(o),
                              .offset = offset,
                              .destination = absl::MakeSpan(out)}})
                     .ok() ||
                !Matches(out, Url(o), offset)) {
              failures.fetch_add(1);
            }
          }
        }
      }
    });
  }
  for (std::thread& t : readers) t.join();
  EXPECT_EQ(failures.load(), 0);
  const CacheStats stats = cache->Stats();
  EXPECT_LE(worst.load(), kBudget);
  EXPECT_LE(stats.peak_bytes, kBudget);
  EXPECT_LE(cache->held_bytes(), kBudget);
  store->set_on_read(nullptr);
}

TEST(CachedStore, PropagatesUnderlyingErrorsByNameAndNeverCachesThem) {
  auto store = Objects(2, 4);
  const absl::Status throttled = absl::UnavailableError(
      "GET mem://bucket/obj-1 bytes [0, 4096): HTTP 503 after 5 attempts");
  store->Fail(Url(1), throttled);
  for (const bool prefetch : {false, true}) {
    auto cache = CachedStore::Open(store, {.budget_bytes = 4 * kBlock,
                                           .block_bytes = kBlock,
                                           .prefetch = prefetch});
    ASSERT_TRUE(cache.ok());
    ASSERT_TRUE((*cache)->AppendPlan(BlockPlan(2, {{1, 0}, {0, 0}})).ok());
    std::vector<std::byte> out;
    const absl::Status status = ReadBlock(**cache, 1, 0, out);
    EXPECT_EQ(status, throttled);
    const absl::Status missing =
        (*cache)->Read({{.url = "mem://bucket/absent",
                         .offset = 0,
                         .destination = absl::MakeSpan(out)}});
    EXPECT_TRUE(absl::IsNotFound(missing));
    EXPECT_THAT(missing.message(), HasSubstr("mem://bucket/absent"));
  }
  // Once the store recovers, the same reads succeed: nothing was cached.
  store->Fail(Url(1), absl::OkStatus());
  auto cache = CachedStore::Open(
      store, {.budget_bytes = 4 * kBlock, .block_bytes = kBlock});
  ASSERT_TRUE(cache.ok());
  std::vector<std::byte> out;
  ASSERT_TRUE(ReadBlock(**cache, 1, 0, out).ok());
  EXPECT_TRUE(Matches(out, Url(1), 0));
}

TEST(CachedStore, ErrorsOnAFailedFetchAreNotKeptForTheNextRead) {
  auto store = Objects(1, 2);
  auto cache = CachedStore::Open(
      store,
      {.budget_bytes = 2 * kBlock, .block_bytes = kBlock, .prefetch = false});
  ASSERT_TRUE(cache.ok());
  std::vector<std::byte> out;
  ASSERT_TRUE(ReadBlock(**cache, 0, 0, out).ok());  // size now known
  store->Fail(Url(0), absl::DataLossError("body truncated"));
  EXPECT_TRUE(absl::IsDataLoss(ReadBlock(**cache, 0, 1, out)));
  store->Fail(Url(0), absl::OkStatus());
  ASSERT_TRUE(ReadBlock(**cache, 0, 1, out).ok());
  EXPECT_TRUE(Matches(out, Url(0), kBlock));
  EXPECT_EQ((*cache)->Stats().fetch_errors, 1);
}

TEST(CachedStore, ABlockAReaderWaitsForStaysUntilItsReaderCopiedIt) {
  // Note [a block a reader waits for]. One stream reads A (block 0), then
  // B (block 1) while A's read waits, both being prefetched; then C (block
  // 2); epoch 1 reads B, then A. Room for two blocks. Once both reads
  // consumed their positions, A's next use is after B's and B is the
  // stream's current block: when A's fetch ends, A is the prefetcher's
  // victim for C, and its reader has not copied it yet.
  auto store = Objects(1, 3);
  absl::Mutex mu;
  std::set<int64_t> held_back;  // offsets of the fetches waiting here
  bool release_a = false;
  bool release_rest = false;
  store->set_on_range([&](std::string_view, int64_t offset) {
    ::pinwheel::internal::MutexLock lock(&mu);
    held_back.insert(offset);
    ::pinwheel::internal::Await(mu, [&] {
      mu.AssertHeld();
      return offset == 0 ? release_a : release_rest;
    });
  });
  auto cache = CachedStore::Open(store, {.budget_bytes = 2 * kBlock,
                                         .block_bytes = kBlock,
                                         .prefetch_threads = 2});
  ASSERT_TRUE(cache.ok());
  ASSERT_TRUE(
      (*cache)->AppendPlan(BlockPlan(1, {{0, 0}, {0, 1}, {0, 2}}, 0)).ok());
  ASSERT_TRUE((*cache)->AppendPlan(BlockPlan(1, {{0, 1}, {0, 0}}, 1)).ok());
  const auto wait_for = [&](auto done) {
    const absl::Time deadline = absl::Now() + absl::Seconds(60);
    while (!done() && absl::Now() < deadline) {
      absl::SleepFor(absl::Milliseconds(1));
    }
    return done();
  };
  EXPECT_TRUE(wait_for([&] {
    ::pinwheel::internal::MutexLock lock(&mu);
    return held_back.size() == 2;
  })) << "A and B were not prefetched";
  std::vector<std::byte> a, b;
  absl::Status read_a, read_b;
  std::thread reader_a([&] { read_a = ReadBlock(**cache, 0, 0, a); });
  EXPECT_TRUE(wait_for([&] { return (*cache)->Stats().misses == 1; }));
  std::thread reader_b([&] { read_b = ReadBlock(**cache, 0, 1, b); });
  EXPECT_TRUE(wait_for([&] { return (*cache)->Stats().misses == 2; }));
  {
    ::pinwheel::internal::MutexLock lock(&mu);
    release_a = true;
  }
  reader_a.join();
  EXPECT_TRUE(read_a.ok()) << read_a;
  EXPECT_TRUE(Matches(a, Url(0), 0));
  int64_t fetches_of_a = 0;
  for (const FakeObjectStore::Range& range : store->ranges()) {
    fetches_of_a += range.offset == 0 ? 1 : 0;
  }
  {
    ::pinwheel::internal::MutexLock lock(&mu);
    release_rest = true;
  }
  reader_b.join();
  EXPECT_TRUE(read_b.ok()) << read_b;
  EXPECT_EQ(fetches_of_a, 1) << "A was evicted before its reader copied it";
  const CacheStats stats = (*cache)->Stats();
  EXPECT_EQ(stats.bytes_fetched_again, 0);
  EXPECT_EQ(stats.uncached_reads, 0);
}

TEST(CachedStore, RangesPastTheObjectsEndAreOutOfRange) {
  auto store = Objects(1, 2);
  auto cache = CachedStore::Open(
      store, {.budget_bytes = 2 * kBlock, .block_bytes = kBlock});
  ASSERT_TRUE(cache.ok());
  std::vector<std::byte> out(10);
  const absl::Status status =
      (*cache)->Read({{.url = Url(0),
                       .offset = 2 * kBlock - 5,
                       .destination = absl::MakeSpan(out)}});
  EXPECT_TRUE(absl::IsOutOfRange(status));
  EXPECT_THAT(status.message(), HasSubstr("8192 bytes"));
}

TEST(CachedStore, RejectsBadOptionsNamingTheField) {
  auto store = Objects(1, 1);
  const auto message = [&](const CacheOptions& options) {
    return std::string(CachedStore::Open(store, options).status().message());
  };
  EXPECT_THAT(message({.block_bytes = 100}), HasSubstr("block_bytes"));
  EXPECT_THAT(message({.budget_bytes = 10, .block_bytes = kBlock}),
              HasSubstr("budget_bytes"));
  EXPECT_THAT(message({.prefetch_threads = 0}), HasSubstr("prefetch_threads"));
  EXPECT_THAT(message({.plan_window_blocks = 0}),
              HasSubstr("plan_window_blocks"));
  EXPECT_FALSE(CachedStore::Open(nullptr, {}).ok());
  auto cache = CachedStore::Open(store, {.block_bytes = kBlock});
  ASSERT_TRUE(cache.ok());
  ReadPlan bad;
  bad.urls = {Url(0)};
  bad.reads.push_back({3, 0, 0, 0, 10});
  EXPECT_THAT((*cache)->AppendPlan(bad).message(), HasSubstr("read 0"));
}

}  // namespace
}  // namespace pinwheel
