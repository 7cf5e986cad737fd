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

// A cache directory of the case's own (removed after it) and the objects
// behind it: each case opens a cache on it, drops it, and opens another on
// the same directory, as a job that restarts would.
class CachedStoreOnDisk : public ::testing::Test {
 protected:
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // A cache of `budget_blocks` blocks in dir_, without prefetch.
  CacheOptions DiskOptions(int budget_blocks) const {
    return {.budget_bytes = budget_blocks * kBlock,
            .block_bytes = kBlock,
            .directory = dir_,
            .prefetch = false};
  }
  // Returns a cache over store_ with `options`, or null (and the case fails)
  // when it does not open.
  std::shared_ptr<CachedStore> OpenCache(const CacheOptions& options) const {
    absl::StatusOr<std::shared_ptr<CachedStore>> cache =
        CachedStore::Open(store_, options);
    EXPECT_TRUE(cache.ok()) << cache.status();
    return cache.ok() ? *std::move(cache) : nullptr;
  }
  // The path of block `block` of object `object` in dir_.
  std::string BlockPath(int object, int block) const {
    return absl::StrCat(dir_, "/", internal::BlockFileName(Url(object), block));
  }

  const std::string dir_ =
      TempDir(::testing::UnitTest::GetInstance()->current_test_info()->name());
  std::shared_ptr<FakeObjectStore> store_;
};

TEST_F(CachedStoreOnDisk,
       RestartWithTheSameDirectoryRefetchesOnlyWhatItDidNotHold) {
  store_ = Objects(4, 4);
  std::vector<std::pair<int, int>> seq;
  for (int o = 0; o < 4; ++o) {
    for (int b = 0; b < 4; ++b) seq.push_back({o, b});
  }
  std::vector<std::byte> out;
  std::set<std::pair<std::string, int64_t>> held_at_kill;
  {
    // Read 4 blocks, let the prefetcher fill the budget ahead, then "kill".
    CacheOptions prefetching = DiskOptions(6);
    prefetching.prefetch = true;
    prefetching.prefetch_threads = 2;
    std::shared_ptr<CachedStore> cache = OpenCache(prefetching);
    ASSERT_NE(cache, nullptr);
    ASSERT_TRUE(cache->AppendPlan(BlockPlan(4, seq)).ok());
    for (size_t i = 0; i < 4; ++i) {
      ASSERT_TRUE(ReadBlock(*cache, seq[i].first, seq[i].second, out).ok());
    }
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    // 4 read + 5 ahead: the block the reader is on stays (it may read more
    // of it), and is what Belady would evict next.
    while (cache->Stats().bytes_fetched < 9 * kBlock &&
           absl::Now() < deadline) {
      absl::SleepFor(absl::Milliseconds(1));
    }
    ASSERT_EQ(cache->Stats().bytes_fetched, 9 * kBlock);
    for (const auto& [o, b] : seq) {
      if (std::filesystem::exists(BlockPath(o, b))) {
        held_at_kill.insert({Url(o), b * kBlock});
      }
    }
  }
  ASSERT_EQ(held_at_kill.size(), 6u);
  store_->ClearCounts();
  std::shared_ptr<CachedStore> cache = OpenCache(DiskOptions(6));
  ASSERT_NE(cache, nullptr);
  EXPECT_EQ(cache->Stats().warm_blocks, 6);
  EXPECT_EQ(cache->Stats().warm_bytes, 6 * kBlock);
  // The resumed job's plan continues after the 4 blocks it consumed.
  const std::vector<std::pair<int, int>> rest(seq.begin() + 4, seq.end());
  ASSERT_TRUE(cache->AppendPlan(BlockPlan(4, rest)).ok());
  for (const auto& [o, b] : rest) {
    ASSERT_TRUE(ReadBlock(*cache, o, b, out).ok());
    ASSERT_TRUE(Matches(out, Url(o), b * kBlock));
  }
  for (const FakeObjectStore::Range& range : store_->ranges()) {
    EXPECT_FALSE(held_at_kill.contains({range.url, range.offset}))
        << range.url << " at " << range.offset << " was fetched again";
  }
  // Exactly the rest of the epoch less what the cache held of it (5 of the
  // 6 blocks; the sixth was read before the kill).
  EXPECT_EQ(store_->bytes(), (12 - 5) * kBlock);
  EXPECT_EQ(cache->Stats().hits, 5);
}

TEST_F(CachedStoreOnDisk, DropsTornAndForeignFilesAndNeverServesThem) {
  store_ = Objects(1, 4);
  std::vector<std::byte> out;
  {
    std::shared_ptr<CachedStore> cache = OpenCache(DiskOptions(4));
    ASSERT_NE(cache, nullptr);
    for (int b = 0; b < 4; ++b) ASSERT_TRUE(ReadBlock(*cache, 0, b, out).ok());
  }
  const auto path = [&](int b) { return BlockPath(0, b); };
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
    std::ofstream(absl::StrCat(dir_, "/0123456789abcdef-0.blk"))
        << std::string(200, 'x');  // foreign magic
    std::ofstream(absl::StrCat(path(3), ".tmp-1-0"))
        << "half";  // killed writer
    std::ofstream(absl::StrCat(dir_, "/notes.txt")) << "not ours";
  }
  store_->ClearCounts();
  std::shared_ptr<CachedStore> cache = OpenCache(DiskOptions(4));
  ASSERT_NE(cache, nullptr);
  const CacheStats stats = cache->Stats();
  EXPECT_EQ(stats.warm_blocks, 1);      // block 3
  EXPECT_EQ(stats.dropped_torn, 3);     // flipped, truncated, temporary
  EXPECT_EQ(stats.dropped_foreign, 3);  // misnamed, bad magic, notes.txt
  EXPECT_TRUE(std::filesystem::exists(absl::StrCat(dir_, "/notes.txt")));
  for (int b = 0; b < 4; ++b) {
    ASSERT_TRUE(ReadBlock(*cache, 0, b, out).ok());
    EXPECT_TRUE(Matches(out, Url(0), b * kBlock)) << "block " << b;
  }
  EXPECT_EQ(store_->bytes(), 3 * kBlock);  // 0, 1, 2 fetched again
}

TEST_F(CachedStoreOnDisk, DropsBlocksOfAnObjectWhoseSizeChanged) {
  store_ = Objects(1, 4);
  std::vector<std::byte> out;
  {
    std::shared_ptr<CachedStore> cache = OpenCache(DiskOptions(4));
    ASSERT_NE(cache, nullptr);
    ASSERT_TRUE(ReadBlock(*cache, 0, 0, out).ok());
  }
  store_->Put(Url(0), 5 * kBlock);
  store_->ClearCounts();
  std::shared_ptr<CachedStore> cache = OpenCache(DiskOptions(4));
  ASSERT_NE(cache, nullptr);
  ASSERT_TRUE(ReadBlock(*cache, 0, 0, out).ok());
  EXPECT_EQ(cache->Stats().dropped_stale, 1);
  EXPECT_EQ(store_->bytes(), kBlock);
}

}  // namespace
}  // namespace pinwheel
