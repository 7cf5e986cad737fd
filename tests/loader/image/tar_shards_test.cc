#include "loader/image/tar_shards.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include "loader/image/image_transforms.h"
#include "loader/loader_builder.h"
#include "loader/sampler.h"
#include "tests/loader/image/tar_shard_samples.h"
#include "tests/loader/image/test_jpegs.h"
#include "tests/loader/image/test_tars.h"
#include "tests/support/case_dir.h"
#include "tests/support/drain_epoch.h"

namespace pinwheel {
namespace {

namespace fs = std::filesystem;
using ::pinwheel::testing::SamplesByLabel;
using ::pinwheel::testing::SeededJpeg;
using ::pinwheel::testing::TarBuilder;
using ::pinwheel::testing::WriteFile;
using ::pinwheel::testing::WriteLabelledShards;
using ::pinwheel::testing_support::CaseDir;
using ::pinwheel::testing_support::DrainedEpoch;
using ::pinwheel::testing_support::DrainEpoch;
using ::pinwheel::testing_support::HostBatch;
using ::testing::HasSubstr;

constexpr int kSize = 16;
constexpr int kBatch = 3;  // of the loaders of SamplesByLabel

class TarShardsTest : public ::testing::Test {
 protected:
  // Writes `count` shards of `per_shard` samples (WriteLabelledShards).
  std::vector<std::string> WriteShards(int count, int per_shard) {
    return WriteLabelledShards(dir_, count, per_shard);
  }

  const CaseDir case_dir_{"tar_shards_"};
  const fs::path& dir_ = case_dir_.path();
};

TEST_F(TarShardsTest, EverySampleOnceWithTheSameAugmentationForAnyWorkerCount) {
  const std::vector<std::string> paths = WriteShards(4, 5);
  absl::StatusOr<std::shared_ptr<TarShardDataset>> ds =
      TarShardDataset::Open(paths, {.transform = {.size = kSize}, .seed = 3});
  ASSERT_TRUE(ds.ok()) << ds.status();
  absl::Status status;
  const auto one = SamplesByLabel(*ds, kSize, kBatch, 1, &status);
  ASSERT_TRUE(status.ok()) << status;
  const auto four = SamplesByLabel(*ds, kSize, kBatch, 4, &status);
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(one.size(), 20u);
  EXPECT_EQ(one, four);
}

TEST_F(TarShardsTest, EvalSamplesAreTheCenterCrop) {
  const std::vector<std::string> paths = WriteShards(1, 2);
  absl::StatusOr<std::shared_ptr<TarShardDataset>> ds = TarShardDataset::Open(
      paths, {.transform = {.train = false, .size = kSize}});
  ASSERT_TRUE(ds.ok()) << ds.status();
  absl::Status status;
  const auto samples = SamplesByLabel(*ds, kSize, kBatch, 0, &status);
  ASSERT_TRUE(status.ok()) << status;
  ASSERT_EQ(samples.size(), 2u);
  std::vector<uint8_t> expected(kSize * kSize * 3);
  ASSERT_TRUE(
      DecodeResizedCrop(SeededJpeg(41, 32, 1), "x",
                        CenterCropRegion(41, 32, kSize * 256 / 224, kSize),
                        kSize, kSize, false, absl::MakeSpan(expected))
          .ok());
  EXPECT_EQ(std::memcmp(samples.at(1).data(), expected.data(), expected.size()),
            0);
}

// Reads every remaining sample of `stream` as (label, image) pairs.
std::vector<std::pair<int64_t, std::vector<std::byte>>> Rest(
    SampleStream& stream, const SampleLayout& sample_layout) {
  std::vector<std::pair<int64_t, std::vector<std::byte>>> out;
  absl::StatusOr<BatchLayout> layout = BatchLayout::Create(sample_layout, 1);
  EXPECT_TRUE(layout.ok());
  std::vector<std::byte> slot(layout->slot_bytes());
  for (;;) {
    SampleView view(*layout, slot.data(), 0, 0);
    absl::StatusOr<bool> more = stream.Next(view);
    EXPECT_TRUE(more.ok()) << more.status();
    if (!more.ok() || !*more) return out;
    out.emplace_back(
        view.field_as<int64_t>(1)[0],
        std::vector<std::byte>(view.field(0).begin(), view.field(0).end()));
  }
}

TEST_F(TarShardsTest, AStreamResumesAtTheNextSampleWithTheSameAugmentation) {
  const std::vector<std::string> paths = WriteShards(5, 3);
  absl::StatusOr<std::shared_ptr<TarShardDataset>> ds =
      TarShardDataset::Open(paths, {.transform = {.size = kSize}, .seed = 9});
  ASSERT_TRUE(ds.ok()) << ds.status();
  // Stream 0 of 2 reads shards 0, 2, 4: 9 samples.
  auto whole = (*ds)->OpenShard(0, 2, /*epoch=*/1);
  ASSERT_TRUE(whole.ok());
  const auto all = Rest(**whole, (*ds)->layout());
  ASSERT_EQ(all.size(), 9u);
  EXPECT_EQ(all[3].first, 6);  // shard 2's first sample
  for (int cut : {1, 3, 4, 8}) {
    auto first = (*ds)->OpenShard(0, 2, 1);
    ASSERT_TRUE(first.ok());
    absl::StatusOr<BatchLayout> layout =
        BatchLayout::Create((*ds)->layout(), 1);
    std::vector<std::byte> slot(layout->slot_bytes());
    for (int i = 0; i < cut; ++i) {
      SampleView view(*layout, slot.data(), 0, 0);
      ASSERT_TRUE((*first)->Next(view).ok());
    }
    absl::StatusOr<std::string> state = (*first)->SaveState();
    ASSERT_TRUE(state.ok());
    auto resumed = (*ds)->OpenShard(0, 2, 1);
    ASSERT_TRUE(resumed.ok());
    ASSERT_TRUE((*resumed)->RestoreState(*state).ok()) << *state;
    const auto rest = Rest(**resumed, (*ds)->layout());
    EXPECT_EQ(rest, decltype(all)(all.begin() + cut, all.end()))
        << "cut " << cut;
  }
  auto fresh = (*ds)->OpenShard(0, 2, 1);
  EXPECT_EQ((*fresh)->RestoreState("7 0").code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*fresh)->RestoreState("0 100").code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*fresh)->RestoreState("junk").code(),
            absl::StatusCode::kInvalidArgument);
}

// label -> image bytes of the samples of batches[from...].
std::map<int64_t, std::vector<std::byte>> ByLabel(
    const std::vector<HostBatch>& batches, size_t from) {
  std::map<int64_t, std::vector<std::byte>> samples;
  const size_t image_bytes = kSize * kSize * 3;
  for (size_t b = from; b < batches.size(); ++b) {
    for (int64_t p = 0; p < batches[b].size; ++p) {
      int64_t label = 0;
      std::memcpy(&label, batches[b].fields[1].data() + p * 8, 8);
      const std::byte* image = batches[b].fields[0].data() + p * image_bytes;
      samples[label] = std::vector<std::byte>(image, image + image_bytes);
    }
  }
  return samples;
}

TEST_F(TarShardsTest, ALoaderCheckpointResumesTheEpochExactly) {
  const std::vector<std::string> paths = WriteShards(4, 4);
  absl::StatusOr<std::shared_ptr<TarShardDataset>> ds =
      TarShardDataset::Open(paths, {.transform = {.size = kSize}, .seed = 1});
  ASSERT_TRUE(ds.ok()) << ds.status();
  auto build = [&](std::optional<LoaderCheckpoint> resume) {
    LoaderBuilder builder(*ds);
    builder.batch_size(2).num_workers(2).device(Device::Host());
    if (resume.has_value()) builder.resume(*std::move(resume));
    return builder.Build();
  };
  absl::StatusOr<Loader> straight = build(std::nullopt);
  ASSERT_TRUE(straight.ok()) << straight.status();
  const DrainedEpoch all = DrainEpoch(*straight, {.copy_fields = true});
  ASSERT_TRUE(all.status.ok()) << all.status;
  ASSERT_EQ(all.batches.size(), 8u);

  absl::StatusOr<Loader> first = build(std::nullopt);
  ASSERT_TRUE(first.ok());
  for (int b = 0; b < 3; ++b) {
    absl::StatusOr<std::optional<DeviceBatch>> batch = first->Next();
    ASSERT_TRUE(batch.ok() && batch->has_value());
  }
  absl::StatusOr<LoaderCheckpoint> checkpoint = first->Checkpoint();
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  absl::StatusOr<Loader> resumed = build(*checkpoint);
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  const DrainedEpoch rest = DrainEpoch(*resumed, {.copy_fields = true});
  ASSERT_TRUE(rest.status.ok()) << rest.status;
  // The same batches, bit for bit (augmentation included), in the same
  // order (Note [exact resume]).
  EXPECT_EQ(rest.samples(), 10);
  ASSERT_EQ(rest.batches.size(), 5u);
  for (size_t b = 0; b < 5; ++b) {
    EXPECT_EQ(rest.batches[b].fields, all.batches[3 + b].fields) << b;
  }
}

// The shard files stream `shard` of `num_shards` reads in `epoch`, in
// order, named by their place in WriteShards()' list (every file of
// WriteShards(count, per_shard) holds per_shard samples).
std::vector<int64_t> FilesRead(const TarShardDataset& ds, int shard,
                               int num_shards, int64_t epoch, int per_shard) {
  auto stream = ds.OpenShard(shard, num_shards, epoch);
  EXPECT_TRUE(stream.ok()) << stream.status();
  if (!stream.ok()) return {};
  std::vector<int64_t> files;
  for (const auto& [label, image] : Rest(**stream, ds.layout())) {
    if (label % per_shard == 0) files.push_back(label / per_shard);
  }
  return files;
}

std::vector<int64_t> Range(int64_t n) {
  std::vector<int64_t> range(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) range[static_cast<size_t>(i)] = i;
  return range;
}

TEST_F(TarShardsTest, WithoutShuffleEveryEpochReadsTheFilesInTheGivenOrder) {
  const std::vector<std::string> paths = WriteShards(6, 2);
  auto ds = TarShardDataset::Open(paths, {.transform = {.size = kSize}});
  ASSERT_TRUE(ds.ok()) << ds.status();
  for (int64_t epoch : {0, 1, 5}) {
    EXPECT_EQ(FilesRead(**ds, 0, 1, epoch, 2), Range(6)) << "epoch " << epoch;
    EXPECT_EQ(FilesRead(**ds, 1, 2, epoch, 2), (std::vector<int64_t>{1, 3, 5}))
        << "epoch " << epoch;
  }
}

TEST_F(TarShardsTest, ShuffledShardsTakeANewOrderEachEpochFixedBySeedAndEpoch) {
  const std::vector<std::string> paths = WriteShards(8, 2);
  const TarShardOptions options{
      .transform = {.size = kSize}, .seed = 5, .shuffle_shards = true};
  auto ds = TarShardDataset::Open(paths, options);
  ASSERT_TRUE(ds.ok()) << ds.status();
  auto again = TarShardDataset::Open(paths, options);
  ASSERT_TRUE(again.ok()) << again.status();
  TarShardOptions reseeded = options;
  reseeded.seed = 6;
  auto other_seed = TarShardDataset::Open(paths, reseeded);
  ASSERT_TRUE(other_seed.ok()) << other_seed.status();

  const std::vector<int64_t> epoch0 = FilesRead(**ds, 0, 1, 0, 2);
  const std::vector<int64_t> epoch1 = FilesRead(**ds, 0, 1, 1, 2);
  EXPECT_EQ(epoch0, Permutation(8, 5, 0));
  EXPECT_NE(epoch0, epoch1);
  EXPECT_NE(epoch0, Range(8));
  EXPECT_EQ(FilesRead(**again, 0, 1, 1, 2), epoch1);
  EXPECT_NE(FilesRead(**other_seed, 0, 1, 1, 2), epoch1);
  for (const auto& order : {epoch0, epoch1}) {
    std::vector<int64_t> sorted = order;
    std::sort(sorted.begin(), sorted.end());
    EXPECT_EQ(sorted, Range(8));
  }
  // The epoch's order is split over the streams after shuffling, the same
  // for every rank: stream s of 3 reads order[s], order[s + 3], ...
  for (int s = 0; s < 3; ++s) {
    std::vector<int64_t> expected;
    for (size_t i = static_cast<size_t>(s); i < epoch1.size(); i += 3) {
      expected.push_back(epoch1[i]);
    }
    EXPECT_EQ(FilesRead(**ds, s, 3, 1, 2), expected) << "stream " << s;
  }
}

TEST_F(TarShardsTest,
       ShuffledShardsAreReadOncePerEpochOverTwoRanksOfTwoWorkers) {
  constexpr int kShards = 8;
  constexpr int kPerShard = 2;
  const std::vector<std::string> paths = WriteShards(kShards, kPerShard);
  auto ds = TarShardDataset::Open(
      paths,
      {.transform = {.size = kSize}, .seed = 11, .shuffle_shards = true});
  ASSERT_TRUE(ds.ok()) << ds.status();
  // labels[epoch][rank]: the labels that rank delivers in that epoch.
  std::vector<std::vector<std::vector<int64_t>>> labels(
      2, std::vector<std::vector<int64_t>>(2));
  for (int rank = 0; rank < 2; ++rank) {
    absl::StatusOr<Loader> loader = LoaderBuilder(*ds)
                                        .batch_size(2)
                                        .num_workers(2)
                                        .distributed(rank, 2)
                                        .device(Device::Host())
                                        .Build();
    ASSERT_TRUE(loader.ok()) << loader.status();
    for (int epoch = 0; epoch < 2; ++epoch) {
      const DrainedEpoch drained = DrainEpoch(*loader, {.copy_fields = true});
      ASSERT_TRUE(drained.status.ok()) << drained.status;
      for (const HostBatch& batch : drained.batches) {
        ASSERT_EQ(batch.epoch, epoch);
        for (int64_t p = 0; p < batch.size; ++p) {
          int64_t label = 0;
          std::memcpy(&label, batch.fields[1].data() + p * 8, 8);
          labels[epoch][rank].push_back(label);
        }
      }
    }
  }
  std::vector<std::vector<int64_t>> rank0_files(2);
  for (int epoch = 0; epoch < 2; ++epoch) {
    std::vector<int64_t> all = labels[epoch][0];
    all.insert(all.end(), labels[epoch][1].begin(), labels[epoch][1].end());
    std::sort(all.begin(), all.end());
    EXPECT_EQ(all, Range(kShards * kPerShard)) << "epoch " << epoch;
    for (int64_t label : labels[epoch][0]) {
      if (label % kPerShard == 0) rank0_files[epoch].push_back(label / 2);
    }
    std::sort(rank0_files[epoch].begin(), rank0_files[epoch].end());
  }
  // The shuffle reaches the loader: rank 0 reads other files in epoch 1.
  EXPECT_NE(rank0_files[0], rank0_files[1]);
}

TEST_F(TarShardsTest, AShuffledEpochResumesExactlyFromACheckpoint) {
  const std::vector<std::string> paths = WriteShards(6, 3);
  auto ds = TarShardDataset::Open(
      paths, {.transform = {.size = kSize}, .seed = 2, .shuffle_shards = true});
  ASSERT_TRUE(ds.ok()) << ds.status();
  // A stream cut anywhere in epoch 1 continues with the next sample.
  auto whole = (*ds)->OpenShard(1, 2, /*epoch=*/1);
  ASSERT_TRUE(whole.ok());
  const auto all_of_stream = Rest(**whole, (*ds)->layout());
  ASSERT_EQ(all_of_stream.size(), 9u);
  for (int cut : {1, 3, 5, 8}) {
    auto first = (*ds)->OpenShard(1, 2, 1);
    ASSERT_TRUE(first.ok());
    absl::StatusOr<BatchLayout> layout =
        BatchLayout::Create((*ds)->layout(), 1);
    std::vector<std::byte> slot(layout->slot_bytes());
    for (int i = 0; i < cut; ++i) {
      SampleView view(*layout, slot.data(), 0, 0);
      ASSERT_TRUE((*first)->Next(view).ok());
    }
    absl::StatusOr<std::string> state = (*first)->SaveState();
    ASSERT_TRUE(state.ok());
    auto resumed = (*ds)->OpenShard(1, 2, 1);
    ASSERT_TRUE(resumed.ok());
    ASSERT_TRUE((*resumed)->RestoreState(*state).ok()) << *state;
    EXPECT_EQ(Rest(**resumed, (*ds)->layout()),
              decltype(all_of_stream)(all_of_stream.begin() + cut,
                                      all_of_stream.end()))
        << "cut " << cut;
  }

  // A loader checkpoint taken mid-epoch 1 resumes it exactly.
  auto build = [&](std::optional<LoaderCheckpoint> resume) {
    LoaderBuilder builder(*ds);
    builder.batch_size(2).num_workers(2).device(Device::Host());
    if (resume.has_value()) builder.resume(*std::move(resume));
    return builder.Build();
  };
  absl::StatusOr<Loader> straight = build(std::nullopt);
  ASSERT_TRUE(straight.ok()) << straight.status();
  ASSERT_TRUE(straight->StartEpoch(1).ok());
  const DrainedEpoch all = DrainEpoch(*straight, {.copy_fields = true});
  ASSERT_TRUE(all.status.ok()) << all.status;
  ASSERT_EQ(all.samples(), 18);

  absl::StatusOr<Loader> first = build(std::nullopt);
  ASSERT_TRUE(first.ok());
  ASSERT_TRUE(first->StartEpoch(1).ok());
  for (int b = 0; b < 3; ++b) {
    absl::StatusOr<std::optional<DeviceBatch>> batch = first->Next();
    ASSERT_TRUE(batch.ok() && batch->has_value());
  }
  absl::StatusOr<LoaderCheckpoint> checkpoint = first->Checkpoint();
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  EXPECT_EQ(checkpoint->epoch, 1);
  absl::StatusOr<Loader> resumed = build(*checkpoint);
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  const DrainedEpoch rest = DrainEpoch(*resumed, {.copy_fields = true});
  ASSERT_TRUE(rest.status.ok()) << rest.status;
  for (const HostBatch& batch : rest.batches) EXPECT_EQ(batch.epoch, 1);
  EXPECT_EQ(rest.samples(), 12);
  EXPECT_EQ(ByLabel(rest.batches, 0), ByLabel(all.batches, 3));
  ASSERT_EQ(rest.batches.size() + 3, all.batches.size());
  for (size_t b = 0; b < rest.batches.size(); ++b) {
    EXPECT_EQ(rest.batches[b].fields, all.batches[3 + b].fields)
        << "batch " << b << " after the cut: not in the uninterrupted turn";
  }
}

TEST_F(TarShardsTest, AJpgWithoutItsClassIsAnErrorNamingTheMemberOrSkipped) {
  const std::string path = (dir_ / "bad.tar").string();
  WriteFile(path, TarBuilder()
                      .Add("a.jpg", SeededJpeg(20, 20, 0))
                      .Add("a.cls", "0")
                      .Add("b.jpg", SeededJpeg(20, 20, 1))  // no b.cls
                      .Add("c.jpg", SeededJpeg(20, 20, 2))
                      .Add("c.cls", "two")  // not a number
                      .Add("d.jpg", std::string("not a jpeg"))
                      .Add("d.cls", "3")
                      .Add("e.cls", "4")  // no e.jpg
                      .Add("f.jpg", SeededJpeg(20, 20, 5))
                      .Add("f.cls", "5")
                      .Finish());
  absl::StatusOr<std::shared_ptr<TarShardDataset>> strict =
      TarShardDataset::Open({path}, {.transform = {.size = kSize}});
  ASSERT_TRUE(strict.ok());
  auto stream = (*strict)->OpenShard(0, 1, 0);
  ASSERT_TRUE(stream.ok());
  absl::StatusOr<BatchLayout> layout =
      BatchLayout::Create((*strict)->layout(), 1);
  std::vector<std::byte> slot(layout->slot_bytes());
  SampleView view(*layout, slot.data(), 0, 0);
  ASSERT_TRUE((*stream)->Next(view).ok());
  absl::StatusOr<bool> next = (*stream)->Next(view);
  EXPECT_EQ(next.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(next.status().message(), HasSubstr(path));
  EXPECT_THAT(next.status().message(), HasSubstr("\"b.jpg\""));
  EXPECT_THAT(next.status().message(), HasSubstr("b.cls"));

  absl::StatusOr<std::shared_ptr<TarShardDataset>> lenient =
      TarShardDataset::Open(
          {path}, {.transform = {.size = kSize}, .skip_bad_samples = true});
  ASSERT_TRUE(lenient.ok());
  auto all = (*lenient)->OpenShard(0, 1, 0);
  const auto samples = Rest(**all, (*lenient)->layout());
  ASSERT_EQ(samples.size(), 2u);
  EXPECT_EQ(samples[0].first, 0);
  EXPECT_EQ(samples[1].first, 5);
  EXPECT_EQ((*lenient)->skipped_samples(), 4);
}

// Through a loader the decode is each sample's deferred finish (Note [a
// streamed sample finished elsewhere]): the JPEG that does not decode is
// skipped there and the next good sample takes its place, with the pixels
// and label the stream gives when read alone.
TEST_F(TarShardsTest, ABadJpegSkippedInALoaderLeavesTheSameSamples) {
  const std::string path = (dir_ / "bad.tar").string();
  WriteFile(path, TarBuilder()
                      .Add("a.jpg", SeededJpeg(20, 20, 0))
                      .Add("a.cls", "0")
                      .Add("d.jpg", std::string("not a jpeg"))
                      .Add("d.cls", "3")
                      .Add("f.jpg", SeededJpeg(24, 20, 5))
                      .Add("f.cls", "5")
                      .Add("g.jpg", SeededJpeg(20, 28, 6))
                      .Add("g.cls", "6")
                      .Finish());
  const TarShardOptions options{.transform = {.size = kSize},
                                .skip_bad_samples = true};
  auto alone = TarShardDataset::Open({path}, options);
  ASSERT_TRUE(alone.ok());
  EXPECT_TRUE((*alone)->defers_sample_work());
  auto stream = (*alone)->OpenShard(0, 1, 0);
  ASSERT_TRUE(stream.ok());
  const auto want = Rest(**stream, (*alone)->layout());
  ASSERT_EQ(want.size(), 3u);

  auto ds = TarShardDataset::Open({path}, options);
  ASSERT_TRUE(ds.ok());
  absl::StatusOr<Loader> loader = LoaderBuilder(*ds)
                                      .batch_size(3)
                                      .num_workers(1)
                                      .prefetch(1)
                                      .device(Device::Host())
                                      .Build();
  ASSERT_TRUE(loader.ok()) << loader.status();
  const DrainedEpoch epoch = DrainEpoch(*loader, {.copy_fields = true});
  ASSERT_TRUE(epoch.status.ok()) << epoch.status;
  ASSERT_EQ(epoch.batches.size(), 1u);
  const HostBatch& batch = epoch.batches[0];
  ASSERT_EQ(batch.size, 3);
  const size_t image_bytes = static_cast<size_t>(kSize) * kSize * 3;
  for (size_t p = 0; p < 3; ++p) {
    int64_t label;
    std::memcpy(&label, batch.fields[1].data() + 8 * p, 8);
    EXPECT_EQ(label, want[p].first) << p;
    EXPECT_TRUE(std::equal(want[p].second.begin(), want[p].second.end(),
                           batch.fields[0].begin() + image_bytes * p))
        << "the pixels of sample " << p;
  }
  // Once in this epoch; the loader may already be reading the next one.
  EXPECT_GE((*ds)->skipped_samples(), 1);
}

TEST_F(TarShardsTest, ACorruptJpegIsNamedByShardAndMember) {
  const std::string path = (dir_ / "c.tar").string();
  std::vector<std::byte> jpeg = SeededJpeg(64, 64, 0);
  jpeg.resize(jpeg.size() / 2);
  WriteFile(path,
            TarBuilder().Add("k/x.jpg", jpeg).Add("k/x.cls", "1").Finish());
  auto ds = TarShardDataset::Open({path}, {.transform = {.size = kSize}});
  ASSERT_TRUE(ds.ok());
  auto stream = (*ds)->OpenShard(0, 1, 0);
  absl::StatusOr<BatchLayout> layout = BatchLayout::Create((*ds)->layout(), 1);
  std::vector<std::byte> slot(layout->slot_bytes());
  SampleView view(*layout, slot.data(), 0, 0);
  absl::StatusOr<bool> next = (*stream)->Next(view);
  EXPECT_EQ(next.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(next.status().message(), HasSubstr(path + ":k/x.jpg"));
}

TEST_F(TarShardsTest, ATarFaultStopsTheLoaderNamingTheShard) {
  std::vector<std::string> paths = WriteShards(2, 2);
  std::vector<std::byte> cut = TarBuilder()
                                   .Add("z.jpg", SeededJpeg(20, 20, 0))
                                   .Add("z.cls", "0")
                                   .Finish();
  cut.resize(700);  // inside z.jpg's data
  paths.push_back((dir_ / "cut.tar").string());
  WriteFile(paths.back(), cut);
  auto ds = TarShardDataset::Open(paths, {.transform = {.size = kSize}});
  ASSERT_TRUE(ds.ok());
  absl::Status status;
  SamplesByLabel(*ds, kSize, kBatch, 1, &status);
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << status;
  EXPECT_THAT(status.message(), HasSubstr(paths.back()));
  EXPECT_THAT(status.message(), HasSubstr("z.jpg"));
}

TEST_F(TarShardsTest, AShardTruncatedInPlaceWhileReadIsDataLossNotSigbus) {
  // Issue 35, item 2: shards were memory-mapped, and reading one that was
  // truncated in place (ftruncate, as `tar cf` over the same path does)
  // killed the process with SIGBUS.
  const std::string path = (dir_ / "shrinks.tar").string();
  TarBuilder tar;
  for (int i = 0; i < 6; ++i) {
    tar.Add(absl::StrCat("s", i, ".jpg"), SeededJpeg(64, 64, i));
    tar.Add(absl::StrCat("s", i, ".cls"), std::to_string(i));
  }
  const std::vector<std::byte> whole = tar.Finish();
  // Cut inside a member's data, inside a header, and to nothing.
  for (uint64_t keep :
       {uint64_t{whole.size() / 2 + 100},
        uint64_t{whole.size() / 2 / 512 * 512 + 256}, uint64_t{0}}) {
    WriteFile(path, whole);
    auto ds = TarShardDataset::Open({path}, {.transform = {.size = kSize}});
    ASSERT_TRUE(ds.ok()) << ds.status();
    auto stream = (*ds)->OpenShard(0, 1, 0);
    ASSERT_TRUE(stream.ok());
    absl::StatusOr<BatchLayout> layout =
        BatchLayout::Create((*ds)->layout(), 1);
    std::vector<std::byte> slot(layout->slot_bytes());
    SampleView view(*layout, slot.data(), 0, 0);
    absl::StatusOr<bool> next = (*stream)->Next(view);
    ASSERT_TRUE(next.ok() && *next) << next.status();
    fs::resize_file(path, keep);  // ftruncate: the same inode shrinks
    absl::Status failed;
    for (int i = 0; i < 6 && failed.ok(); ++i) {
      next = (*stream)->Next(view);
      if (!next.ok()) failed = next.status();
    }
    EXPECT_EQ(failed.code(), absl::StatusCode::kDataLoss) << failed;
    EXPECT_THAT(failed.message(), HasSubstr(path));
    EXPECT_THAT(failed.message(), HasSubstr("needs bytes ["));
    EXPECT_THAT(failed.message(), HasSubstr("truncated"));
  }
}

TEST_F(TarShardsTest, ARepeatedKeyIsABadSampleNotASilentDrop) {
  // Issue 35: a key written twice back to back gave one sample, the first
  // one's members silently replaced by the second's.
  const std::string path = (dir_ / "twice.tar").string();
  WriteFile(path, TarBuilder()
                      .Add("a.jpg", SeededJpeg(20, 20, 0))
                      .Add("a.cls", "0")
                      .Add("b.jpg", SeededJpeg(20, 20, 1))
                      .Add("b.cls", "1")
                      .Add("b.jpg", SeededJpeg(20, 20, 2))
                      .Add("b.cls", "2")
                      .Add("c.jpg", SeededJpeg(20, 20, 3))
                      .Add("c.cls", "3")
                      .Finish());
  auto strict = TarShardDataset::Open({path}, {.transform = {.size = kSize}});
  ASSERT_TRUE(strict.ok());
  auto stream = (*strict)->OpenShard(0, 1, 0);
  absl::StatusOr<BatchLayout> layout =
      BatchLayout::Create((*strict)->layout(), 1);
  std::vector<std::byte> slot(layout->slot_bytes());
  SampleView view(*layout, slot.data(), 0, 0);
  ASSERT_TRUE((*stream)->Next(view).ok());
  absl::StatusOr<bool> next = (*stream)->Next(view);
  EXPECT_EQ(next.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(next.status().message(), HasSubstr(path));
  EXPECT_THAT(next.status().message(), HasSubstr("\"b.jpg\""));
  EXPECT_THAT(next.status().message(), HasSubstr("repeats the key \"b\""));

  auto lenient = TarShardDataset::Open(
      {path}, {.transform = {.size = kSize}, .skip_bad_samples = true});
  ASSERT_TRUE(lenient.ok());
  auto all = (*lenient)->OpenShard(0, 1, 0);
  const auto samples = Rest(**all, (*lenient)->layout());
  ASSERT_EQ(samples.size(), 2u);
  EXPECT_EQ(samples[0].first, 0);
  EXPECT_EQ(samples[1].first, 3);
  EXPECT_EQ((*lenient)->skipped_samples(), 1);
}

TEST_F(TarShardsTest, OpenNamesAMissingShard) {
  const std::string missing = (dir_ / "nope.tar").string();
  auto ds = TarShardDataset::Open({missing});
  EXPECT_EQ(ds.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(ds.status().message(), HasSubstr(missing));
  EXPECT_EQ(TarShardDataset::Open({}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(TarShardDataset::Open({dir_.string()}).status().message(),
              HasSubstr("not a regular file"));
}

}  // namespace
}  // namespace pinwheel
