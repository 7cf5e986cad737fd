// TarShardDataset through a store: a stream starts its next shard's first
// chunks before the current shard ends (Note [the next shard's first chunk]
// in loader/image/tar_shards.cc), and still fetches every byte once.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gtest/gtest.h"

#include "loader/image/tar_shards.h"
#include "tests/loader/image/tar_shard_samples.h"
#include "tests/loader/storage/cache/counting_store.h"
#include "tests/support/case_dir.h"
#include "transfer/sample_layout.h"

namespace pinwheel {
namespace {

using ::pinwheel::testing::CountingStore;
using ::pinwheel::testing::WriteLabelledShards;
using ::pinwheel::testing_support::CaseDir;

// Whether `store` is asked for `url` at `offset` within a few seconds (the
// chunk reads run on threads of their own).
bool RequestedSoon(const CountingStore& store, const std::string& url,
                   int64_t offset) {
  for (int i = 0; i < 500; ++i) {
    if (store.Requested(url, offset)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

TEST(TarShardsReadAhead, TheNextShardsFirstChunkIsOnItsWayBeforeTheShardEnds) {
  const CaseDir dir("tar_read_ahead_");
  constexpr int kPerShard = 4;
  const std::vector<std::string> paths =
      WriteLabelledShards(dir.path(), 3, kPerShard);
  auto store = std::make_shared<CountingStore>();
  absl::StatusOr<std::shared_ptr<TarShardDataset>> ds =
      TarShardDataset::Open(paths, {.transform = {.size = 16},
                                    .store = store,
                                    .read_chunk_bytes = 4096,
                                    .read_ahead_chunks = 1});
  ASSERT_TRUE(ds.ok()) << ds.status();
  auto stream = (*ds)->OpenShard(0, 1, /*epoch=*/0);
  ASSERT_TRUE(stream.ok()) << stream.status();
  absl::StatusOr<BatchLayout> layout = BatchLayout::Create((*ds)->layout(), 1);
  ASSERT_TRUE(layout.ok());
  std::vector<std::byte> slot(layout->slot_bytes());

  int64_t total = 0;
  for (const std::string& path : paths) {
    total += static_cast<int64_t>(std::filesystem::file_size(path));
  }
  // Shard 0 read to its last sample, and no further: shard 1's first chunk
  // was asked for before the stream came to it.
  for (int i = 0; i < kPerShard; ++i) {
    SampleView view(*layout, slot.data(), 0, 0);
    absl::StatusOr<bool> more = (*stream)->Next(view);
    ASSERT_TRUE(more.ok() && *more) << i << ": " << more.status();
    EXPECT_EQ(view.field_as<int64_t>(1)[0], i);
  }
  EXPECT_TRUE(RequestedSoon(*store, paths[1], 0));
  EXPECT_FALSE(store->Requested(paths[2], 0))
      << "only the next shard is read ahead";
  // The rest, in order, each byte fetched once.
  for (int i = kPerShard; i < 3 * kPerShard; ++i) {
    SampleView view(*layout, slot.data(), 0, 0);
    absl::StatusOr<bool> more = (*stream)->Next(view);
    ASSERT_TRUE(more.ok() && *more) << i << ": " << more.status();
    EXPECT_EQ(view.field_as<int64_t>(1)[0], i);
  }
  SampleView view(*layout, slot.data(), 0, 0);
  absl::StatusOr<bool> more = (*stream)->Next(view);
  ASSERT_TRUE(more.ok());
  EXPECT_FALSE(*more);
  EXPECT_EQ(store->bytes(), total) << "a chunk was fetched twice";
}

TEST(TarShardsReadAhead, AStreamRestoredElsewhereDropsTheShardItReadAhead) {
  const CaseDir dir("tar_read_ahead_restore_");
  const std::vector<std::string> paths = WriteLabelledShards(dir.path(), 3, 2);
  auto store = std::make_shared<CountingStore>();
  absl::StatusOr<std::shared_ptr<TarShardDataset>> ds = TarShardDataset::Open(
      paths,
      {.transform = {.size = 16}, .store = store, .read_chunk_bytes = 4096});
  ASSERT_TRUE(ds.ok()) << ds.status();
  auto stream = (*ds)->OpenShard(0, 1, 0);
  ASSERT_TRUE(stream.ok());
  absl::StatusOr<BatchLayout> layout = BatchLayout::Create((*ds)->layout(), 1);
  ASSERT_TRUE(layout.ok());
  std::vector<std::byte> slot(layout->slot_bytes());
  SampleView first(*layout, slot.data(), 0, 0);
  ASSERT_TRUE((*stream)->Next(first).ok());  // shard 1 read ahead from here
  // Back to shard 2's start: its samples, not shard 1's.
  ASSERT_TRUE((*stream)->RestoreState("2 0").ok());
  for (int label : {4, 5}) {
    SampleView view(*layout, slot.data(), 0, 0);
    absl::StatusOr<bool> more = (*stream)->Next(view);
    ASSERT_TRUE(more.ok() && *more) << more.status();
    EXPECT_EQ(view.field_as<int64_t>(1)[0], label);
  }
}

}  // namespace
}  // namespace pinwheel
