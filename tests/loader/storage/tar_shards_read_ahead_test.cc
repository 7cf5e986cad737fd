// TarShardDataset through a store: a stream starts its next shard's first
// chunks before the current shard ends (Note [the next shard's first chunk]
// in loader/image/tar_shards.cc), and still fetches every byte once.
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "gtest/gtest.h"

#include "loader/image/tar_shards.h"
#include "loader/storage/local_file_store.h"
#include "loader/storage/object_store.h"
#include "pinning/base/mutex.h"
#include "tests/loader/image/tar_shard_samples.h"
#include "tests/support/case_dir.h"
#include "transfer/sample_layout.h"

namespace pinwheel {
namespace {

using ::pinwheel::testing::WriteLabelledShards;
using ::pinwheel::testing_support::CaseDir;

// Local files as a store that logs each range read: (file, offset).
class LoggingStore final : public ObjectStore {
 public:
  absl::StatusOr<int64_t> Size(std::string_view url) override {
    return files_.Size(url);
  }
  absl::Status Read(absl::Span<const RangeRead> reads) override {
    {
      ::pinwheel::internal::MutexLock lock(&mu_);
      for (const RangeRead& read : reads) {
        log_.emplace_back(std::string(read.url), read.offset);
        bytes_ += static_cast<int64_t>(read.destination.size());
      }
    }
    return files_.Read(reads);
  }
  bool Requested(const std::string& url, int64_t offset) const {
    ::pinwheel::internal::MutexLock lock(&mu_);
    return std::find(log_.begin(), log_.end(), std::pair(url, offset)) !=
           log_.end();
  }
  int64_t bytes() const {
    ::pinwheel::internal::MutexLock lock(&mu_);
    return bytes_;
  }

 private:
  LocalFileStore files_;
  mutable absl::Mutex mu_;
  std::vector<std::pair<std::string, int64_t>> log_;
  int64_t bytes_ = 0;
};

// Whether `store` is asked for `url` at `offset` within a few seconds (the
// chunk reads run on threads of their own).
bool RequestedSoon(const LoggingStore& store, const std::string& url,
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
  auto store = std::make_shared<LoggingStore>();
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
  auto store = std::make_shared<LoggingStore>();
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
