#include "loader/storage/cache/read_plan.h"

#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include "loader/record_file.h"
#include "loader/sampler.h"
#include "tests/loader/storage/cache/fake_object_store.h"

namespace pinwheel {
namespace {

using ::pinwheel::testing::FakeObjectStore;
using ::testing::HasSubstr;

std::vector<std::string> Shards(FakeObjectStore& store, int n) {
  std::vector<std::string> urls;
  for (int i = 0; i < n; ++i) {
    urls.push_back(absl::StrCat("s3://bucket/shard-", i, ".tar"));
    store.Put(urls.back(), 10000 + 1000 * i);
  }
  return urls;
}

TEST(ReadPlan, TarShardsReadEveryFileWholeOnceAnEpochOverAllRanks) {
  FakeObjectStore store;
  const std::vector<std::string> urls = Shards(store, 11);
  const TarShardOptions options{.seed = 5, .shuffle_shards = true};
  std::map<std::pair<int64_t, int32_t>, int64_t> covered;  // (epoch, url)
  for (int rank = 0; rank < 2; ++rank) {
    absl::StatusOr<ReadPlan> plan = PlanTarShards(
        urls, options, store, {.rank = rank, .world_size = 2, .workers = 3},
        {.first_epoch = 4, .epochs = 2}, 4096);
    ASSERT_TRUE(plan.ok()) << plan.status();
    std::map<std::pair<int64_t, int32_t>, int64_t> next_offset;
    for (const PlannedRead& read : plan->reads) {
      ASSERT_GE(read.epoch, 4);
      ASSERT_LE(read.epoch, 5);
      ASSERT_LT(read.stream, 3);
      // Each file is read from start to end, in order, by one stream.
      int64_t& at = next_offset[{read.epoch, read.url}];
      EXPECT_EQ(read.offset, at);
      at += read.length;
      covered[{read.epoch, read.url}] += read.length;
    }
  }
  for (int64_t epoch : {4, 5}) {
    for (int32_t url = 0; url < 11; ++url) {
      EXPECT_EQ((covered[{epoch, url}]), 10000 + 1000 * url)
          << "epoch " << epoch << " file " << url;
    }
  }
}

TEST(ReadPlan, TarStreamsFollowTheDatasetsOrderAndTakeTurns) {
  FakeObjectStore store;
  const std::vector<std::string> urls = Shards(store, 12);
  const TarShardOptions options{.seed = 9, .shuffle_shards = true};
  absl::StatusOr<ReadPlan> plan = PlanTarShards(
      urls, options, store, {.rank = 1, .world_size = 2, .workers = 2},
      {.first_epoch = 0, .epochs = 2}, 1 << 20);
  ASSERT_TRUE(plan.ok());
  // One read per file (files are smaller than the interleave), streams
  // alternating, each in the order its OpenShard() would read.
  std::map<std::pair<int64_t, int32_t>, std::vector<int64_t>> files;
  for (size_t i = 0; i < plan->reads.size(); ++i) {
    const PlannedRead& read = plan->reads[i];
    EXPECT_EQ(read.stream, static_cast<int32_t>(i % 2));
    files[{read.epoch, read.stream}].push_back(read.url);
  }
  for (int64_t epoch : {0, 1}) {
    for (int stream : {0, 1}) {
      EXPECT_EQ((files[{epoch, stream}]),
                TarShardStreamFiles(12, options, 2 + stream, 4, epoch));
    }
  }
  EXPECT_NE((files[{0, 0}]), (files[{1, 0}]));  // reshuffled every epoch
}

TEST(ReadPlan, TarResumeStartsEachStreamAtItsSavedFileAndOffset) {
  FakeObjectStore store;
  const std::vector<std::string> urls = Shards(store, 8);
  const TarShardOptions options{.seed = 1, .shuffle_shards = true};
  LoaderCheckpoint checkpoint;
  checkpoint.kind = LoaderCheckpoint::Kind::kIterable;
  checkpoint.epoch = 3;
  checkpoint.num_shards = 2;
  checkpoint.shard_states = {std::string("1 2048"), std::nullopt};
  absl::StatusOr<ReadPlan> plan = PlanTarShards(
      urls, options, store, {.rank = 0, .world_size = 1, .workers = 2},
      {.first_epoch = 3, .epochs = 1, .resume = &checkpoint}, 1 << 20);
  ASSERT_TRUE(plan.ok()) << plan.status();
  const std::vector<int64_t> order0 = TarShardStreamFiles(8, options, 0, 2, 3);
  const std::vector<int64_t> order1 = TarShardStreamFiles(8, options, 1, 2, 3);
  std::vector<PlannedRead> stream0;
  int64_t stream1_files = 0;
  for (const PlannedRead& read : plan->reads) {
    if (read.stream == 0) stream0.push_back(read);
    if (read.stream == 1) ++stream1_files;
  }
  ASSERT_EQ(stream0.size(), order0.size() - 1);
  EXPECT_EQ(stream0[0].url, order0[1]);
  EXPECT_EQ(stream0[0].offset, 2048);
  EXPECT_EQ(stream1_files, static_cast<int64_t>(order1.size()));
}

TEST(ReadPlan, TarRejectsACheckpointThatDoesNotFit) {
  FakeObjectStore store;
  const std::vector<std::string> urls = Shards(store, 4);
  LoaderCheckpoint checkpoint;
  checkpoint.kind = LoaderCheckpoint::Kind::kIterable;
  checkpoint.num_shards = 4;
  checkpoint.shard_states = {std::nullopt, std::nullopt};
  const ProcessShare share{.rank = 0, .world_size = 1, .workers = 2};
  EXPECT_THAT(PlanTarShards(urls, {}, store, share, {.resume = &checkpoint})
                  .status()
                  .message(),
              HasSubstr("4 shards"));
  checkpoint.num_shards = 2;
  checkpoint.shard_states = {std::string("x y"), std::nullopt};
  EXPECT_THAT(PlanTarShards(urls, {}, store, share, {.resume = &checkpoint})
                  .status()
                  .message(),
              HasSubstr("\"x y\""));
  checkpoint.epoch = 2;
  EXPECT_THAT(PlanTarShards(urls, {}, store, share, {.resume = &checkpoint})
                  .status()
                  .message(),
              HasSubstr("epoch 2"));
  EXPECT_THAT(PlanTarShards(urls, {}, store, {.rank = 2, .world_size = 2}, {})
                  .status()
                  .message(),
              HasSubstr("rank 2"));
  store.Fail(urls[3], absl::NotFoundError("no s3://bucket/shard-3.tar"));
  EXPECT_TRUE(
      absl::IsNotFound(PlanTarShards(urls, {}, store, {}, {}).status()));
}

// Serves local files (a record file the test writes).
class LocalFiles final : public ObjectStore {
 public:
  absl::StatusOr<int64_t> Size(std::string_view url) override {
    std::error_code error;
    const auto size = std::filesystem::file_size(std::string(url), error);
    if (error) return absl::NotFoundError(std::string(url));
    return static_cast<int64_t>(size);
  }
  absl::Status Read(absl::Span<const RangeRead> reads) override {
    for (const RangeRead& read : reads) {
      std::ifstream file(read.url, std::ios::binary);
      file.seekg(read.offset);
      file.read(reinterpret_cast<char*>(read.destination.data()),
                static_cast<std::streamsize>(read.destination.size()));
      if (!file) return absl::OutOfRangeError(read.url);
    }
    return absl::OkStatus();
  }
};

std::string WriteRecords(int count) {
  const std::string path =
      absl::StrCat(::testing::TempDir(), "/plan_records_", ::getpid(), ".pwr");
  absl::StatusOr<SampleLayout> layout = SampleLayout::Create(
      {{.name = "x", .dtype = DType::kUInt8, .shape = {100}}});
  EXPECT_TRUE(layout.ok());
  absl::StatusOr<RecordFileWriter> writer =
      RecordFileWriter::Create(path, *layout);
  EXPECT_TRUE(writer.ok());
  std::vector<std::byte> record(100);
  for (int i = 0; i < count; ++i) {
    EXPECT_TRUE(writer->AppendRaw(record).ok());
  }
  EXPECT_TRUE(writer->Close().ok());
  return path;
}

TEST(ReadPlan, RecordFileReadsTheSamplersRecordsAtTheirOffsets) {
  const std::string path = WriteRecords(50);
  LocalFiles store;
  absl::StatusOr<std::shared_ptr<RecordFileDataset>> dataset =
      RecordFileDataset::Open(path);
  ASSERT_TRUE(dataset.ok());
  const int64_t header =
      static_cast<int64_t>(std::filesystem::file_size(path)) - 50 * 100;
  absl::StatusOr<ReadPlan> plan = PlanRecordFile(
      path, store, {.rank = 1, .world_size = 3}, {.shuffle = true, .seed = 11},
      {.first_epoch = 2, .epochs = 2});
  ASSERT_TRUE(plan.ok()) << plan.status();
  std::vector<int64_t> planned;
  for (const PlannedRead& read : plan->reads) {
    for (int64_t at = read.offset; at < read.offset + read.length; at += 100) {
      planned.push_back((at - header) / 100);
    }
  }
  auto sampler = DistributedSampler::Create(50, 1, 3, true, 11, false);
  ASSERT_TRUE(sampler.ok());
  std::vector<int64_t> expected = (*sampler)->Indices(2);
  const std::vector<int64_t> next = (*sampler)->Indices(3);
  expected.insert(expected.end(), next.begin(), next.end());
  EXPECT_EQ(planned, expected);
  // Unshuffled, a rank's records are one read per run of adjacent ones.
  plan = PlanRecordFile(path, store, {}, {}, {.epochs = 1});
  ASSERT_TRUE(plan.ok());
  ASSERT_EQ(plan->reads.size(), 1u);
  EXPECT_EQ(plan->reads[0].offset, header);
  EXPECT_EQ(plan->reads[0].length, 5000);
  std::filesystem::remove(path);
}

TEST(ReadPlan, RecordFileResumesFromTheCheckpointsPosition) {
  const std::string path = WriteRecords(40);
  LocalFiles store;
  LoaderCheckpoint checkpoint;
  checkpoint.dataset_size = 40;
  checkpoint.shuffle = true;
  checkpoint.seed = 4;
  checkpoint.epoch = 1;
  checkpoint.position = 24;
  absl::StatusOr<ReadPlan> plan = PlanRecordFile(
      path, store, {.rank = 0, .world_size = 2}, {.shuffle = true, .seed = 4},
      {.first_epoch = 1, .epochs = 1, .resume = &checkpoint});
  ASSERT_TRUE(plan.ok()) << plan.status();
  int64_t records = 0;
  for (const PlannedRead& read : plan->reads) records += read.length / 100;
  EXPECT_EQ(records, 8);  // positions 24..39 over two ranks
  checkpoint.seed = 5;
  EXPECT_THAT(
      PlanRecordFile(path, store, {.rank = 0, .world_size = 2},
                     {.shuffle = true, .seed = 4},
                     {.first_epoch = 1, .epochs = 1, .resume = &checkpoint})
          .status()
          .message(),
      HasSubstr("seed 5"));
  std::filesystem::remove(path);
}

TEST(ReadPlan, RecordFileWithABadHeaderIsAnErrorNamingTheUrl) {
  FakeObjectStore store;  // pattern bytes: no record file magic
  store.Put("https://host/train.pwr", 4096);
  const absl::Status status =
      PlanRecordFile("https://host/train.pwr", store, {}, {}, {}).status();
  EXPECT_FALSE(status.ok());
  EXPECT_THAT(status.message(), HasSubstr("https://host/train.pwr"));
}

}  // namespace
}  // namespace pinwheel
