// LoaderBuilder::Build() validation: every invalid option is an
// InvalidArgument naming the option, the value and the rule; a batch too
// large for a slot, a device that does not exist and host memory the machine
// cannot provide are clear errors with their sizes, from Build(), never a
// crash.
#include "loader/loader_builder.h"

#include <cstdint>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <memory>
#include <optional>
#include <string>
#include <unistd.h>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"

#include "loader/dataset.h"
#include "loader/loader_checkpoint.h"
#include "tests/support/scripted_streams.h"
#include "tests/support/test_datasets.h"
#include "transfer/device.h"

namespace pinwheel {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using testing_support::PatternDataset;

// A dataset of huge samples that is never read: Build() must fail before.
class HugeSampleDataset : public Dataset {
 public:
  explicit HugeSampleDataset(int64_t sample_bytes) {
    layout_ = *SampleLayout::Create(
        {{.name = "blob", .dtype = DType::kUInt8, .shape = {sample_bytes}}});
  }
  int64_t size() const override { return 1 << 20; }
  const SampleLayout& layout() const override { return layout_; }
  absl::Status Read(int64_t, SampleView&) const override {
    return absl::InternalError("HugeSampleDataset is never read");
  }

 private:
  SampleLayout layout_;
};

LoaderBuilder ValidBuilder() {
  LoaderBuilder builder(std::make_shared<PatternDataset>(100));
  builder.batch_size(10).num_workers(1).device(Device::Host());
  return builder;
}

// Checks that `builder` fails with InvalidArgument whose message names the
// option, the value and (a piece of) the rule.
void ExpectInvalid(const LoaderBuilder& builder, const std::string& option,
                   const std::string& value, const std::string& rule) {
  absl::StatusOr<Loader> loader = builder.Build();
  ASSERT_FALSE(loader.ok())
      << "option " << option << " = " << value << " was accepted";
  EXPECT_EQ(loader.status().code(), absl::StatusCode::kInvalidArgument)
      << loader.status();
  EXPECT_THAT(std::string(loader.status().message()),
              AllOf(HasSubstr(absl::StrCat("'", option, "'")),
                    HasSubstr(absl::StrCat("= ", value)), HasSubstr(rule)));
}

TEST(LoaderBuilder, ValidOptionsBuild) {
  absl::StatusOr<Loader> loader = ValidBuilder().Build();
  ASSERT_TRUE(loader.ok()) << loader.status();
  EXPECT_EQ(loader->batches_per_epoch(), 10);
}

TEST(LoaderBuilder, RejectsBatchSizeZero) {
  ExpectInvalid(ValidBuilder().batch_size(0), "batch_size", "0", ">= 1");
}

TEST(LoaderBuilder, RejectsNegativeBatchSize) {
  ExpectInvalid(ValidBuilder().batch_size(-5), "batch_size", "-5", ">= 1");
}

TEST(LoaderBuilder, RejectsNegativeNumWorkers) {
  // -1 is kNumWorkersFromCpus (tests/loader/loader_builder_cpus_test.cc),
  // -2 kAuto (tests/loader/pipeline/auto_tune_test.cc).
  ExpectInvalid(ValidBuilder().num_workers(-3), "num_workers", "-3",
                "0..256, or kNumWorkersFromCpus (-1), or kAuto (-2)");
}

TEST(LoaderBuilder, RejectsTooManyWorkers) {
  ExpectInvalid(ValidBuilder().num_workers(257), "num_workers", "257",
                "0..256");
}

TEST(LoaderBuilder, AcceptsTheNumWorkersBounds) {
  for (int workers : {0, 256}) {
    absl::StatusOr<Loader> loader = ValidBuilder().num_workers(workers).Build();
    EXPECT_TRUE(loader.ok())
        << "num_workers " << workers << ": " << loader.status();
  }
}

TEST(LoaderBuilder, RejectsPrefetchZero) {
  ExpectInvalid(ValidBuilder().prefetch(0), "prefetch", "0", "1..1024");
}

TEST(LoaderBuilder, RejectsPrefetchAboveLimit) {
  ExpectInvalid(ValidBuilder().prefetch(1025), "prefetch", "1025", "1..1024");
}

TEST(LoaderBuilder, RejectsDeviceBuffersZero) {
  ExpectInvalid(ValidBuilder().device_buffers(0), "device_buffers", "0",
                "1..64");
}

TEST(LoaderBuilder, RejectsDeviceBuffersAboveLimit) {
  ExpectInvalid(ValidBuilder().device_buffers(65), "device_buffers", "65",
                "1..64");
}

TEST(LoaderBuilder, RejectsWorldSizeZero) {
  ExpectInvalid(ValidBuilder().distributed(0, 0), "world_size", "0", ">= 1");
}

TEST(LoaderBuilder, RejectsRankEqualToWorldSize) {
  ExpectInvalid(ValidBuilder().distributed(4, 4), "rank", "4", "0..3");
}

TEST(LoaderBuilder, RejectsNegativeRank) {
  ExpectInvalid(ValidBuilder().distributed(-1, 4), "rank", "-1", "0..3");
}

TEST(LoaderBuilder, RejectsZeroTimeout) {
  ExpectInvalid(ValidBuilder().timeout(absl::ZeroDuration()), "timeout", "0",
                "> 0");
}

TEST(LoaderBuilder, RejectsNegativeTimeout) {
  ExpectInvalid(ValidBuilder().timeout(absl::Milliseconds(-200)), "timeout",
                "-200ms", "> 0");
}

TEST(LoaderBuilder, RejectsNullDataset) {
  LoaderBuilder builder{std::shared_ptr<const Dataset>()};
  builder.device(Device::Host());
  absl::StatusOr<Loader> loader = builder.Build();
  ASSERT_FALSE(loader.ok());
  EXPECT_EQ(loader.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(loader.status().message()),
              AllOf(HasSubstr("dataset"), HasSubstr("null")));
}

// Regression (issue 18, item 6): with an IterableDataset, world_size ×
// num_workers overflowed int (WORLD_SIZE=2^30 with 4 workers): the loader
// built, opened shards of num_shards 0 and wrote num_shards 0 into its
// checkpoints, which FromBytes refuses, so the job could never resume.
TEST(LoaderBuilder, RejectsMoreShardsThanACheckpointHoldsNamingThem) {
  for (int num_workers : {4, 2}) {  // 2^32 shards, and 2^31: one too many
    LoaderBuilder builder(testing_support::ScriptedStreams::EachShard(10));
    builder.batch_size(2)
        .num_workers(num_workers)
        .distributed(0, 1 << 30)
        .device(Device::Host());
    absl::StatusOr<Loader> loader = builder.Build();
    ASSERT_FALSE(loader.ok()) << num_workers << " workers were accepted";
    EXPECT_EQ(loader.status().code(), absl::StatusCode::kInvalidArgument)
        << loader.status();
    EXPECT_THAT(
        std::string(loader.status().message()),
        AllOf(HasSubstr("world_size 1073741824"),
              HasSubstr(absl::StrCat("num_workers = ", num_workers)),
              HasSubstr(absl::StrCat(int64_t{num_workers} << 30, " shards")),
              HasSubstr("at most 2147483647")));
  }
}

// The limit itself builds, reads and checkpoints a resumable checkpoint;
// only this rank's shard is opened.
TEST(LoaderBuilder, IterableAtTheShardLimitBuildsAndResumes) {
  constexpr int kWorldSize = 0x7fffffff;
  auto dataset = testing_support::ScriptedStreams::EachShard(1000);
  dataset->set_resumable(true);
  LoaderBuilder builder(dataset);
  builder.batch_size(2)
      .num_workers(1)
      .distributed(kWorldSize - 1, kWorldSize)
      .device(Device::Host());
  absl::StatusOr<Loader> loader = builder.Build();
  ASSERT_TRUE(loader.ok()) << loader.status();
  absl::StatusOr<std::optional<DeviceBatch>> batch = loader->Next();
  ASSERT_TRUE(batch.ok()) << batch.status();
  ASSERT_TRUE(batch->has_value());
  batch->reset();
  EXPECT_EQ(dataset->opens(), 1);
  absl::StatusOr<LoaderCheckpoint> checkpoint = loader->Checkpoint();
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  EXPECT_EQ(checkpoint->num_shards, kWorldSize);
  absl::StatusOr<LoaderCheckpoint> read =
      LoaderCheckpoint::FromBytes(checkpoint->ToBytes());
  ASSERT_TRUE(read.ok()) << read.status();
  builder.resume(*read);
  absl::StatusOr<Loader> resumed = builder.Build();
  EXPECT_TRUE(resumed.ok()) << resumed.status();
}

// A dataset of a given (possibly negative) size that is never read.
class SizedDataset : public Dataset {
 public:
  explicit SizedDataset(int64_t size) : size_(size), pattern_(1) {}
  int64_t size() const override { return size_; }
  const SampleLayout& layout() const override { return pattern_.layout(); }
  absl::Status Read(int64_t, SampleView&) const override {
    return absl::InternalError("SizedDataset is never read");
  }

 private:
  int64_t size_;
  PatternDataset pattern_;
};

// Regression: a negative size() was accepted.
TEST(LoaderBuilder, RejectsANegativeDatasetSizeNamingIt) {
  absl::StatusOr<Loader> loader =
      LoaderBuilder(std::make_shared<SizedDataset>(-5))
          .batch_size(2)
          .device(Device::Host())
          .Build();
  ASSERT_FALSE(loader.ok());
  EXPECT_EQ(loader.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(loader.status().message()),
              AllOf(HasSubstr("size() = -5"), HasSubstr(">= 0")));
}

// Checks that `builder` is refused because no epoch can hold a batch, and
// that the message names every size involved.
void ExpectNoBatchPerEpoch(const LoaderBuilder& builder,
                           const std::vector<std::string>& sizes) {
  absl::StatusOr<Loader> loader = builder.Build();
  ASSERT_FALSE(loader.ok()) << "a loader whose epochs have no batch was built";
  EXPECT_EQ(loader.status().code(), absl::StatusCode::kInvalidArgument);
  const std::string message(loader.status().message());
  EXPECT_THAT(message, HasSubstr("no epoch can hold a batch"));
  for (const std::string& size : sizes) EXPECT_THAT(message, HasSubstr(size));
}

// Regression: these loaders were built and their producer looped over empty
// epochs forever (~40 MiB/s of growth, a core busy).
TEST(LoaderBuilder, RejectsAnEmptyDatasetNamingItsSize) {
  for (int workers : {0, 2}) {
    ExpectNoBatchPerEpoch(LoaderBuilder(std::make_shared<PatternDataset>(0))
                              .batch_size(4)
                              .num_workers(workers)
                              .device(Device::Host()),
                          {"dataset size 0", "batch_size = 4"});
  }
}

TEST(LoaderBuilder, RejectsOneSampleWithBatchSizeTwoAndDropLast) {
  ExpectNoBatchPerEpoch(
      LoaderBuilder(std::make_shared<PatternDataset>(1))
          .batch_size(2)
          .drop_last(true)
          .num_workers(1)
          .device(Device::Host()),
      {"dataset size 1", "batch_size = 2", "drop_last = true"});
  // Without drop_last the one sample is a batch.
  absl::StatusOr<Loader> loader =
      LoaderBuilder(std::make_shared<PatternDataset>(1))
          .batch_size(2)
          .num_workers(1)
          .device(Device::Host())
          .Build();
  ASSERT_TRUE(loader.ok()) << loader.status();
  EXPECT_EQ(loader->batches_per_epoch(), 1);
}

TEST(LoaderBuilder, RejectsARankWithNoSamplesUnderDropUnevenTail) {
  LoaderOptions options;
  options.batch_size = 1;
  options.rank = 3;
  options.world_size = 4;
  options.drop_uneven_tail = true;
  options.device = Device::Host();
  ExpectNoBatchPerEpoch(
      LoaderBuilder(std::make_shared<PatternDataset>(3)).options(options),
      {"dataset size 3", "rank 3 of world_size 4", "drop_uneven_tail = true"});
}

TEST(LoaderBuilder, RejectsABatchLargerThan64GiBWithItsSizes) {
  // PatternDataset samples are 65 bytes; 2^31 of them exceed 64 GiB.
  const int64_t batch_size = int64_t{1} << 31;
  absl::StatusOr<Loader> loader = ValidBuilder().batch_size(batch_size).Build();
  ASSERT_FALSE(loader.ok());
  EXPECT_EQ(loader.status().code(), absl::StatusCode::kInvalidArgument)
      << loader.status();
  EXPECT_THAT(
      std::string(loader.status().message()),
      AllOf(HasSubstr("batch_size"), HasSubstr(absl::StrCat(batch_size)),
            HasSubstr("65 bytes"), HasSubstr("64 GiB")));
}

TEST(LoaderBuilder, RejectsAHugeSampleTimesBatchAbove64GiB) {
  // 1 GiB samples, batch 65: 65 GiB.
  auto dataset = std::make_shared<HugeSampleDataset>(int64_t{1} << 30);
  absl::StatusOr<Loader> loader = LoaderBuilder(dataset)
                                      .batch_size(65)
                                      .num_workers(1)
                                      .prefetch(1)
                                      .device(Device::Host())
                                      .Build();
  ASSERT_FALSE(loader.ok());
  EXPECT_EQ(loader.status().code(), absl::StatusCode::kInvalidArgument)
      << loader.status();
  EXPECT_THAT(std::string(loader.status().message()),
              AllOf(HasSubstr("batch_size = 65"), HasSubstr("1073741824 bytes"),
                    HasSubstr("64 GiB")));
}

TEST(LoaderBuilder, HostMemoryTheMachineLacksIsResourceExhaustedWithSizes) {
  // 512 MiB samples × batch 64 = 32 GiB slots; ask for more slots than the
  // machine's physical memory holds, so the ring is refused up front (never
  // touched, never an OOM kill).
  const int64_t sample_bytes = int64_t{512} << 20;
  const int64_t slot_bytes = sample_bytes * 64;
  const int64_t physical =
      static_cast<int64_t>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGESIZE);
  ASSERT_GT(physical, 0);
  const int prefetch = static_cast<int>(physical / slot_bytes) + 8;
  ASSERT_LE(prefetch, 1024) << "machine too large for this test";
  auto dataset = std::make_shared<HugeSampleDataset>(sample_bytes);
  absl::StatusOr<Loader> loader = LoaderBuilder(dataset)
                                      .batch_size(64)
                                      .num_workers(1)
                                      .prefetch(prefetch)
                                      .device(Device::Host())
                                      .Build();
  ASSERT_FALSE(loader.ok());
  EXPECT_EQ(loader.status().code(), absl::StatusCode::kResourceExhausted)
      << loader.status();
  const int64_t ring_bytes = slot_bytes * prefetch;
  EXPECT_THAT(std::string(loader.status().message()),
              AllOf(HasSubstr(absl::StrCat("prefetch = ", prefetch)),
                    HasSubstr("batch_size 64"),
                    HasSubstr(absl::StrCat(sample_bytes, " bytes per sample")),
                    HasSubstr(absl::StrCat(ring_bytes, " bytes")),
                    HasSubstr(absl::StrCat(physical))));
}

TEST(LoaderBuilder, CudaDeviceThatDoesNotExistIsAnErrorNamingIt) {
  absl::StatusOr<Device> device = Device::Cuda(99);
  ASSERT_FALSE(device.ok());
  EXPECT_THAT(std::string(device.status().message()), HasSubstr("cuda:99"));
  if (Device::CudaDeviceCount() > 0) {
    EXPECT_EQ(device.status().code(), absl::StatusCode::kOutOfRange)
        << device.status();
    EXPECT_THAT(
        std::string(device.status().message()),
        HasSubstr(absl::StrCat("has ", Device::CudaDeviceCount(), " GPU(s)")));
  } else {
    EXPECT_EQ(device.status().code(), absl::StatusCode::kFailedPrecondition)
        << device.status();
  }
  absl::StatusOr<Device> parsed = Device::Parse("cuda:99");
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.status().code(), device.status().code());
  EXPECT_THAT(std::string(parsed.status().message()), HasSubstr("cuda:99"));
}

TEST(LoaderBuilder, CudaZeroWithoutAGpuIsFailedPrecondition) {
  if (Device::CudaDeviceCount() > 0) {
    GTEST_SKIP() << "this machine has a GPU: cuda:0 exists";
  }
  absl::StatusOr<Device> device = Device::Cuda(0);
  ASSERT_FALSE(device.ok());
  EXPECT_EQ(device.status().code(), absl::StatusCode::kFailedPrecondition)
      << device.status();
  EXPECT_THAT(std::string(device.status().message()), HasSubstr("cuda:0"));
}

TEST(LoaderBuilder, DefaultDeviceIsTheHostWithoutAGpu) {
  if (Device::CudaDeviceCount() > 0) {
    GTEST_SKIP() << "this machine has a GPU: the default is cuda:0";
  }
  LoaderBuilder builder(std::make_shared<PatternDataset>(10));
  absl::StatusOr<Loader> loader = builder.batch_size(5).Build();
  ASSERT_TRUE(loader.ok()) << loader.status();
  EXPECT_EQ(loader->device(), Device::Host());
}

}  // namespace
}  // namespace pinwheel
