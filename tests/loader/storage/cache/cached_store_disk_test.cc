#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include "loader/storage/cache/cached_store.h"
#include "loader/storage/cache/internal/block_file.h"
#include "tests/loader/storage/cache/cache_test_support.h"

namespace pinwheel {
namespace {

using ::pinwheel::testing::BlockPlan;
using ::pinwheel::testing::ExpectedByte;
using ::pinwheel::testing::FakeObjectStore;
using ::pinwheel::testing::kBlock;
using ::pinwheel::testing::Matches;
using ::pinwheel::testing::Objects;
using ::pinwheel::testing::ReadBlock;
using ::pinwheel::testing::TempDir;
using ::pinwheel::testing::Url;

TEST(CachedStore, RestartWithTheSameDirectoryRefetchesOnlyWhatItDidNotHold) {
  const std::string dir = TempDir("restart");
  auto store = Objects(4, 4);
  std::vector<std::pair<int, int>> seq;
  for (int o = 0; o < 4; ++o) {
    for (int b = 0; b < 4; ++b) seq.push_back({o, b});
  }
  std::vector<std::byte> out;
  std::set<std::pair<std::string, int64_t>> held_at_kill;
  {
    // Read 4 blocks, let the prefetcher fill the budget ahead, then "kill".
    auto cache = CachedStore::Open(store, {.budget_bytes = 6 * kBlock,
                                           .block_bytes = kBlock,
                                           .directory = dir,
                                           .prefetch_threads = 2});
    ASSERT_TRUE(cache.ok()) << cache.status();
    ASSERT_TRUE((*cache)->AppendPlan(BlockPlan(4, seq)).ok());
    for (size_t i = 0; i < 4; ++i) {
      ASSERT_TRUE(ReadBlock(**cache, seq[i].first, seq[i].second, out).ok());
    }
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    // 4 read + 5 ahead: the block the reader is on stays (it may read more
    // of it), and is what Belady would evict next.
    while ((*cache)->Stats().bytes_fetched < 9 * kBlock &&
           absl::Now() < deadline) {
      absl::SleepFor(absl::Milliseconds(1));
    }
    ASSERT_EQ((*cache)->Stats().bytes_fetched, 9 * kBlock);
    for (const auto& [o, b] : seq) {
      if (std::filesystem::exists(
              absl::StrCat(dir, "/", internal::BlockFileName(Url(o), b)))) {
        held_at_kill.insert({Url(o), b * kBlock});
      }
    }
  }
  ASSERT_EQ(held_at_kill.size(), 6u);
  store->ClearCounts();
  auto cache = CachedStore::Open(store, {.budget_bytes = 6 * kBlock,
                                         .block_bytes = kBlock,
                                         .directory = dir,
                                         .prefetch = false});
  ASSERT_TRUE(cache.ok());
  EXPECT_EQ((*cache)->Stats().warm_blocks, 6);
  EXPECT_EQ((*cache)->Stats().warm_bytes, 6 * kBlock);
  // The resumed job's plan continues after the 4 blocks it consumed.
  const std::vector<std::pair<int, int>> rest(seq.begin() + 4, seq.end());
  ASSERT_TRUE((*cache)->AppendPlan(BlockPlan(4, rest)).ok());
  for (const auto& [o, b] : rest) {
    ASSERT_TRUE(ReadBlock(**cache, o, b, out).ok());
    ASSERT_TRUE(Matches(out, Url(o), b * kBlock));
  }
  for (const FakeObjectStore::Range& range : store->ranges()) {
    EXPECT_FALSE(held_at_kill.contains({range.url, range.offset}))
        << range.url << " at " << range.offset << " was fetched again";
  }
  // Exactly the rest of the epoch less what the cache held of it (5 of the
  // 6 blocks; the sixth was read before the kill).
  EXPECT_EQ(store->bytes(), (12 - 5) * kBlock);
  EXPECT_EQ((*cache)->Stats().hits, 5);
  std::filesystem::remove_all(dir);
}

TEST(CachedStore, DropsTornAndForeignFilesAndNeverServesThem) {
  const std::string dir = TempDir("corrupt");
  auto store = Objects(1, 4);
  std::vector<std::byte> out;
  {
    auto cache = CachedStore::Open(store, {.budget_bytes = 4 * kBlock,
                                           .block_bytes = kBlock,
                                           .directory = dir,
                                           .prefetch = false});
    ASSERT_TRUE(cache.ok());
    for (int b = 0; b < 4; ++b) ASSERT_TRUE(ReadBlock(**cache, 0, b, out).ok());
  }
  const auto path = [&](int b) {
    return absl::StrCat(dir, "/", internal::BlockFileName(Url(0), b));
  };
  {  // block 0: a payload byte flipped
    std::fstream f(path(0), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-1, std::ios::end);
    f.put('\x5a' ^ static_cast<char>(ExpectedByte(Url(0), kBlock - 1)));
  }
  std::filesystem::resize_file(path(1), 100);  // block 1: torn
  {  // block 2's name holding block 3's bytes: foreign
    std::filesystem::remove(path(2));
    std::filesystem::copy_file(path(3), path(2));
  }
  {
    std::ofstream(absl::StrCat(dir, "/0123456789abcdef-0.blk"))
        << std::string(200, 'x');  // foreign magic
    std::ofstream(absl::StrCat(path(3), ".tmp-1-0"))
        << "half";  // killed writer
    std::ofstream(absl::StrCat(dir, "/notes.txt")) << "not ours";
  }
  store->ClearCounts();
  auto cache = CachedStore::Open(store, {.budget_bytes = 4 * kBlock,
                                         .block_bytes = kBlock,
                                         .directory = dir,
                                         .prefetch = false});
  ASSERT_TRUE(cache.ok());
  const CacheStats stats = (*cache)->Stats();
  EXPECT_EQ(stats.warm_blocks, 1);      // block 3
  EXPECT_EQ(stats.dropped_torn, 3);     // flipped, truncated, temporary
  EXPECT_EQ(stats.dropped_foreign, 3);  // misnamed, bad magic, notes.txt
  EXPECT_TRUE(std::filesystem::exists(absl::StrCat(dir, "/notes.txt")));
  for (int b = 0; b < 4; ++b) {
    ASSERT_TRUE(ReadBlock(**cache, 0, b, out).ok());
    EXPECT_TRUE(Matches(out, Url(0), b * kBlock)) << "block " << b;
  }
  EXPECT_EQ(store->bytes(), 3 * kBlock);  // 0, 1, 2 fetched again
  std::filesystem::remove_all(dir);
}

TEST(CachedStore, DropsBlocksOfAnObjectWhoseSizeChanged) {
  const std::string dir = TempDir("stale");
  auto store = Objects(1, 4);
  std::vector<std::byte> out;
  {
    auto cache = CachedStore::Open(store, {.budget_bytes = 4 * kBlock,
                                           .block_bytes = kBlock,
                                           .directory = dir,
                                           .prefetch = false});
    ASSERT_TRUE(cache.ok());
    ASSERT_TRUE(ReadBlock(**cache, 0, 0, out).ok());
  }
  store->Put(Url(0), 5 * kBlock);
  store->ClearCounts();
  auto cache = CachedStore::Open(store, {.budget_bytes = 4 * kBlock,
                                         .block_bytes = kBlock,
                                         .directory = dir,
                                         .prefetch = false});
  ASSERT_TRUE(cache.ok());
  ASSERT_TRUE(ReadBlock(**cache, 0, 0, out).ok());
  EXPECT_EQ((*cache)->Stats().dropped_stale, 1);
  EXPECT_EQ(store->bytes(), kBlock);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace pinwheel
