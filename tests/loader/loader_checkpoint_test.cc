// LoaderCheckpoint: the format (round trip, corruption, truncation, versions)
// and exact, elastic resume end to end on the host backend (and the cuda
// backend when a GPU is present). See Note [exact resume].
#include "loader/loader_checkpoint.h"

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <limits>
#include <memory>
#include <optional>
#include <ostream>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

#include "loader/iterable_dataset.h"
#include "loader/loader.h"
#include "loader/loader_builder.h"
#include "loader/sampler.h"
#include "pinning/base/crc32c.h"
#include "tests/support/drain_epoch.h"
#include "tests/support/scripted_streams.h"
#include "tests/support/skip_without_gpu.h"
#include "tests/support/test_datasets.h"
#include "transfer/device.h"
#include "transfer/stream.h"

namespace pinwheel {
namespace {

using ::testing::HasSubstr;
using testing_support::DrainedEpoch;
using testing_support::DrainEpoch;
using testing_support::HostBatch;
using testing_support::ScriptedStreams;
using testing_support::ToHost;

// --- The format ------------------------------------------------------------

LoaderCheckpoint MapStyleCheckpoint() {
  LoaderCheckpoint c;
  c.kind = LoaderCheckpoint::Kind::kMapStyle;
  c.dataset_size = 1000;
  c.shuffle = true;
  c.seed = 0x0123456789abcdefULL;
  c.batch_size = 32;
  c.drop_last = true;
  c.drop_uneven_tail = false;
  c.world_size = 4;
  c.rank = 3;
  c.epoch = 7;
  c.position = 640;
  return c;
}

LoaderCheckpoint IterableCheckpoint() {
  LoaderCheckpoint c;
  c.kind = LoaderCheckpoint::Kind::kIterable;
  c.dataset_size = -1;
  c.batch_size = 16;
  c.world_size = 2;
  c.rank = 1;
  c.epoch = 2;
  c.position = 5;
  c.num_shards = 6;
  c.shard_states = {std::string("abc"), std::nullopt, std::string()};
  c.next_shard = 2;
  return c;
}

// Returns `bytes` with its checksum recomputed (to reach the field checks).
std::string Reseal(std::string bytes) {
  const uint32_t crc =
      Crc32c(absl::string_view(bytes).substr(0, bytes.size() - 4));
  for (int i = 0; i < 4; ++i) {
    bytes[bytes.size() - 4 + i] = static_cast<char>(crc >> (8 * i));
  }
  return bytes;
}

TEST(LoaderCheckpoint, RoundTripsThroughBytes) {
  for (const LoaderCheckpoint& c :
       {MapStyleCheckpoint(), IterableCheckpoint()}) {
    absl::StatusOr<LoaderCheckpoint> parsed =
        LoaderCheckpoint::FromBytes(c.ToBytes());
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(*parsed, c);
  }
}

TEST(LoaderCheckpoint, MapStyleIsSeventyTwoBytesWhateverTheDatasetSize) {
  LoaderCheckpoint c = MapStyleCheckpoint();
  EXPECT_EQ(c.ToBytes().size(), 72u);
  c.dataset_size = std::numeric_limits<int64_t>::max();
  c.position = c.dataset_size - 1;
  EXPECT_EQ(c.ToBytes().size(), 72u);
}

TEST(LoaderCheckpoint, MatchesItsKnownBytes) {
  // Pins the version 1 layout: a change must bump kVersion.
  LoaderCheckpoint c;
  c.dataset_size = 10;
  c.shuffle = true;
  c.seed = 3;
  c.batch_size = 4;
  c.epoch = 1;
  c.position = 8;
  const std::string bytes = c.ToBytes();
  std::string hex;
  for (char ch : bytes) {
    absl::StrAppend(&hex, absl::Hex(static_cast<uint8_t>(ch), absl::kZeroPad2));
  }
  EXPECT_EQ(hex.substr(0, 32), "50574c44434b50540100000034000000");
  EXPECT_EQ(hex.substr(32, 104),
            "0001000001000000000000000a00000000000000"
            "03000000000000000400000000000000"
            "01000000000000000800000000000000");
}

TEST(LoaderCheckpoint, RejectsEveryTruncationWithDataLoss) {
  for (const LoaderCheckpoint& c :
       {MapStyleCheckpoint(), IterableCheckpoint()}) {
    const std::string bytes = c.ToBytes();
    for (size_t n = 0; n < bytes.size(); ++n) {
      absl::StatusOr<LoaderCheckpoint> parsed =
          LoaderCheckpoint::FromBytes(absl::string_view(bytes).substr(0, n));
      ASSERT_FALSE(parsed.ok()) << n;
      if (n >= 8) {  // shorter ones cannot show the magic
        EXPECT_EQ(parsed.status().code(), absl::StatusCode::kDataLoss) << n;
        EXPECT_THAT(parsed.status().message(), HasSubstr("truncated")) << n;
      }
    }
  }
}

TEST(LoaderCheckpoint, RejectsEveryFlippedBit) {
  const std::string bytes = MapStyleCheckpoint().ToBytes();
  for (size_t bit = 0; bit < 8 * bytes.size(); ++bit) {
    std::string corrupted = bytes;
    corrupted[bit / 8] =
        static_cast<char>(corrupted[bit / 8] ^ (1 << (bit % 8)));
    absl::StatusOr<LoaderCheckpoint> parsed =
        LoaderCheckpoint::FromBytes(corrupted);
    ASSERT_FALSE(parsed.ok()) << "bit " << bit;
    if (bit >= 64 + 32 + 32) {  // past magic, version and length: checksum
      EXPECT_EQ(parsed.status().code(), absl::StatusCode::kDataLoss) << bit;
      EXPECT_THAT(parsed.status().message(), HasSubstr("'checksum'")) << bit;
    }
  }
}

TEST(LoaderCheckpoint, RejectsANewerVersionNamingIt) {
  std::string bytes = MapStyleCheckpoint().ToBytes();
  bytes[8] = 3;
  absl::StatusOr<LoaderCheckpoint> parsed =
      LoaderCheckpoint::FromBytes(Reseal(bytes));
  EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(parsed.status().message(), HasSubstr("'version' = 3"));
  EXPECT_THAT(parsed.status().message(), HasSubstr("newer"));
}

// Version 2 added the iterable turn (next_shard); map-style checkpoints keep
// version 1, and version 1 iterable ones (no turn) are still read.
TEST(LoaderCheckpoint, WritesVersionTwoOnlyWhereTheLayoutChanged) {
  EXPECT_EQ(MapStyleCheckpoint().ToBytes()[8], 1);
  const std::string v2 = IterableCheckpoint().ToBytes();
  EXPECT_EQ(v2[8], 2);
  // The same checkpoint as version 1 wrote it: no next_shard after the
  // states, the body 4 bytes shorter.
  std::string v1 = v2.substr(0, v2.size() - 8) + std::string(4, '\0');
  v1[8] = 1;
  const uint32_t body = static_cast<uint32_t>(v1.size() - 16 - 4);
  for (int i = 0; i < 4; ++i) v1[12 + i] = static_cast<char>(body >> (8 * i));
  absl::StatusOr<LoaderCheckpoint> parsed =
      LoaderCheckpoint::FromBytes(Reseal(v1));
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  LoaderCheckpoint want = IterableCheckpoint();
  want.next_shard = 0;
  EXPECT_EQ(*parsed, want);
}

TEST(LoaderCheckpoint, RejectsAMapStyleCheckpointClaimingVersionTwo) {
  std::string bytes = MapStyleCheckpoint().ToBytes();
  bytes[8] = 2;
  absl::StatusOr<LoaderCheckpoint> parsed =
      LoaderCheckpoint::FromBytes(Reseal(bytes));
  EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(parsed.status().message(), HasSubstr("'version' = 2"));
  EXPECT_THAT(parsed.status().message(), HasSubstr("map-style"));
}

TEST(LoaderCheckpoint, RejectsANextShardOutsideTheRanksShards) {
  LoaderCheckpoint c = IterableCheckpoint();
  c.next_shard = 3;  // of 3 shards
  absl::StatusOr<LoaderCheckpoint> parsed =
      LoaderCheckpoint::FromBytes(c.ToBytes());
  EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(parsed.status().message(), HasSubstr("'next_shard' = 3"));
}

TEST(LoaderCheckpoint, RejectsForeignBytesNamingTheMagic) {
  absl::StatusOr<LoaderCheckpoint> parsed = LoaderCheckpoint::FromBytes(
      std::string("this is not a checkpoint, just some text"));
  EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(parsed.status().message(), HasSubstr("'magic'"));
}

TEST(LoaderCheckpoint, RejectsOutOfRangeFieldsNamingThem) {
  struct Case {
    void (*mutate)(LoaderCheckpoint&);
    const char* field;
  };
  const Case cases[] = {
      {[](LoaderCheckpoint& c) { c.position = c.dataset_size + 1; },
       "'position' = 1001"},
      {[](LoaderCheckpoint& c) { c.position = -1; }, "'position' = -1"},
      {[](LoaderCheckpoint& c) { c.epoch = -2; }, "'epoch' = -2"},
      {[](LoaderCheckpoint& c) { c.batch_size = 0; }, "'batch_size' = 0"},
      {[](LoaderCheckpoint& c) { c.rank = 4; }, "'rank' = 4"},
      {[](LoaderCheckpoint& c) { c.world_size = 0; }, "'world_size' = 0"},
      {[](LoaderCheckpoint& c) { c.dataset_size = -5; }, "'dataset_size' = -5"},
  };
  for (const Case& test : cases) {
    LoaderCheckpoint c = MapStyleCheckpoint();
    test.mutate(c);
    absl::StatusOr<LoaderCheckpoint> parsed =
        LoaderCheckpoint::FromBytes(c.ToBytes());
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument)
        << test.field;
    EXPECT_THAT(parsed.status().message(), HasSubstr(test.field));
  }
}

TEST(LoaderCheckpoint, RejectsAShardStateLongerThanTheBytes) {
  std::string bytes = IterableCheckpoint().ToBytes();
  // The first state's length (after the 52 fixed bytes, 8 of counts and
  // the has_state byte) claims 2^31 bytes.
  bytes[16 + 52 + 8 + 1 + 3] = static_cast<char>(0x80);
  absl::StatusOr<LoaderCheckpoint> parsed =
      LoaderCheckpoint::FromBytes(Reseal(bytes));
  EXPECT_EQ(parsed.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(parsed.status().message(), HasSubstr("'shard_states[0]'"));
}

// --- End to end: helpers ---------------------------------------------------

// A delivered batch copied back to the host, or the end of an epoch.
struct Item {
  bool end_of_epoch = false;
  int64_t epoch = 0;
  std::vector<int64_t> indices;
  std::vector<std::vector<std::byte>> fields;
  bool operator==(const Item&) const = default;
};

std::ostream& operator<<(std::ostream& os, const Item& item) {
  if (item.end_of_epoch) return os << "end of epoch";
  os << "epoch " << item.epoch << " batch [";
  for (int64_t i : item.indices) os << i << " ";
  return os << "]";
}

// Reads until `items` items (batches and ends of epochs) are delivered.
std::vector<Item> ReadItems(Loader& loader, int64_t items) {
  std::vector<Item> out;
  Stream consumer = Stream::Borrow(loader.device());
  while (static_cast<int64_t>(out.size()) < items) {
    absl::StatusOr<std::optional<DeviceBatch>> next = loader.Next();
    EXPECT_TRUE(next.ok()) << next.status();
    if (!next.ok()) break;
    if (!next->has_value()) {
      out.push_back({.end_of_epoch = true});
      continue;
    }
    DeviceBatch& batch = **next;
    EXPECT_TRUE(batch.WaitOnHost().ok());
    HostBatch host = ToHost(batch, /*copy_fields=*/true);
    EXPECT_TRUE(batch.Release(consumer).ok());
    out.push_back({.epoch = host.epoch,
                   .indices = std::move(host.indices),
                   .fields = std::move(host.fields)});
  }
  return out;
}

// Reads until the end of the current epoch; returns the indices.
std::vector<int64_t> ReadRestOfEpoch(Loader& loader) {
  const DrainedEpoch rest = DrainEpoch(loader);
  EXPECT_TRUE(rest.status.ok()) << rest.status;
  return rest.indices();
}

struct Shape {
  int workers = 2;
  int prefetch = 3;
  int device_buffers = 2;
  bool cuda = false;
};

LoaderBuilder Builder(std::shared_ptr<const Dataset> dataset, int64_t batch,
                      bool drop_last, int rank, int world, const Shape& shape) {
  LoaderBuilder builder(std::move(dataset));
  builder.batch_size(batch)
      .drop_last(drop_last)
      .shuffle(17)
      .distributed(rank, world)
      .num_workers(shape.workers)
      .prefetch(shape.prefetch)
      .device_buffers(shape.device_buffers)
      .device(shape.cuda ? *Device::Cuda(0) : Device::Host());
  return builder;
}

// Checkpoints after every number of items k of an uninterrupted run (three
// epochs), resumes from the checkpoint's bytes with `resumed`, and expects
// the very items the uninterrupted run delivered after k.
void ExpectExactResumeAtEveryItem(int64_t size, int64_t batch, bool drop_last,
                                  int rank, int world, const Shape& resumed) {
  auto dataset = std::make_shared<testing_support::PatternDataset>(size);
  absl::StatusOr<Loader> whole =
      Builder(dataset, batch, drop_last, rank, world, Shape{}).Build();
  ASSERT_TRUE(whole.ok()) << whole.status();
  const int64_t per_epoch = whole->batches_per_epoch() + 1;
  const std::vector<Item> expected = ReadItems(*whole, 3 * per_epoch);
  for (int64_t k = 0; k <= per_epoch + 1; ++k) {
    std::string bytes;
    {
      absl::StatusOr<Loader> first =
          Builder(dataset, batch, drop_last, rank, world, Shape{}).Build();
      ASSERT_TRUE(first.ok()) << first.status();
      const std::vector<Item> before = ReadItems(*first, k);
      ASSERT_EQ(before,
                std::vector<Item>(expected.begin(), expected.begin() + k));
      absl::StatusOr<LoaderCheckpoint> checkpoint = first->Checkpoint();
      ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
      bytes = checkpoint->ToBytes();
    }  // the interrupted loader is gone, with what it read ahead
    absl::StatusOr<LoaderCheckpoint> parsed =
        LoaderCheckpoint::FromBytes(bytes);
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    absl::StatusOr<Loader> second =
        Builder(dataset, batch, drop_last, rank, world, resumed)
            .resume(*parsed)
            .Build();
    ASSERT_TRUE(second.ok()) << second.status();
    const std::vector<Item> after = ReadItems(*second, 3 * per_epoch - k);
    ASSERT_EQ(after, std::vector<Item>(expected.begin() + k, expected.end()))
        << "checkpoint after " << k << " items, rank " << rank << " of "
        << world << ", drop_last " << drop_last;
  }
}

// --- Exact resume ----------------------------------------------------------

TEST(Resume, AtEveryBatchGivesTheUninterruptedBatchesBitForBit) {
  // Resumed with other workers, prefetch and device buffers each time.
  for (bool drop_last : {false, true}) {
    for (const Shape& shape :
         {Shape{.workers = 0, .prefetch = 1},
          Shape{.workers = 1, .prefetch = 2},
          Shape{.workers = 4, .prefetch = 7, .device_buffers = 3}}) {
      ExpectExactResumeAtEveryItem(/*size=*/100, /*batch=*/8, drop_last,
                                   /*rank=*/0, /*world=*/1, shape);
    }
  }
}

TEST(Resume, OfEachRankWithTheSameWorldSizeIsExact) {
  for (int rank = 0; rank < 3; ++rank) {
    ExpectExactResumeAtEveryItem(/*size=*/70, /*batch=*/4, false, rank,
                                 /*world=*/3, Shape{.workers = 3});
  }
}

TEST(Resume, OntoTheCudaBackendIsExact_CUDA) {
  SKIP_WITHOUT_GPU("cuda resume");
  ExpectExactResumeAtEveryItem(/*size=*/60, /*batch=*/8, false, 0, 1,
                               Shape{.workers = 2, .cuda = true});
}

TEST(Resume, KeepsSkippedSamplesConsumed) {
  // kSkipSample: a batch whose every sample fails is never delivered; a
  // checkpoint after the batch before it resumes at that batch, which is
  // skipped again, so the rest matches the uninterrupted run.
  auto dataset = std::make_shared<testing_support::PatternDataset>(40);
  // Batch 2 (indices 8..11) fails whole; others lose multiples of 7.
  dataset->set_hook([](int64_t index) {
    return (index >= 8 && index < 12) || index % 7 == 0
               ? absl::DataLossError("bad")
               : absl::OkStatus();
  });
  auto build = [&](std::optional<LoaderCheckpoint> from) {
    LoaderBuilder builder(dataset);
    builder.batch_size(4)
        .num_workers(2)
        .on_error(ErrorPolicy::kSkipSample)
        .device(Device::Host());
    if (from) builder.resume(*from);
    return builder.Build();
  };
  absl::StatusOr<Loader> whole = build(std::nullopt);
  ASSERT_TRUE(whole.ok());
  const std::vector<Item> expected = ReadItems(*whole, 10);  // 9 + end
  ASSERT_TRUE(expected.back().end_of_epoch);
  for (int64_t k = 0; k <= 9; ++k) {
    absl::StatusOr<Loader> first = build(std::nullopt);
    ASSERT_TRUE(first.ok());
    ReadItems(*first, k);
    absl::StatusOr<LoaderCheckpoint> checkpoint = first->Checkpoint();
    ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
    absl::StatusOr<Loader> second = build(*checkpoint);
    ASSERT_TRUE(second.ok());
    EXPECT_EQ(ReadItems(*second, 10 - k),
              std::vector<Item>(expected.begin() + k, expected.end()))
        << k;
  }
}

// --- Elastic resume --------------------------------------------------------

// Every rank of `from` ranks reads `batches` batches of epoch 0 and
// checkpoints; the checkpoints must agree but for the rank. Returns rank 0's.
LoaderCheckpoint CheckpointAllRanks(std::shared_ptr<const Dataset> dataset,
                                    int from, int64_t batch, int64_t batches,
                                    std::multiset<int64_t>* delivered) {
  std::optional<LoaderCheckpoint> first;
  for (int rank = 0; rank < from; ++rank) {
    absl::StatusOr<Loader> loader =
        Builder(dataset, batch, false, rank, from, Shape{}).Build();
    EXPECT_TRUE(loader.ok()) << loader.status();
    for (const Item& item : ReadItems(*loader, batches)) {
      delivered->insert(item.indices.begin(), item.indices.end());
    }
    absl::StatusOr<LoaderCheckpoint> checkpoint = loader->Checkpoint();
    EXPECT_TRUE(checkpoint.ok()) << checkpoint.status();
    EXPECT_EQ(checkpoint->rank, rank);
    if (!first) {
      first = *checkpoint;
    } else {
      LoaderCheckpoint same = *checkpoint;
      same.rank = first->rank;
      EXPECT_EQ(same, *first) << "rank " << rank;
    }
  }
  return *first;
}

// Resumes `checkpoint` on `to` ranks; returns each rank's loader.
std::vector<Loader> ResumeOn(std::shared_ptr<const Dataset> dataset, int to,
                             int64_t batch,
                             const LoaderCheckpoint& checkpoint) {
  std::vector<Loader> loaders;
  for (int rank = 0; rank < to; ++rank) {
    absl::StatusOr<Loader> loader =
        Builder(dataset, batch, false, rank, to, Shape{.workers = 1})
            .resume(checkpoint)
            .Build();
    EXPECT_TRUE(loader.ok()) << loader.status();
    loaders.push_back(*std::move(loader));
  }
  return loaders;
}

// Checks the remaining samples of epoch 0 are delivered exactly once over
// the new ranks, and epoch 1 is the new world's uninterrupted epoch 1.
void ExpectElastic(int64_t size, int from, int to, int64_t batch,
                   int64_t batches) {
  auto dataset = std::make_shared<testing_support::PatternDataset>(size);
  std::multiset<int64_t> delivered;
  const LoaderCheckpoint checkpoint =
      CheckpointAllRanks(dataset, from, batch, batches, &delivered);
  EXPECT_EQ(checkpoint.position, batches * batch * from);
  EXPECT_EQ(checkpoint.world_size, from);
  std::vector<Loader> loaders = ResumeOn(dataset, to, batch, checkpoint);
  std::multiset<int64_t> rest;
  for (Loader& loader : loaders) {
    for (int64_t i : ReadRestOfEpoch(loader)) rest.insert(i);
  }
  // The remaining samples, exactly once: all of 0..size-1 but the delivered.
  std::multiset<int64_t> expected;
  for (int64_t i = 0; i < size; ++i) {
    if (delivered.count(i) == 0) expected.insert(i);
  }
  EXPECT_EQ(delivered.size() + rest.size(), static_cast<size_t>(size));
  EXPECT_EQ(rest, expected) << from << " -> " << to << " ranks";
  // Later epochs use the new world size.
  for (int rank = 0; rank < to; ++rank) {
    auto share = DistributedSampler::Create(size, rank, to, true, 17, false);
    ASSERT_TRUE(share.ok());
    EXPECT_EQ(ReadRestOfEpoch(loaders[static_cast<size_t>(rank)]),
              (*share)->Indices(1))
        << "epoch 1, rank " << rank << " of " << to;
  }
}

TEST(ElasticResume, FromOneRankToTwoDeliversTheRestExactlyOnce) {
  ExpectElastic(/*size=*/98, /*from=*/1, /*to=*/2, /*batch=*/8,
                /*batches=*/3);  // 74 left, 37 each
}

TEST(ElasticResume, FromTwoRanksToOneDeliversTheRestExactlyOnce) {
  ExpectElastic(/*size=*/98, /*from=*/2, /*to=*/1, /*batch=*/8,
                /*batches=*/2);  // 66 left
}

TEST(ElasticResume, FromTwoRanksToThreeDeliversTheRestExactlyOnce) {
  ExpectElastic(/*size=*/98, /*from=*/2, /*to=*/3, /*batch=*/8,
                /*batches=*/2);  // 66 left, 22 each
}

TEST(ElasticResume, PadsAnUnevenRestFromTheStartOfTheEpoch) {
  // 96 samples, 2 ranks deliver 2 batches of 8 each: 64 left over 3 ranks,
  // 22 each: 2 padding samples, the epoch's first two (already delivered
  // before the checkpoint), as any padded epoch.
  auto dataset = std::make_shared<testing_support::PatternDataset>(96);
  std::multiset<int64_t> delivered;
  const LoaderCheckpoint checkpoint =
      CheckpointAllRanks(dataset, 2, 8, 2, &delivered);
  std::vector<Loader> loaders = ResumeOn(dataset, 3, 8, checkpoint);
  std::multiset<int64_t> rest;
  for (Loader& loader : loaders) {
    for (int64_t i : ReadRestOfEpoch(loader)) rest.insert(i);
  }
  ASSERT_EQ(rest.size(), 66u);
  const std::vector<int64_t> order = Permutation(96, 17, 0);
  std::multiset<int64_t> expected(order.begin() + 32, order.end());
  expected.insert(order[0]);
  expected.insert(order[1]);
  EXPECT_EQ(rest, expected);
}

// --- Checkpoint() ----------------------------------------------------------

TEST(Checkpoint, FailsWithFailedPreconditionWhenOutOfOrder) {
  auto dataset = std::make_shared<testing_support::PatternDataset>(64);
  absl::StatusOr<Loader> loader = LoaderBuilder(dataset)
                                      .batch_size(8)
                                      .num_workers(2)
                                      .in_order(false)
                                      .device(Device::Host())
                                      .Build();
  ASSERT_TRUE(loader.ok());
  absl::StatusOr<LoaderCheckpoint> checkpoint = loader->Checkpoint();
  EXPECT_EQ(checkpoint.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(checkpoint.status().message(), HasSubstr("in_order"));
}

TEST(Checkpoint, IsSmallAndQuickOverAHugeDataset) {
  // 2^40 samples: the checkpoint stays 72 bytes; resume reads batch 1.
  const int64_t size = int64_t{1} << 40;
  auto dataset = std::make_shared<testing_support::PatternDataset>(size);
  absl::StatusOr<Loader> loader = LoaderBuilder(dataset)
                                      .batch_size(16)
                                      .shuffle(5)
                                      .num_workers(2)
                                      .device(Device::Host())
                                      .Build();
  ASSERT_TRUE(loader.ok());
  ASSERT_EQ(ReadItems(*loader, 1).size(), 1u);
  constexpr int kCalls = 10000;
  const auto start = std::chrono::steady_clock::now();
  std::string bytes;
  for (int i = 0; i < kCalls; ++i) bytes = loader->Checkpoint()->ToBytes();
  const double micros = std::chrono::duration<double, std::micro>(
                            std::chrono::steady_clock::now() - start)
                            .count() /
                        kCalls;
  // Printed, not asserted (no timed assertions in unit tests).
  std::printf("Checkpoint() + ToBytes(): %.3f us per call (%d calls)\n", micros,
              kCalls);
  RecordProperty("checkpoint_us", absl::StrCat(micros));
  EXPECT_EQ(bytes.size(), 72u);
  absl::StatusOr<LoaderCheckpoint> parsed = LoaderCheckpoint::FromBytes(bytes);
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(parsed->position, 16);
  absl::StatusOr<Loader> resumed = LoaderBuilder(dataset)
                                       .batch_size(16)
                                       .shuffle(5)
                                       .device(Device::Host())
                                       .resume(*parsed)
                                       .Build();
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  const std::vector<Item> next = ReadItems(*resumed, 1);
  ASSERT_EQ(next.size(), 1u);
  auto order =
      BatchSampler::Create(std::make_unique<RandomSampler>(size, 5), 16, false);
  ASSERT_TRUE(order.ok());
  EXPECT_EQ(next[0].indices, order->Batch(0, 1));
}

// --- Resume validation -----------------------------------------------------

absl::Status ResumeWith(const LoaderCheckpoint& checkpoint, int64_t size,
                        uint64_t seed, bool shuffle = true) {
  auto dataset = std::make_shared<testing_support::PatternDataset>(size);
  LoaderBuilder builder(dataset);
  builder.batch_size(8).device(Device::Host()).resume(checkpoint);
  if (shuffle) builder.shuffle(seed);
  return builder.Build().status();
}

TEST(Resume, RejectsAnotherDatasetSizeNamingIt) {
  const absl::Status status =
      ResumeWith(MapStyleCheckpoint(), 999, 0x0123456789abcdefULL);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("'dataset_size' = 1000"));
  EXPECT_THAT(status.message(), HasSubstr("999"));
}

TEST(Resume, RejectsAnotherSeedOrShuffleNamingIt) {
  absl::Status status = ResumeWith(MapStyleCheckpoint(), 1000, 8);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("'seed'"));
  status = ResumeWith(MapStyleCheckpoint(), 1000, 0, /*shuffle=*/false);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("'shuffle'"));
  EXPECT_TRUE(
      ResumeWith(MapStyleCheckpoint(), 1000, 0x0123456789abcdefULL).ok());
}

TEST(Resume, RejectsAnIterableCheckpointForAMapStyleDataset) {
  const absl::Status status = ResumeWith(IterableCheckpoint(), 1000, 0);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("'kind'"));
}

// --- Iterable datasets -----------------------------------------------------

std::vector<int64_t> Ids(const std::vector<Item>& items) {
  std::vector<int64_t> ids;
  for (const Item& item : items) {
    if (item.end_of_epoch) continue;
    const size_t n = item.fields[1].size() / 8;
    for (size_t p = 0; p < n; ++p) {
      int64_t value;
      std::memcpy(&value, item.fields[1].data() + 8 * p, 8);
      ids.push_back((value - 1) / 7);  // field "b" is i * 7 + 1
    }
  }
  return ids;
}

TEST(IterableResume, ContinuesEveryShardAfterItsLastDeliveredSample) {
  // Shard s of n holds the indices k with k % n == s, increasing (field "b"
  // identifies them); its state is the next index, in decimal.
  auto dataset = ScriptedStreams::Strided(203);
  dataset->set_resumable(true);
  for (int workers : {1, 3}) {
    for (int64_t k : {0, 1, 2, 5, 9}) {
      auto build = [&](std::optional<LoaderCheckpoint> from) {
        LoaderBuilder builder(
            std::static_pointer_cast<const IterableDataset>(dataset));
        builder.batch_size(6).num_workers(workers).prefetch(4).device(
            Device::Host());
        if (from) builder.resume(*from);
        return builder.Build();
      };
      absl::StatusOr<Loader> first = build(std::nullopt);
      ASSERT_TRUE(first.ok()) << first.status();
      const std::vector<int64_t> before = Ids(ReadItems(*first, k));
      absl::StatusOr<LoaderCheckpoint> checkpoint = first->Checkpoint();
      ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
      absl::StatusOr<LoaderCheckpoint> parsed =
          LoaderCheckpoint::FromBytes(checkpoint->ToBytes());
      ASSERT_TRUE(parsed.ok()) << parsed.status();
      absl::StatusOr<Loader> second = build(*parsed);
      ASSERT_TRUE(second.ok()) << second.status();
      std::vector<int64_t> after;
      while (true) {
        const std::vector<Item> item = ReadItems(*second, 1);
        ASSERT_EQ(item.size(), 1u);
        if (item[0].end_of_epoch) break;
        for (int64_t id : Ids(item)) after.push_back(id);
      }
      std::multiset<int64_t> all(before.begin(), before.end());
      all.insert(after.begin(), after.end());
      ASSERT_EQ(all.size(), 203u) << "workers " << workers << " k " << k;
      for (int64_t i = 0; i < 203; ++i) {
        ASSERT_EQ(all.count(i), 1u)
            << i << " workers " << workers << " k " << k;
      }
    }
  }
}

// The shards take their turns as in the uninterrupted epoch: the resumed
// batches are the same, in the same order. 203 samples over 3 shards end
// at different batches (68, 68 and 67 samples in batches of 6), so some
// cuts come after a shard ran out and passes its turn on.
TEST(IterableResume, GoesOnInTheSameTurnSoTheBatchesAreTheSame) {
  auto dataset = ScriptedStreams::Strided(203);
  dataset->set_resumable(true);
  for (int workers : {2, 3}) {
    auto build = [&](std::optional<LoaderCheckpoint> from) {
      LoaderBuilder builder(
          std::static_pointer_cast<const IterableDataset>(dataset));
      builder.batch_size(6).num_workers(workers).prefetch(3).device(
          Device::Host());
      if (from) builder.resume(*from);
      return builder.Build();
    };
    absl::StatusOr<Loader> straight = build(std::nullopt);
    ASSERT_TRUE(straight.ok()) << straight.status();
    std::vector<int64_t> want;
    for (;;) {
      const std::vector<Item> item = ReadItems(*straight, 1);
      ASSERT_EQ(item.size(), 1u);
      if (item[0].end_of_epoch) break;
      for (int64_t id : Ids(item)) want.push_back(id);
    }
    for (int64_t k : {1, 2, 4, 11, 22, 33}) {
      absl::StatusOr<Loader> first = build(std::nullopt);
      ASSERT_TRUE(first.ok()) << first.status();
      std::vector<int64_t> got = Ids(ReadItems(*first, k));
      absl::StatusOr<LoaderCheckpoint> checkpoint = first->Checkpoint();
      ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
      // And once more from a checkpoint of the resumed loader, taken before
      // it delivered anything: the turn carries over.
      absl::StatusOr<Loader> idle = build(*checkpoint);
      ASSERT_TRUE(idle.ok()) << idle.status();
      absl::StatusOr<LoaderCheckpoint> again = idle->Checkpoint();
      ASSERT_TRUE(again.ok()) << again.status();
      EXPECT_EQ(again->next_shard, checkpoint->next_shard);
      absl::StatusOr<LoaderCheckpoint> parsed =
          LoaderCheckpoint::FromBytes(again->ToBytes());
      ASSERT_TRUE(parsed.ok()) << parsed.status();
      absl::StatusOr<Loader> second = build(*parsed);
      ASSERT_TRUE(second.ok()) << second.status();
      for (;;) {
        const std::vector<Item> item = ReadItems(*second, 1);
        ASSERT_EQ(item.size(), 1u);
        if (item[0].end_of_epoch) break;
        for (int64_t id : Ids(item)) got.push_back(id);
      }
      EXPECT_EQ(got, want) << "workers " << workers << ", cut after " << k;
    }
  }
}

TEST(IterableResume, WithoutStreamHooksCheckpointFailsWithFailedPrecondition) {
  auto dataset = ScriptedStreams::Strided(50);  // set_resumable(false)
  absl::StatusOr<Loader> loader =
      LoaderBuilder(std::static_pointer_cast<const IterableDataset>(dataset))
          .batch_size(4)
          .num_workers(2)
          .device(Device::Host())
          .Build();
  ASSERT_TRUE(loader.ok());
  ASSERT_EQ(ReadItems(*loader, 1).size(), 1u);
  absl::StatusOr<LoaderCheckpoint> checkpoint = loader->Checkpoint();
  EXPECT_EQ(checkpoint.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(checkpoint.status().message(), HasSubstr("SaveState()"));
}

TEST(IterableResume, RejectsAnotherShardCountNamingIt) {
  auto dataset = ScriptedStreams::Strided(50);
  dataset->set_resumable(true);
  auto iterable = std::static_pointer_cast<const IterableDataset>(dataset);
  absl::StatusOr<Loader> loader = LoaderBuilder(iterable)
                                      .batch_size(4)
                                      .num_workers(2)
                                      .device(Device::Host())
                                      .Build();
  ASSERT_TRUE(loader.ok());
  ReadItems(*loader, 2);
  absl::StatusOr<LoaderCheckpoint> checkpoint = loader->Checkpoint();
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  const absl::Status status = LoaderBuilder(iterable)
                                  .batch_size(4)
                                  .num_workers(3)
                                  .device(Device::Host())
                                  .resume(*checkpoint)
                                  .Build()
                                  .status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("'num_shards' = 2"));
}

}  // namespace
}  // namespace pinwheel
