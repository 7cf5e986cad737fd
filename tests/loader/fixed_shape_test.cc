// Fixed-shape delivery: LoaderOptions::pad_last_batch (short batches padded
// to batch_size with a validity field) and ErrorPolicy::kReplace (a failed
// sample replaced by a deterministic other one), so that every batch has
// the same shape.
#include <cstdint>
#include <cstring>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"

#include "loader/in_memory_dataset.h"
#include "loader/loader.h"
#include "loader/loader_builder.h"
#include "loader/loader_checkpoint.h"
#include "tests/support/drain_epoch.h"
#include "tests/support/scripted_streams.h"
#include "tests/support/test_datasets.h"
#include "transfer/device.h"

namespace pinwheel {
namespace {

using ::testing::HasSubstr;
using testing_support::DrainedEpoch;
using testing_support::DrainEpoch;
using testing_support::DrainOptions;
using testing_support::HostBatch;
using testing_support::PatternDataset;

// Expects `batch`'s real rows to hold their indices' samples, its padding
// rows zeros, and its validity field (field 3) to say which is which.
void ExpectRows(const PatternDataset& dataset, const HostBatch& batch,
                int64_t real) {
  ASSERT_EQ(batch.fields.size(), 4u);
  for (int64_t s = 0; s < batch.size; ++s) {
    const bool is_real = s < real;
    EXPECT_EQ(batch.fields[3][static_cast<size_t>(s)],
              std::byte{is_real ? uint8_t{1} : uint8_t{0}})
        << "row " << s;
    const std::vector<std::vector<std::byte>> expected =
        is_real ? dataset.Expected(batch.indices[static_cast<size_t>(s)])
                : std::vector<std::vector<std::byte>>{
                      std::vector<std::byte>(37), std::vector<std::byte>(8),
                      std::vector<std::byte>(20)};
    for (size_t f = 0; f < 3; ++f) {
      const size_t bytes = expected[f].size();
      EXPECT_EQ(std::memcmp(batch.fields[f].data() + bytes * s,
                            expected[f].data(), bytes),
                0)
          << "field " << f << ", row " << s;
    }
  }
}

TEST(PadLastBatch, DeliversAFullLastBatchWithAValidityMask) {
  auto dataset = std::make_shared<PatternDataset>(10);
  absl::StatusOr<Loader> loader = LoaderBuilder(dataset)
                                      .batch_size(4)
                                      .pad_last_batch()
                                      .num_workers(2)
                                      .device(Device::Host())
                                      .Build();
  ASSERT_TRUE(loader.ok()) << loader.status();
  EXPECT_EQ(loader->layout().sample().FieldIndex("valid"), 3);
  const DrainedEpoch epoch = DrainEpoch(*loader, {.copy_fields = true});
  ASSERT_TRUE(epoch.status.ok()) << epoch.status;
  ASSERT_EQ(epoch.batches.size(), 3u);
  for (const HostBatch& batch : epoch.batches) EXPECT_EQ(batch.size, 4);
  EXPECT_EQ(epoch.batches[2].indices, (std::vector<int64_t>{8, 9, -1, -1}));
  ExpectRows(*dataset, epoch.batches[0], 4);
  ExpectRows(*dataset, epoch.batches[2], 2);
  EXPECT_EQ(loader->stats().samples_delivered, 10);
  EXPECT_EQ(loader->stats().samples_padded, 2);
}

// Shipped datasets check that the view has their layout (InMemoryDataset,
// RecordFileDataset, TokenWindowDataset, PackedTokenDataset): Read() must
// see the dataset's fields, not the validity field appended after them.
// (Every read failed with "the sample view has 2 fields, the dataset has
// 1" before: only PatternDataset, which does not check, was padded.)
TEST(PadLastBatch, AShippedDatasetSeesItsOwnLayoutInRead) {
  std::vector<int64_t> values = {0, 10, 20, 30, 40};
  absl::StatusOr<SampleLayout> layout =
      SampleLayout::Create({{.name = "x", .dtype = DType::kInt64}});
  ASSERT_TRUE(layout.ok());
  absl::StatusOr<std::shared_ptr<InMemoryDataset>> dataset =
      InMemoryDataset::Create(
          *layout, 5,
          {absl::MakeConstSpan(
              reinterpret_cast<const std::byte*>(values.data()),
              values.size() * sizeof(int64_t))});
  ASSERT_TRUE(dataset.ok()) << dataset.status();
  absl::StatusOr<Loader> loader = LoaderBuilder(*dataset)
                                      .batch_size(4)
                                      .pad_last_batch()
                                      .num_workers(1)
                                      .device(Device::Host())
                                      .Build();
  ASSERT_TRUE(loader.ok()) << loader.status();
  const DrainedEpoch epoch = DrainEpoch(*loader, {.copy_fields = true});
  ASSERT_TRUE(epoch.status.ok()) << epoch.status;
  ASSERT_EQ(epoch.batches.size(), 2u);
  const HostBatch& last = epoch.batches[1];
  EXPECT_EQ(last.indices, (std::vector<int64_t>{4, -1, -1, -1}));
  int64_t first = -1;
  std::memcpy(&first, last.fields[0].data(), sizeof(first));
  EXPECT_EQ(first, 40);
  EXPECT_EQ(last.fields[1][0], std::byte{1});
  EXPECT_EQ(last.fields[1][1], std::byte{0});
}

TEST(PadLastBatch, PadsABatchShortenedBySkippedSamples) {
  auto dataset = std::make_shared<PatternDataset>(8);
  dataset->set_hook([](int64_t i) {
    return i == 1 || i == 6 ? absl::DataLossError("bad") : absl::OkStatus();
  });
  absl::StatusOr<Loader> loader = LoaderBuilder(dataset)
                                      .batch_size(4)
                                      .pad_last_batch(true, "real")
                                      .on_error(ErrorPolicy::kSkipSample)
                                      .device(Device::Host())
                                      .Build();
  ASSERT_TRUE(loader.ok()) << loader.status();
  EXPECT_EQ(loader->layout().sample().FieldIndex("real"), 3);
  const DrainedEpoch epoch = DrainEpoch(*loader, {.copy_fields = true});
  ASSERT_TRUE(epoch.status.ok()) << epoch.status;
  ASSERT_EQ(epoch.batches.size(), 2u);
  EXPECT_EQ(epoch.batches[0].indices, (std::vector<int64_t>{0, 2, 3, -1}));
  EXPECT_EQ(epoch.batches[1].indices, (std::vector<int64_t>{4, 5, 7, -1}));
  ExpectRows(*dataset, epoch.batches[0], 3);
  ExpectRows(*dataset, epoch.batches[1], 3);
}

TEST(PadLastBatch, PadsAShardsShortLastBatch) {
  auto streams = testing_support::ScriptedStreams::EachShard(5);
  absl::StatusOr<Loader> loader = LoaderBuilder(streams)
                                      .batch_size(4)
                                      .pad_last_batch()
                                      .device(Device::Host())
                                      .Build();
  ASSERT_TRUE(loader.ok()) << loader.status();
  const DrainedEpoch epoch = DrainEpoch(*loader);
  ASSERT_TRUE(epoch.status.ok()) << epoch.status;
  ASSERT_EQ(epoch.batches.size(), 2u);
  EXPECT_EQ(epoch.batches[1].size, 4);
  EXPECT_EQ(loader->stats().samples_delivered, 5);
  EXPECT_EQ(loader->stats().samples_padded, 3);
}

TEST(PadLastBatch, RejectsAMaskNamedLikeADatasetField) {
  auto dataset = std::make_shared<PatternDataset>(8);
  absl::StatusOr<Loader> loader = LoaderBuilder(dataset)
                                      .pad_last_batch(true, "b")
                                      .device(Device::Host())
                                      .Build();
  ASSERT_FALSE(loader.ok());
  EXPECT_EQ(loader.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(loader.status().message(), HasSubstr("'valid_field' = 'b'"));
  loader = LoaderBuilder(dataset)
               .pad_last_batch(true, "not a name")
               .device(Device::Host())
               .Build();
  ASSERT_FALSE(loader.ok());
  EXPECT_THAT(loader.status().message(), HasSubstr("'valid_field'"));
}

// Fails every index divisible by 5.
std::shared_ptr<PatternDataset> FailingEveryFifth(int64_t size) {
  auto dataset = std::make_shared<PatternDataset>(size);
  dataset->set_hook([](int64_t i) {
    return i % 5 == 0 ? absl::DataLossError("corrupt record")
                      : absl::OkStatus();
  });
  return dataset;
}

LoaderBuilder Replacing(std::shared_ptr<const Dataset> dataset, int workers) {
  LoaderBuilder builder(std::move(dataset));
  builder.batch_size(8)
      .shuffle(3)
      .on_error(ErrorPolicy::kReplace)
      .num_workers(workers)
      .device(Device::Host());
  return builder;
}

TEST(ReplaceOnError, ReplacesEachFailedSampleByTheSameOtherOne) {
  auto dataset = FailingEveryFifth(40);
  std::optional<std::vector<int64_t>> first;
  for (int workers : {0, 1, 4}) {
    absl::StatusOr<Loader> loader = Replacing(dataset, workers).Build();
    ASSERT_TRUE(loader.ok()) << loader.status();
    const DrainedEpoch epoch = DrainEpoch(*loader, {.copy_fields = true});
    ASSERT_TRUE(epoch.status.ok()) << epoch.status;
    ASSERT_EQ(epoch.batches.size(), 5u);
    for (const HostBatch& batch : epoch.batches) {
      ASSERT_EQ(batch.size, 8) << "shapes never change";
      for (size_t s = 0; s < batch.indices.size(); ++s) {
        EXPECT_NE(batch.indices[s] % 5, 0) << "a failed sample was delivered";
        EXPECT_EQ(std::memcmp(batch.fields[1].data() + 8 * s,
                              dataset->Expected(batch.indices[s])[1].data(), 8),
                  0)
            << "row " << s << " holds its index's sample";
      }
    }
    const LoaderStats stats = loader->stats();
    EXPECT_GE(stats.samples_replaced, 8);  // 8 failures (and reads ahead)
    EXPECT_THAT(stats.last_replaced, HasSubstr("replaced by index"));
    EXPECT_THAT(stats.last_replaced, HasSubstr("corrupt record"));
    if (first) {
      EXPECT_EQ(epoch.indices(), *first) << workers << " workers";
    } else {
      first = epoch.indices();
    }
  }
}

TEST(ReplaceOnError, ResumesWithTheSameReplacements) {
  auto dataset = FailingEveryFifth(40);
  absl::StatusOr<Loader> whole = Replacing(dataset, 2).Build();
  ASSERT_TRUE(whole.ok());
  const std::vector<int64_t> expected = DrainEpoch(*whole).indices();
  for (int64_t k = 1; k < 5; ++k) {
    absl::StatusOr<Loader> first = Replacing(dataset, 2).Build();
    ASSERT_TRUE(first.ok());
    std::vector<int64_t> got;
    for (int64_t b = 0; b < k; ++b) {
      auto next = first->Next();
      ASSERT_TRUE(next.ok() && next->has_value());
      for (int64_t i : (*next)->sample_indices()) got.push_back(i);
    }
    absl::StatusOr<LoaderCheckpoint> checkpoint = first->Checkpoint();
    ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
    absl::StatusOr<Loader> second =
        Replacing(dataset, 3).resume(*checkpoint).Build();
    ASSERT_TRUE(second.ok()) << second.status();
    for (int64_t i : DrainEpoch(*second).indices()) got.push_back(i);
    EXPECT_EQ(got, expected) << "resumed after " << k << " batches";
  }
}

TEST(ReplaceOnError, FailsTheBatchWhenNoReplacementCanBeRead) {
  auto dataset = std::make_shared<PatternDataset>(16);
  dataset->set_hook([](int64_t) { return absl::DataLossError("disk gone"); });
  absl::StatusOr<Loader> loader = Replacing(dataset, 2).Build();
  ASSERT_TRUE(loader.ok());
  const absl::Status status = loader->Next().status();
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(status.message(), HasSubstr("8 replacements"));
  EXPECT_THAT(status.message(), HasSubstr("disk gone"));
}

TEST(ReplaceOnError, IsRejectedForAnIterableDataset) {
  absl::StatusOr<Loader> loader =
      LoaderBuilder(testing_support::ScriptedStreams::EachShard(4))
          .on_error(ErrorPolicy::kReplace)
          .device(Device::Host())
          .Build();
  ASSERT_FALSE(loader.ok());
  EXPECT_THAT(loader.status().message(), HasSubstr("'on_error' = kReplace"));
}

}  // namespace
}  // namespace pinwheel
