// The gather path (LoaderOptions::gather, loader/gather/gather_plan.h):
// batches bit-identical to the worker path's, resume and world sizes
// unchanged, fallback reasons, a refused registration, memory admission and
// registrations shared between loaders. On the host backend (the gather's
// memcpy loop); the _CUDA cases run the kernels on a GPU.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <string>
#include <unistd.h>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "gtest/gtest.h"

#include "loader/gather/gather_memory.h"
#include "loader/gather/gather_plan.h"
#include "loader/in_memory_dataset.h"
#include "loader/index_sampler.h"
#include "loader/loader.h"
#include "loader/loader_builder.h"
#include "loader/record_file.h"
#include "loader/token_window_dataset.h"
#include "pinning/host_memory_limits.h"
#include "pinning/host_registration.h"
#include "tests/support/drain_epoch.h"
#include "tests/support/skip_without_gpu.h"
#include "transfer/device_buffer_pool.h"
#include "transfer/stream.h"
#include "transfer/widen_tokens.h"

namespace pinwheel {
namespace {

using testing_support::DrainedEpoch;
using testing_support::DrainEpoch;
using testing_support::HostBatch;

std::string TempPath(const std::string& name) {
  return absl::StrCat(::testing::TempDir(), "/gather_test_", getpid(), "_",
                      name);
}

// Rows of an image-like u8[3][5] field and an i64 label, each byte a
// function of the index.
std::shared_ptr<InMemoryDataset> Rows(int64_t n) {
  SampleLayout layout = *SampleLayout::Create(
      {{"image", DType::kUInt8, {3, 5}}, {"label", DType::kInt64, {}}});
  std::vector<std::byte> images(static_cast<size_t>(n) * 15);
  std::vector<std::byte> labels(static_cast<size_t>(n) * 8);
  for (size_t i = 0; i < images.size(); ++i) {
    images[i] = static_cast<std::byte>(i * 7 + 3);
  }
  for (int64_t i = 0; i < n; ++i) {
    const int64_t label = i * 1000 + 17;
    std::memcpy(labels.data() + i * 8, &label, 8);
  }
  return *InMemoryDataset::CreateOwning(std::move(layout), n,
                                        {std::move(images), std::move(labels)});
}

// 20 fields (more than one kernel launch takes), u8[1] to u8[20].
std::shared_ptr<InMemoryDataset> ManyFields() {
  constexpr int kFields = 20;
  constexpr int64_t kSamples = 37;
  std::vector<FieldSpec> specs;
  std::vector<std::vector<std::byte>> arrays;
  for (int f = 0; f < kFields; ++f) {
    specs.push_back({absl::StrCat("f", f), DType::kUInt8, {f + 1}});
    std::vector<std::byte> bytes(static_cast<size_t>(kSamples) * (f + 1));
    for (size_t b = 0; b < bytes.size(); ++b) {
      bytes[b] = static_cast<std::byte>(b * 13 + f);
    }
    arrays.push_back(std::move(bytes));
  }
  return *InMemoryDataset::CreateOwning(*SampleLayout::Create(std::move(specs)),
                                        kSamples, std::move(arrays));
}

std::string WriteRecords(const std::string& name, int64_t n) {
  const std::string path = TempPath(name);
  SampleLayout layout = *SampleLayout::Create(
      {{"x", DType::kFloat32, {7}}, {"y", DType::kUInt16, {3}}});
  absl::StatusOr<RecordFileWriter> writer =
      RecordFileWriter::Create(path, layout);
  EXPECT_TRUE(writer.ok()) << writer.status();
  std::vector<std::byte> record(layout.sample_bytes());
  for (int64_t i = 0; i < n; ++i) {
    for (size_t b = 0; b < record.size(); ++b) {
      record[b] = static_cast<std::byte>(i * 31 + b);
    }
    EXPECT_TRUE(writer->AppendRaw(record).ok());
  }
  EXPECT_TRUE(writer->Close().ok());
  return path;
}

template <typename T>
std::string WriteTokens(const std::string& name, int64_t count) {
  const std::string path = TempPath(name);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  for (int64_t i = 0; i < count; ++i) {
    const T token = static_cast<T>(i * 2654435761u + 12345);
    out.write(reinterpret_cast<const char*>(&token), sizeof(T));
  }
  return path;
}

absl::StatusOr<Loader> Build(std::shared_ptr<const Dataset> dataset,
                             LoaderOptions options, GatherMode mode) {
  options.gather = mode;
  if (!options.device) options.device = Device::Host();
  return LoaderBuilder(std::move(dataset)).options(options).Build();
}

// Drains `epochs` epochs with fields copied to the host.
std::vector<HostBatch> Drain(Loader& loader, int epochs) {
  std::vector<HostBatch> all;
  for (int e = 0; e < epochs; ++e) {
    DrainedEpoch epoch = DrainEpoch(loader, {.copy_fields = true});
    EXPECT_TRUE(epoch.status.ok()) << epoch.status;
    all.insert(all.end(), epoch.batches.begin(), epoch.batches.end());
  }
  return all;
}

void ExpectSameBatches(const std::vector<HostBatch>& gathered,
                       const std::vector<HostBatch>& read) {
  ASSERT_EQ(gathered.size(), read.size());
  for (size_t b = 0; b < read.size(); ++b) {
    SCOPED_TRACE(absl::StrCat("batch ", b));
    EXPECT_EQ(gathered[b].epoch, read[b].epoch);
    EXPECT_EQ(gathered[b].index, read[b].index);
    EXPECT_EQ(gathered[b].indices, read[b].indices);
    ASSERT_EQ(gathered[b].fields.size(), read[b].fields.size());
    for (size_t f = 0; f < read[b].fields.size(); ++f) {
      EXPECT_TRUE(gathered[b].fields[f] == read[b].fields[f]) << "field " << f;
    }
  }
}

// Builds a gather loader and a worker loader with `options` and checks that
// they deliver the same bytes over `epochs` epochs.
void ExpectGatherMatchesWorkers(std::shared_ptr<const Dataset> dataset,
                                const LoaderOptions& options, int epochs = 2) {
  absl::StatusOr<Loader> gathered = Build(dataset, options, GatherMode::kOn);
  ASSERT_TRUE(gathered.ok()) << gathered.status();
  absl::StatusOr<Loader> read = Build(dataset, options, GatherMode::kOff);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_TRUE(gathered->stats().gather);
  EXPECT_EQ(gathered->stats().gather_fallback, "");
  EXPECT_FALSE(read->stats().gather);
  EXPECT_EQ(read->stats().gather_fallback, "gather = GatherMode::kOff");
  const std::vector<HostBatch> a = Drain(*gathered, epochs);
  const std::vector<HostBatch> b = Drain(*read, epochs);
  ASSERT_FALSE(b.empty());
  ExpectSameBatches(a, b);
}

// The page ranges a gather loader over `dataset` registers. Holding it
// keeps the copies of small regions (Note [small arrays are copied onto
// pages of their own]) alive, so loaders built meanwhile share them and
// register these very ranges.
struct HeldRanges {
  internal::GatherMemory memory;
  std::vector<absl::Span<const std::byte>> ranges;
};
HeldRanges RangesOf(const Dataset& dataset) {
  absl::StatusOr<GatherSource> source = dataset.Gather(UINT64_MAX);
  EXPECT_TRUE(source.ok()) << source.status();
  if (!source.ok()) return {};
  absl::StatusOr<internal::GatherMemory> memory =
      internal::PlaceRegions(*source);
  EXPECT_TRUE(memory.ok()) << memory.status();
  if (!memory.ok()) return {};
  HeldRanges held{.memory = *std::move(memory)};
  held.ranges = internal::RegisteredRanges(held.memory.regions);
  return held;
}

// Returns whether the whole pages around `a` and `b` have one in common.
bool SharePage(absl::Span<const std::byte> a, absl::Span<const std::byte> b) {
  constexpr uintptr_t kPage = 4096;
  const auto a_begin = reinterpret_cast<uintptr_t>(a.data()) / kPage;
  const auto a_end =
      (reinterpret_cast<uintptr_t>(a.data()) + a.size() - 1) / kPage;
  const auto b_begin = reinterpret_cast<uintptr_t>(b.data()) / kPage;
  const auto b_end =
      (reinterpret_cast<uintptr_t>(b.data()) + b.size() - 1) / kPage;
  return a_begin <= b_end && b_begin <= a_end;
}

// A registrar that registers nothing and records what it was asked to
// register. Thread-compatible (PlanGather calls it on the caller's thread).
struct RecordingRegistrar {
  std::vector<absl::Span<const std::byte>> registered;
  HostRegistrar Make() {
    HostRegistrar registrar = CudaHostRegistrar();
    registrar.register_memory = [this](absl::Span<const std::byte> region,
                                       int) {
      registered.push_back(region);
      return absl::OkStatus();
    };
    return registrar;
  }
};

LoaderOptions Shuffled(int64_t batch_size, int num_workers) {
  LoaderOptions options;
  options.batch_size = batch_size;
  options.shuffle = true;
  options.seed = 99;
  options.num_workers = num_workers;
  options.prefetch = 3;
  options.device_buffers = 2;
  options.gather = GatherMode::kAuto;  // the default is kOff
  return options;
}

TEST(GatherSource, InMemoryRowsAreTheDatasetsOwnArrays) {
  const auto dataset = Rows(10);
  absl::StatusOr<GatherSource> source = dataset->Gather(0);
  ASSERT_TRUE(source.ok()) << source.status();
  ASSERT_EQ(source->regions.size(), 2u);
  ASSERT_EQ(source->fields.size(), 2u);
  EXPECT_EQ(source->regions[0].size(), 150u);
  EXPECT_EQ(source->fields[1].stride, 8u);
  EXPECT_EQ(source->owner, nullptr);  // nothing copied
  int64_t label;
  std::memcpy(&label, source->regions[1].data() + 3 * 8, 8);
  EXPECT_EQ(label, 3017);
}

TEST(GatherSource, ARecordFileIsCopiedNotMappedAndKeepsItsBytesAfterARename) {
  const std::string path = WriteRecords("copied_records", 12);
  auto dataset = RecordFileDataset::Open(path);
  ASSERT_TRUE(dataset.ok()) << dataset.status();
  absl::StatusOr<GatherSource> source = (*dataset)->Gather(UINT64_MAX);
  ASSERT_TRUE(source.ok()) << source.status();
  ASSERT_EQ(source->regions.size(), 1u);
  ASSERT_NE(source->owner, nullptr);
  const GatherSource::Field& y = source->fields[1];
  // Record 5's bytes, from the copy, equal the mapping's; not its address.
  const absl::Span<const std::byte> record = (*dataset)->record(5);
  EXPECT_NE(source->regions[0].data() + y.offset + 5 * y.stride,
            record.data() + 28);
  EXPECT_EQ(std::memcmp(source->regions[0].data() + y.offset + 5 * y.stride,
                        record.data() + 28, y.bytes),
            0);
  // Replaced by rename: the held copy is the same bytes; a second Gather
  // while one is held shares it.
  const std::string fresh = WriteRecords("copied_records_new", 12);
  ASSERT_EQ(std::rename(fresh.c_str(), path.c_str()), 0);
  absl::StatusOr<GatherSource> again = (*dataset)->Gather(0);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->regions[0].data(), source->regions[0].data());
  std::remove(path.c_str());
}

TEST(GatherSource, AFileLargerThanTheLimitIsRefusedBeforeItIsRead) {
  const std::string path = WriteRecords("limited_records", 12);
  auto dataset = RecordFileDataset::Open(path);
  ASSERT_TRUE(dataset.ok()) << dataset.status();
  absl::StatusOr<GatherSource> source = (*dataset)->Gather(100);
  EXPECT_EQ(source.status().code(), absl::StatusCode::kResourceExhausted);
  std::remove(path.c_str());
}

TEST(GatherSource, TokenWindowKeysAreTheWindowStarts) {
  const std::string path = WriteTokens<uint16_t>("keyed_tokens", 1000);
  for (TokenOutput output :
       {TokenOutput::kInputAndTargetInt64, TokenOutput::kWindow}) {
    auto dataset = TokenWindowDataset::Open(
        path, {.seq_len = 32, .windows = 20, .seed = 8, .output = output});
    ASSERT_TRUE(dataset.ok()) << dataset.status();
    absl::StatusOr<GatherSource> source = (*dataset)->Gather(UINT64_MAX);
    ASSERT_TRUE(source.ok()) << source.status();
    EXPECT_EQ(source->regions[0].size(), 2000u);
    EXPECT_EQ(source->kind, output == TokenOutput::kWindow
                                ? GatherSource::Kind::kCopy
                                : GatherSource::Kind::kWidenWindow);
    for (int64_t i = 0; i < 20; ++i) {
      EXPECT_EQ(source->key(i), (*dataset)->WindowStart(i));
    }
  }
  std::remove(path.c_str());
}

TEST(GatherPlan, RegistersWholePagesAndMergesRegionsSharingOne) {
  alignas(4096) static std::byte memory[4 * 4096];
  GatherSource source;
  source.regions = {absl::MakeConstSpan(memory + 100, 50),
                    absl::MakeConstSpan(memory + 200, 4000),  // pages 0-1
                    absl::MakeConstSpan(memory + 3 * 4096 + 8, 8),
                    {}};
  const std::vector<absl::Span<const std::byte>> ranges =
      internal::RegisteredRanges(source.regions);
  ASSERT_EQ(ranges.size(), 2u);
  EXPECT_EQ(ranges[0].data(), memory);
  EXPECT_EQ(ranges[0].size(), 2u * 4096);
  EXPECT_EQ(ranges[1].data(), memory + 3 * 4096);
  EXPECT_EQ(ranges[1].size(), 4096u);
}

// Note [small arrays are copied onto pages of their own]: registering the
// pages around small heap arrays in place registered their neighbours too,
// and the driver refused copies into a neighbour straddling a registered
// page's edge (the flaky MoreFieldsThanOneLaunchTakesAreAllGathered_CUDA).
TEST(GatherPlan, SmallArraysAreRegisteredFromACopyNeverInPlace) {
  const std::shared_ptr<InMemoryDataset> dataset = ManyFields();
  RecordingRegistrar recording;
  HostRegistry registry(recording.Make());
  absl::StatusOr<internal::LoaderPath> plan = internal::PlanGather(
      Shuffled(8, 1), Device::Host(), dataset, MemoryLimits(), registry);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_FALSE(recording.registered.empty());
  const absl::StatusOr<GatherSource> source = dataset->Gather(UINT64_MAX);
  ASSERT_TRUE(source.ok()) << source.status();
  for (absl::Span<const std::byte> range : recording.registered) {
    EXPECT_EQ(reinterpret_cast<uintptr_t>(range.data()) % 4096, 0u);
    EXPECT_EQ(range.size() % 4096, 0u);
    for (size_t r = 0; r < source->regions.size(); ++r) {
      EXPECT_FALSE(SharePage(range, source->regions[r]))
          << "array " << r << " of " << source->regions[r].size()
          << " bytes was registered in place";
    }
  }
  // All 20 arrays (37 to 740 bytes each) share one copy: one registration.
  EXPECT_EQ(recording.registered.size(), 1u);
}

TEST(GatherPlan, ArraysOnPagesOfTheirOwnAndLargeOnesAreRegisteredInPlace) {
  alignas(4096) static std::byte pages[2 * 4096];
  SampleLayout page_rows =
      *SampleLayout::Create({{"row", DType::kUInt8, {4096}}});
  auto on_pages = InMemoryDataset::Create(page_rows, 2, {pages});
  ASSERT_TRUE(on_pages.ok()) << on_pages.status();
  SampleLayout large_rows =
      *SampleLayout::Create({{"row", DType::kUInt8, {1024}}});
  auto large = InMemoryDataset::CreateOwning(
      large_rows, internal::kCopiedRegionBytes / 1024,
      {std::vector<std::byte>(internal::kCopiedRegionBytes, std::byte{7})});
  ASSERT_TRUE(large.ok()) << large.status();
  for (const std::shared_ptr<InMemoryDataset>& dataset : {*on_pages, *large}) {
    RecordingRegistrar recording;
    HostRegistry registry(recording.Make());
    absl::StatusOr<internal::LoaderPath> plan = internal::PlanGather(
        Shuffled(2, 1), Device::Host(), dataset, MemoryLimits(), registry);
    ASSERT_TRUE(plan.ok()) << plan.status();
    const absl::Span<const std::byte> region =
        dataset->Gather(UINT64_MAX)->regions[0];
    ASSERT_EQ(recording.registered.size(), 1u);
    const absl::Span<const std::byte> range = recording.registered[0];
    EXPECT_LE(range.data(), region.data());
    EXPECT_GE(range.data() + range.size(), region.data() + region.size());
    EXPECT_LT(range.size(), region.size() + 2 * 4096);
  }
}

TEST(GatherPath, InMemoryBatchesAreTheWorkerPathsBytes) {
  const auto dataset = Rows(103);  // a short last batch
  for (int workers : {0, 1, 4}) {
    SCOPED_TRACE(absl::StrCat("num_workers ", workers));
    ExpectGatherMatchesWorkers(dataset, Shuffled(8, workers));
  }
}

TEST(GatherPath, RecordFileBatchesAreTheWorkerPathsBytes) {
  const std::string path = WriteRecords("records", 77);
  absl::StatusOr<std::shared_ptr<RecordFileDataset>> dataset =
      RecordFileDataset::Open(path);
  ASSERT_TRUE(dataset.ok()) << dataset.status();
  ExpectGatherMatchesWorkers(*dataset, Shuffled(10, 2));
  std::remove(path.c_str());
}

struct TokenCase {
  int token_bytes;
  bool signed_tokens;
  TokenOutput output;
};

class GatherTokenWindows : public ::testing::TestWithParam<TokenCase> {};

TEST_P(GatherTokenWindows, BatchesAreTheWorkerPathsBytes) {
  const TokenCase c = GetParam();
  const std::string name =
      absl::StrCat("tokens_", c.token_bytes, c.signed_tokens ? "s" : "u",
                   static_cast<int>(c.output));
  std::string path;
  switch (c.token_bytes) {
    case 1:
      path = WriteTokens<uint8_t>(name, 3000);
      break;
    case 2:
      path = WriteTokens<uint16_t>(name, 3000);
      break;
    case 4:
      path = WriteTokens<uint32_t>(name, 3000);
      break;
    default:
      path = WriteTokens<int64_t>(name, 3000);
      break;
  }
  absl::StatusOr<std::shared_ptr<TokenWindowDataset>> dataset =
      TokenWindowDataset::Open(path, {.token_bytes = c.token_bytes,
                                      .signed_tokens = c.signed_tokens,
                                      .seq_len = 300,  // > one kernel tile
                                      .windows = 45,
                                      .seed = 5,
                                      .output = c.output});
  ASSERT_TRUE(dataset.ok()) << dataset.status();
  ExpectGatherMatchesWorkers(*dataset, Shuffled(4, 1));
  std::remove(path.c_str());
}

INSTANTIATE_TEST_SUITE_P(
    EachWidthAndOutput, GatherTokenWindows,
    ::testing::Values(TokenCase{2, false, TokenOutput::kInputAndTargetInt64},
                      TokenCase{2, false, TokenOutput::kWindow},
                      TokenCase{1, true, TokenOutput::kInputAndTargetInt64},
                      TokenCase{2, true, TokenOutput::kInputAndTargetInt64},
                      TokenCase{4, false, TokenOutput::kInputAndTargetInt64},
                      TokenCase{4, true, TokenOutput::kWindow},
                      TokenCase{8, false, TokenOutput::kInputAndTargetInt64}));

TEST(GatherPath, EveryRankOfADistributedRunMatchesTheWorkerPath) {
  const auto dataset = Rows(50);
  for (int world : {2, 3}) {
    for (int rank = 0; rank < world; ++rank) {
      SCOPED_TRACE(absl::StrCat("rank ", rank, " of ", world));
      LoaderOptions options = Shuffled(4, 1);
      options.world_size = world;
      options.rank = rank;
      ExpectGatherMatchesWorkers(dataset, options);
    }
  }
}

TEST(GatherPath, ACheckpointResumesOnEitherPathAndAnotherWorldSize) {
  const auto dataset = Rows(60);
  const LoaderOptions options = Shuffled(4, 1);
  absl::StatusOr<Loader> gathered = Build(dataset, options, GatherMode::kOn);
  ASSERT_TRUE(gathered.ok()) << gathered.status();
  for (int i = 0; i < 5; ++i) {
    absl::StatusOr<std::optional<DeviceBatch>> batch = gathered->Next();
    ASSERT_TRUE(batch.ok() && batch->has_value());
    ASSERT_TRUE((*batch)->Release().ok());
  }
  absl::StatusOr<LoaderCheckpoint> checkpoint = gathered->Checkpoint();
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  // The rest of the epoch, dealt over two ranks, on both paths.
  for (int rank = 0; rank < 2; ++rank) {
    LoaderOptions resumed = options;
    resumed.world_size = 2;
    resumed.rank = rank;
    resumed.device = Device::Host();
    std::vector<std::vector<HostBatch>> runs;
    for (GatherMode mode : {GatherMode::kOn, GatherMode::kOff}) {
      resumed.gather = mode;
      absl::StatusOr<Loader> loader =
          LoaderBuilder(dataset).options(resumed).resume(*checkpoint).Build();
      ASSERT_TRUE(loader.ok()) << loader.status();
      EXPECT_EQ(loader->stats().gather, mode == GatherMode::kOn);
      runs.push_back(Drain(*loader, 2));
    }
    ASSERT_FALSE(runs[1].empty());
    ExpectSameBatches(runs[0], runs[1]);
  }
}

// Rows of `row_bytes`-byte images (a function of the index) and an i64
// label: rows of 32 KiB and more go by the copy engines on a GPU (Note
// [large rows by the copy engines] in loader/gather/gather_plan.cc).
std::shared_ptr<InMemoryDataset> LargeRows(int64_t n, int64_t row_bytes) {
  SampleLayout layout = *SampleLayout::Create(
      {{"image", DType::kUInt8, {row_bytes}}, {"label", DType::kInt64, {}}});
  std::vector<std::byte> images(static_cast<size_t>(n * row_bytes));
  std::vector<std::byte> labels(static_cast<size_t>(n) * 8);
  for (size_t i = 0; i < images.size(); ++i) {
    images[i] = static_cast<std::byte>((i * 131) ^ (i >> 9));
  }
  for (int64_t i = 0; i < n; ++i) {
    const int64_t label = i * 7 + 5;
    std::memcpy(labels.data() + i * 8, &label, 8);
  }
  return *InMemoryDataset::CreateOwning(std::move(layout), n,
                                        {std::move(images), std::move(labels)});
}

// Every index of a dataset of `n`, backwards, then every even one again.
class BackwardsThenEvens final : public IndexSampler {
 public:
  explicit BackwardsThenEvens(int64_t n) : n_(n) {}
  int64_t size() const override { return n_ + (n_ + 1) / 2; }
  int64_t At(uint64_t, int64_t, int64_t position) const override {
    return position < n_ ? n_ - 1 - position : 2 * (position - n_);
  }

 private:
  int64_t n_;
};

// The loader's own order is computed where the gather runs (Note [the
// order on the device]); a custom sampler's keys are uploaded. Both give
// the worker path's batches.
TEST(GatherPath, TheLoadersOwnOrderIsComputedWhereTheGatherRuns) {
  const auto dataset = Rows(45);
  absl::StatusOr<Loader> own = Build(dataset, Shuffled(4, 3), GatherMode::kOn);
  ASSERT_TRUE(own.ok()) << own.status();
  EXPECT_TRUE(own->stats().gather_order_on_device);
  LoaderOptions custom = Shuffled(4, 1);
  custom.shuffle = false;  // the sampler decides
  custom.sampler = std::make_shared<BackwardsThenEvens>(45);
  absl::StatusOr<Loader> uploaded = Build(dataset, custom, GatherMode::kOn);
  ASSERT_TRUE(uploaded.ok()) << uploaded.status();
  EXPECT_TRUE(uploaded->stats().gather);
  EXPECT_FALSE(uploaded->stats().gather_order_on_device);
  ExpectGatherMatchesWorkers(dataset, custom);
}

TEST(GatherPath, SequentialAndShuffledOrdersOnEveryRankMatchTheWorkerPath) {
  for (const bool shuffle : {false, true}) {
    for (const bool drop_last : {false, true}) {
      for (int world : {1, 3}) {
        SCOPED_TRACE(absl::StrCat("shuffle ", shuffle, " drop_last ", drop_last,
                                  " world ", world));
        LoaderOptions options = Shuffled(7, 0);
        options.shuffle = shuffle;
        options.drop_last = drop_last;
        options.world_size = world;
        options.rank = world - 1;
        ExpectGatherMatchesWorkers(Rows(61), options, 3);
      }
    }
  }
}

// A token-window dataset whose GatherSource names a window function other
// than its key(): the loader must not compute keys it cannot trust.
class MisnamedWindows final : public Dataset {
 public:
  explicit MisnamedWindows(std::shared_ptr<TokenWindowDataset> windows)
      : windows_(std::move(windows)) {}
  int64_t size() const override { return windows_->size(); }
  const SampleLayout& layout() const override { return windows_->layout(); }
  absl::Status Read(int64_t index, SampleView& out) const override {
    return windows_->Read(index, out);
  }
  absl::StatusOr<GatherSource> Gather(uint64_t max_copy_bytes) const override {
    absl::StatusOr<GatherSource> source = windows_->Gather(max_copy_bytes);
    if (source.ok() && source->window_keys.has_value()) {
      source->window_keys->seed ^= 1;
    }
    return source;
  }

 private:
  std::shared_ptr<TokenWindowDataset> windows_;
};

TEST(GatherPath, WindowKeysThatAreNotTheDatasetsKeysAreUploadedInstead) {
  const std::string path = WriteTokens<uint16_t>("misnamed_tokens", 3000);
  auto windows =
      TokenWindowDataset::Open(path, {.seq_len = 40, .windows = 50, .seed = 4});
  ASSERT_TRUE(windows.ok()) << windows.status();
  absl::StatusOr<Loader> honest =
      Build(*windows, Shuffled(6, 0), GatherMode::kOn);
  ASSERT_TRUE(honest.ok()) << honest.status();
  EXPECT_TRUE(honest->stats().gather_order_on_device);
  const auto misnamed = std::make_shared<MisnamedWindows>(*windows);
  absl::StatusOr<Loader> loader =
      Build(misnamed, Shuffled(6, 0), GatherMode::kOn);
  ASSERT_TRUE(loader.ok()) << loader.status();
  EXPECT_FALSE(loader->stats().gather_order_on_device);
  ExpectGatherMatchesWorkers(misnamed, Shuffled(6, 0));
  std::remove(path.c_str());
}

TEST(GatherPath, StartEpochMidEpochRestartsTheOrderOnBothPaths) {
  const auto dataset = Rows(40);
  std::vector<std::vector<HostBatch>> runs;
  for (GatherMode mode : {GatherMode::kOn, GatherMode::kOff}) {
    absl::StatusOr<Loader> loader = Build(dataset, Shuffled(3, 1), mode);
    ASSERT_TRUE(loader.ok()) << loader.status();
    for (int i = 0; i < 4; ++i) {
      absl::StatusOr<std::optional<DeviceBatch>> batch = loader->Next();
      ASSERT_TRUE(batch.ok() && batch->has_value()) << batch.status();
    }
    ASSERT_TRUE(loader->StartEpoch(5).ok());
    runs.push_back(Drain(*loader, 2));
  }
  ASSERT_FALSE(runs[1].empty());
  EXPECT_EQ(runs[0].front().epoch, 5);
  ExpectSameBatches(runs[0], runs[1]);
}

// With its order on the device the gather submits batches ahead only into
// buffers the consumer neither holds nor has waiting: a consumer holding
// every buffer can still restart the epoch, as on the inline worker path.
TEST(GatherPath, StartEpochWhileHoldingEveryBufferRestartsOnBothPaths) {
  const auto dataset = Rows(40);
  for (GatherMode mode : {GatherMode::kOn, GatherMode::kOff}) {
    absl::StatusOr<Loader> loader = Build(dataset, Shuffled(3, 0), mode);
    ASSERT_TRUE(loader.ok()) << loader.status();
    EXPECT_EQ(loader->stats().gather_order_on_device, mode == GatherMode::kOn);
    std::vector<DeviceBatch> held;
    for (int i = 0; i < 2; ++i) {  // device_buffers = 2
      absl::StatusOr<std::optional<DeviceBatch>> batch = loader->Next();
      ASSERT_TRUE(batch.ok() && batch->has_value()) << batch.status();
      held.push_back(**std::move(batch));
    }
    EXPECT_TRUE(loader->StartEpoch(1).ok());
    held.clear();
    absl::StatusOr<std::optional<DeviceBatch>> next = loader->Next();
    ASSERT_TRUE(next.ok() && next->has_value()) << next.status();
    EXPECT_EQ((*next)->epoch(), 1);
  }
}

TEST(GatherPath, LargeRowsMatchTheWorkerPathInAnyOrder) {
  for (const bool shuffle : {false, true}) {
    SCOPED_TRACE(absl::StrCat("shuffle ", shuffle));
    LoaderOptions options = Shuffled(5, 0);
    options.shuffle = shuffle;
    ExpectGatherMatchesWorkers(LargeRows(23, 40000), options);
  }
}

TEST(GatherPath, AHeldBatchFencesItsBufferAsOnTheWorkerPath) {
  const auto dataset = Rows(40);
  LoaderOptions options = Shuffled(4, 1);
  options.device_buffers = 1;
  for (GatherMode mode : {GatherMode::kOn, GatherMode::kOff}) {
    absl::StatusOr<Loader> loader = Build(dataset, options, mode);
    ASSERT_TRUE(loader.ok()) << loader.status();
    absl::StatusOr<std::optional<DeviceBatch>> held = loader->Next();
    ASSERT_TRUE(held.ok() && held->has_value());
    absl::StatusOr<std::optional<DeviceBatch>> next = loader->Next();
    EXPECT_EQ(next.status().code(), absl::StatusCode::kFailedPrecondition)
        << next.status();
    ASSERT_TRUE((*held)->Release().ok());
    next = loader->Next();
    EXPECT_TRUE(next.ok() && next->has_value()) << next.status();
  }
}

// A dataset read only through Read().
class ReadOnlyDataset final : public Dataset {
 public:
  ReadOnlyDataset()
      : layout_(*SampleLayout::Create({{"x", DType::kInt64, {}}})) {}
  int64_t size() const override { return 10; }
  const SampleLayout& layout() const override { return layout_; }
  absl::Status Read(int64_t index, SampleView& out) const override {
    out.field_as<int64_t>(0)[0] = index;
    return absl::OkStatus();
  }

 private:
  SampleLayout layout_;
};

TEST(GatherPath, SaysWhyItFallsBackToTheWorkerPath) {
  {
    absl::StatusOr<Loader> loader = Build(std::make_shared<ReadOnlyDataset>(),
                                          LoaderOptions(), GatherMode::kAuto);
    ASSERT_TRUE(loader.ok()) << loader.status();
    EXPECT_FALSE(loader->stats().gather);
    EXPECT_NE(loader->stats().gather_fallback.find("no Dataset::Gather()"),
              std::string::npos)
        << loader->stats().gather_fallback;
    EXPECT_TRUE(DrainEpoch(*loader).status.ok());
  }
  {
    const std::string path = WriteTokens<uint16_t>("fallback_tokens", 500);
    auto dataset = TokenWindowDataset::Open(
        path, {.seq_len = 16, .output = TokenOutput::kWindow});
    ASSERT_TRUE(dataset.ok()) << dataset.status();
    LoaderOptions options;
    options.batch_size = 4;
    options.device_transform = *WidenTokens::Create({});
    absl::StatusOr<Loader> loader = Build(*dataset, options, GatherMode::kAuto);
    ASSERT_TRUE(loader.ok()) << loader.status();
    EXPECT_FALSE(loader->stats().gather);
    EXPECT_NE(loader->stats().gather_fallback.find(
                  "a device_transform ('widen_tokens') is set"),
              std::string::npos)
        << loader->stats().gather_fallback;
    std::remove(path.c_str());
  }
}

TEST(GatherPath, AutoUsesTheGatherPathWhenItCan) {
  absl::StatusOr<Loader> loader =
      Build(Rows(20), Shuffled(4, 2), GatherMode::kAuto);
  ASSERT_TRUE(loader.ok()) << loader.status();
  EXPECT_TRUE(loader->stats().gather);
  EXPECT_EQ(loader->stats().gather_fallback, "");
}

TEST(GatherPath, ForcedOnFailsBuildNamingTheReason) {
  absl::StatusOr<Loader> loader = Build(std::make_shared<ReadOnlyDataset>(),
                                        LoaderOptions(), GatherMode::kOn);
  ASSERT_FALSE(loader.ok());
  EXPECT_EQ(loader.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(loader.status().message().find("gather = GatherMode::kOn"),
            std::string::npos)
      << loader.status();
  EXPECT_NE(loader.status().message().find("no Dataset::Gather()"),
            std::string::npos)
      << loader.status();
}

TEST(GatherPath, ABadGatherModeIsInvalidArgument) {
  absl::StatusOr<Loader> loader =
      Build(Rows(4), LoaderOptions(), static_cast<GatherMode>(7));
  ASSERT_FALSE(loader.ok());
  EXPECT_EQ(loader.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(loader.status().message().find("gather"), std::string::npos);
}

// Swaps the process registry's registrar for one that refuses, for the
// scope.
class RefusedRegistrations {
 public:
  RefusedRegistrations() {
    HostRegistrar refusing = CudaHostRegistrar();
    refusing.register_memory = [](absl::Span<const std::byte>, int) {
      return absl::ResourceExhaustedError("injected: registration refused");
    };
    HostRegistry::Global().SetRegistrarForTesting(refusing);
  }
  ~RefusedRegistrations() {
    HostRegistry::Global().SetRegistrarForTesting(CudaHostRegistrar());
  }
};

TEST(GatherPath, ARefusedRegistrationFallsBackOrFailsWhenForced) {
  const auto dataset = Rows(30);
  const HeldRanges held = RangesOf(*dataset);
  RefusedRegistrations refused;
  absl::StatusOr<Loader> automatic =
      Build(dataset, Shuffled(4, 1), GatherMode::kAuto);
  ASSERT_TRUE(automatic.ok()) << automatic.status();
  EXPECT_FALSE(automatic->stats().gather);
  EXPECT_NE(
      automatic->stats().gather_fallback.find("injected: registration refused"),
      std::string::npos)
      << automatic->stats().gather_fallback;
  EXPECT_TRUE(DrainEpoch(*automatic).status.ok());
  absl::StatusOr<Loader> forced =
      Build(dataset, Shuffled(4, 1), GatherMode::kOn);
  ASSERT_FALSE(forced.ok());
  EXPECT_NE(forced.status().message().find("injected"), std::string::npos)
      << forced.status();
  // Nothing stays registered after the refusals.
  for (absl::Span<const std::byte> range : held.ranges) {
    EXPECT_EQ(HostRegistry::Global().references(range, false), 0);
  }
}

TEST(GatherPath, LoadersOverOneDatasetShareItsRegistration) {
  const auto dataset = Rows(30);
  const HeldRanges held = RangesOf(*dataset);
  const std::vector<absl::Span<const std::byte>>& ranges = held.ranges;
  ASSERT_FALSE(ranges.empty());
  const absl::Span<const std::byte> images = ranges[0];
  uint64_t range_bytes = 0;
  for (absl::Span<const std::byte> range : ranges) range_bytes += range.size();
  {
    absl::StatusOr<Loader> first =
        Build(dataset, Shuffled(4, 1), GatherMode::kOn);
    ASSERT_TRUE(first.ok()) << first.status();
    absl::StatusOr<Loader> second =
        Build(dataset, Shuffled(4, 0), GatherMode::kOn);
    ASSERT_TRUE(second.ok()) << second.status();
    EXPECT_EQ(HostRegistry::Global().references(images, false), 2);
    // Only the first admitted the bytes: the second pins nothing new.
    EXPECT_EQ(first->stats().gather_registered_bytes, range_bytes);
    EXPECT_EQ(second->stats().gather_registered_bytes, 0u);
  }
  EXPECT_EQ(HostRegistry::Global().references(images, false), 0);
}

TEST(GatherPath, LoadersOverOneFileShareItsCopy) {
  const std::string path = WriteRecords("shared_records", 20);
  auto dataset = RecordFileDataset::Open(path);
  ASSERT_TRUE(dataset.ok()) << dataset.status();
  absl::StatusOr<Loader> first =
      Build(*dataset, Shuffled(4, 1), GatherMode::kOn);
  ASSERT_TRUE(first.ok()) << first.status();
  absl::StatusOr<Loader> second =
      Build(*dataset, Shuffled(4, 1), GatherMode::kOn);
  ASSERT_TRUE(second.ok()) << second.status();
  // The dataset hands out the copy the loaders hold: one region, held twice.
  const std::vector<absl::Span<const std::byte>> ranges =
      internal::RegisteredRanges((*dataset)->Gather(0)->regions);
  ASSERT_EQ(ranges.size(), 1u);
  EXPECT_EQ(HostRegistry::Global().references(ranges[0], false), 2);
  std::remove(path.c_str());
}

// Issue 35 item 4: the copy of small arrays is taken when each loader is
// built. A loader built after the arrays changed, while the first is alive,
// gathers the new bytes; the first keeps the ones it was built over (before
// the fix the second loader shared the first one's copy and served its old
// bytes).
TEST(GatherPath, ALoaderBuiltAfterTheArraysChangedGathersTheirNewBytes) {
  constexpr int64_t kRows = 16;
  SampleLayout layout = *SampleLayout::Create({{"label", DType::kInt64, {}}});
  std::vector<int64_t> labels(kRows);
  for (int64_t i = 0; i < kRows; ++i) labels[i] = i;
  absl::StatusOr<std::shared_ptr<InMemoryDataset>> dataset =
      InMemoryDataset::Create(
          layout, kRows,
          {absl::Span<const std::byte>(
              reinterpret_cast<const std::byte*>(labels.data()),
              labels.size() * sizeof(int64_t))});
  ASSERT_TRUE(dataset.ok()) << dataset.status();
  LoaderOptions options;
  options.batch_size = kRows;
  absl::StatusOr<Loader> first = Build(*dataset, options, GatherMode::kOn);
  ASSERT_TRUE(first.ok()) << first.status();
  for (int64_t i = 0; i < kRows; ++i) labels[i] = 1000 + i;
  absl::StatusOr<Loader> second = Build(*dataset, options, GatherMode::kOn);
  ASSERT_TRUE(second.ok()) << second.status();
  // Returns the labels of `loader`'s one batch.
  const auto labels_of = [](Loader& loader) {
    std::vector<int64_t> out;
    for (const HostBatch& batch : Drain(loader, 1)) {
      for (size_t b = 0; b + 8 <= batch.fields[0].size(); b += 8) {
        int64_t v = 0;
        std::memcpy(&v, batch.fields[0].data() + b, 8);
        out.push_back(v);
      }
    }
    return out;
  };
  std::vector<int64_t> old_labels(kRows), new_labels(kRows);
  for (int64_t i = 0; i < kRows; ++i) {
    old_labels[i] = i;
    new_labels[i] = 1000 + i;
  }
  EXPECT_EQ(labels_of(*second), new_labels);
  EXPECT_EQ(labels_of(*first), old_labels);
}

TEST(GatherPlan, RegisteredBytesBeyondTheMemoryBudgetAreRefused) {
  const auto dataset = Rows(1000);  // 23000 bytes of rows
  const HeldRanges held = RangesOf(*dataset);
  HostRegistry registry(CudaHostRegistrar());
  LoaderOptions options = Shuffled(4, 1);
  MemoryLimits limits;
  limits.physical_bytes = 40 * 1024;  // the ring and pool fit, rows do not
  absl::StatusOr<internal::LoaderPath> plan =
      internal::PlanGather(options, Device::Host(), dataset, limits, registry);
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(plan.status().message().find(
                "dataset memory registered for the gather path"),
            std::string::npos)
      << plan.status();
  for (absl::Span<const std::byte> range : held.ranges) {
    EXPECT_EQ(registry.references(range, false), 0);
  }
  limits.physical_bytes = 1 << 20;
  plan =
      internal::PlanGather(options, Device::Host(), dataset, limits, registry);
  EXPECT_TRUE(plan.ok()) << plan.status();
}

TEST(GatherPlan, ACopyOfSmallArraysBeyondTheMemoryBudgetIsRefusedUnmade) {
  const auto dataset = Rows(4000);  // 92,000 bytes of rows, copied
  HostRegistry registry(CudaHostRegistrar());
  MemoryLimits limits;
  limits.physical_bytes = 64 * 1024;  // the ring and pool fit, the copy not
  absl::StatusOr<internal::LoaderPath> plan = internal::PlanGather(
      Shuffled(4, 1), Device::Host(), dataset, limits, registry);
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(plan.status().message().find(
                "small arrays onto pages of their own takes 94208 bytes"),
            std::string::npos)
      << plan.status();
}

TEST(GatherPlan, AFileLargerThanTheBudgetIsNotRead) {
  const std::string path = WriteRecords("big_records", 2000);  // ~68 KB
  auto dataset = RecordFileDataset::Open(path);
  ASSERT_TRUE(dataset.ok()) << dataset.status();
  HostRegistry registry(CudaHostRegistrar());
  MemoryLimits limits;
  limits.physical_bytes = 48 * 1024;
  absl::StatusOr<internal::LoaderPath> plan = internal::PlanGather(
      Shuffled(4, 1), Device::Host(), *dataset, limits, registry);
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(plan.status().message().find("the memory budget leaves"),
            std::string::npos)
      << plan.status();
  EXPECT_NE(plan.status().message().find(path), std::string::npos);
  std::remove(path.c_str());
}

// A dataset whose Gather() describes a variable-length layout, or keys
// outside its memory.
class BadGatherDataset final : public Dataset {
 public:
  explicit BadGatherDataset(bool variable_length)
      : layout_(*SampleLayout::Create(
            {{"x", DType::kInt64, {2}, variable_length}})),
        rows_(80) {}
  int64_t size() const override { return 10; }
  const SampleLayout& layout() const override { return layout_; }
  absl::Status Read(int64_t index, SampleView& out) const override {
    out.field_as<int64_t>(0)[0] = index;
    out.field_as<int64_t>(0)[1] = index;
    return absl::OkStatus();
  }
  absl::StatusOr<GatherSource> Gather(uint64_t) const override {
    GatherSource source;
    source.regions = {rows_};
    source.fields = {{.region = 0, .offset = 0, .stride = 16, .bytes = 16}};
    source.key = [](int64_t index) { return index == 7 ? 5 : index; };
    return source;
  }

 private:
  SampleLayout layout_;
  std::vector<std::byte> rows_;  // 5 rows: index 5.. are out of it
};

TEST(GatherPath, AVariableLengthLayoutFallsBack) {
  absl::StatusOr<Loader> loader =
      Build(std::make_shared<BadGatherDataset>(true), LoaderOptions(),
            GatherMode::kAuto);
  ASSERT_TRUE(loader.ok()) << loader.status();
  EXPECT_FALSE(loader->stats().gather);
  EXPECT_NE(loader->stats().gather_fallback.find("variable-length"),
            std::string::npos)
      << loader->stats().gather_fallback;
}

TEST(GatherPath, AKeyOutsideTheDatasetsMemoryIsAnErrorNamingTheIndex) {
  LoaderOptions options;
  options.batch_size = 10;
  absl::StatusOr<Loader> loader = Build(
      std::make_shared<BadGatherDataset>(false), options, GatherMode::kOn);
  ASSERT_TRUE(loader.ok()) << loader.status();
  const DrainedEpoch epoch = DrainEpoch(*loader);
  EXPECT_EQ(epoch.status.code(), absl::StatusCode::kOutOfRange) << epoch.status;
  EXPECT_NE(epoch.status.message().find("dataset index 5"), std::string::npos)
      << epoch.status;
}

// A dataset whose Gather() throws, or whose GatherSource::key throws for
// one index.
class ThrowingGatherDataset final : public Dataset {
 public:
  explicit ThrowingGatherDataset(bool in_key)
      : layout_(*SampleLayout::Create({{"x", DType::kInt64, {}}})),
        rows_(80),
        in_key_(in_key) {}
  int64_t size() const override { return 10; }
  const SampleLayout& layout() const override { return layout_; }
  absl::Status Read(int64_t index, SampleView& out) const override {
    out.field_as<int64_t>(0)[0] = index;
    return absl::OkStatus();
  }
  absl::StatusOr<GatherSource> Gather(uint64_t) const override {
    if (!in_key_) throw std::runtime_error("no gather today");
    GatherSource source;
    source.regions = {rows_};
    source.fields = {{.region = 0, .offset = 0, .stride = 8, .bytes = 8}};
    source.key = [](int64_t index) -> int64_t {
      if (index == 3) throw std::runtime_error("no key for 3");
      return index;
    };
    return source;
  }

 private:
  SampleLayout layout_;
  std::vector<std::byte> rows_;
  bool in_key_;
};

TEST(GatherPath, AThrowingGatherIsAStatusNotAnException) {
  const auto dataset = std::make_shared<ThrowingGatherDataset>(false);
  absl::StatusOr<Loader> on = Build(dataset, LoaderOptions(), GatherMode::kOn);
  EXPECT_EQ(on.status().code(), absl::StatusCode::kFailedPrecondition)
      << on.status();
  EXPECT_NE(on.status().message().find("Dataset::Gather threw no gather today"),
            std::string::npos)
      << on.status();
  absl::StatusOr<Loader> automatic =
      Build(dataset, LoaderOptions(), GatherMode::kAuto);
  ASSERT_TRUE(automatic.ok()) << automatic.status();
  EXPECT_FALSE(automatic->stats().gather);
  EXPECT_NE(automatic->stats().gather_fallback.find("no gather today"),
            std::string::npos)
      << automatic->stats().gather_fallback;
}

TEST(GatherPath, AThrowingKeyIsAnErrorNamingTheCall) {
  LoaderOptions options;
  options.batch_size = 10;
  absl::StatusOr<Loader> loader = Build(
      std::make_shared<ThrowingGatherDataset>(true), options, GatherMode::kOn);
  ASSERT_TRUE(loader.ok()) << loader.status();
  const DrainedEpoch epoch = DrainEpoch(*loader);
  EXPECT_FALSE(epoch.status.ok());
  EXPECT_NE(epoch.status.message().find("GatherSource::key threw no key for 3"),
            std::string::npos)
      << epoch.status;
}

TEST(GatherPath, InMemoryBatchesAreTheWorkerPathsBytes_CUDA) {
  SKIP_WITHOUT_GPU();
  LoaderOptions options = Shuffled(8, 1);
  options.device = *Device::Cuda(0);
  ExpectGatherMatchesWorkers(Rows(103), options);
}

TEST(GatherPath, RecordFileBatchesAreTheWorkerPathsBytes_CUDA) {
  SKIP_WITHOUT_GPU();
  const std::string path = WriteRecords("records_cuda", 77);
  auto dataset = RecordFileDataset::Open(path);
  ASSERT_TRUE(dataset.ok()) << dataset.status();
  LoaderOptions options = Shuffled(10, 1);
  options.device = *Device::Cuda(0);
  ExpectGatherMatchesWorkers(*dataset, options);
  std::remove(path.c_str());
}

TEST(GatherPath, TokenWindowsBothOutputsAreTheWorkerPathsBytes_CUDA) {
  SKIP_WITHOUT_GPU();
  for (int token_bytes : {1, 2, 4, 8}) {
    for (TokenOutput output :
         {TokenOutput::kInputAndTargetInt64, TokenOutput::kWindow}) {
      for (int64_t seq_len : {1024, 2500}) {  // one kernel tile, and three
        SCOPED_TRACE(absl::StrCat("token_bytes ", token_bytes, " output ",
                                  static_cast<int>(output), " seq_len ",
                                  seq_len));
        const std::string name = absl::StrCat("cuda_tokens_", token_bytes);
        const std::string path =
            token_bytes == 1   ? WriteTokens<uint8_t>(name, 5000)
            : token_bytes == 2 ? WriteTokens<uint16_t>(name, 5000)
            : token_bytes == 4 ? WriteTokens<uint32_t>(name, 5000)
                               : WriteTokens<int64_t>(name, 5000);
        auto dataset =
            TokenWindowDataset::Open(path, {.token_bytes = token_bytes,
                                            .signed_tokens = token_bytes == 2,
                                            .seq_len = seq_len,
                                            .windows = 40,
                                            .seed = 3,
                                            .output = output});
        ASSERT_TRUE(dataset.ok()) << dataset.status();
        LoaderOptions options = Shuffled(8, 1);
        options.device = *Device::Cuda(0);
        ExpectGatherMatchesWorkers(*dataset, options);
        std::remove(path.c_str());
      }
    }
  }
}

// Large rows by the copy engines (a sequential order: one copy a batch;
// shuffled: one a row), beside a label the kernel gathers; the loader's
// order and a custom sampler's.
TEST(GatherPath, LargeRowsByTheCopyEnginesAreTheWorkerPathsBytes_CUDA) {
  SKIP_WITHOUT_GPU();
  const auto dataset = LargeRows(53, 48 * 1024);
  for (const bool shuffle : {false, true}) {
    for (const bool custom : {false, true}) {
      SCOPED_TRACE(absl::StrCat("shuffle ", shuffle, " custom ", custom));
      LoaderOptions options = Shuffled(8, 0);
      options.shuffle = shuffle;
      options.device = *Device::Cuda(0);
      if (custom) {
        options.shuffle = false;  // the sampler decides
        options.sampler = std::make_shared<BackwardsThenEvens>(53);
      }
      ExpectGatherMatchesWorkers(dataset, options);
    }
  }
}

TEST(GatherPath, MoreFieldsThanOneLaunchTakesAreAllGathered_CUDA) {
  SKIP_WITHOUT_GPU();
  const std::shared_ptr<InMemoryDataset> dataset = ManyFields();
  LoaderOptions options = Shuffled(8, 1);
  options.device = *Device::Cuda(0);
  ExpectGatherMatchesWorkers(dataset, options);
}

TEST(GatherPath, MoreFieldsThanOneLaunchTakesOnTheHost) {
  const std::shared_ptr<InMemoryDataset> dataset = ManyFields();
  ExpectGatherMatchesWorkers(dataset, Shuffled(8, 1));
}

// A pageable buffer that straddles the edge of a small array's page: with
// that page registered in place (the gather's earlier way), the driver
// refuses a copy into it (part registered, part not; Note [small arrays are
// copied onto pages of their own]). Laid out by hand so it happens every
// run, not only when the heap happens to place a buffer there.
TEST(GatherPath, ACopyIntoABufferStraddlingASmallArraysPageLands_CUDA) {
  SKIP_WITHOUT_GPU();
  constexpr size_t kPage = 4096;
  constexpr size_t kNeighbour = kPage - 128;  // bytes [3968, 4224)
  constexpr size_t kBytes = 256;
  std::unique_ptr<std::byte, decltype(&std::free)> block(
      static_cast<std::byte*>(std::aligned_alloc(kPage, 2 * kPage)),
      &std::free);
  ASSERT_NE(block, nullptr);
  for (size_t i = 0; i < 512; ++i) block.get()[i] = std::byte(i * 5 + 1);
  SampleLayout layout = *SampleLayout::Create({{"x", DType::kUInt8, {64}}});
  auto dataset = InMemoryDataset::Create(
      layout, 8, {absl::MakeConstSpan(block.get(), 512)});
  ASSERT_TRUE(dataset.ok()) << dataset.status();
  LoaderOptions options = Shuffled(4, 1);
  options.device = *Device::Cuda(0);
  absl::StatusOr<Loader> gathered = Build(*dataset, options, GatherMode::kOn);
  ASSERT_TRUE(gathered.ok()) << gathered.status();

  std::vector<std::byte> pattern(kBytes);
  for (size_t i = 0; i < kBytes; ++i) pattern[i] = std::byte(i * 7 + 3);
  auto pool = DeviceBufferPool::Create(*options.device, 1, kBytes);
  ASSERT_TRUE(pool.ok()) << pool.status();
  absl::StatusOr<Stream> stream = Stream::Create(*options.device);
  ASSERT_TRUE(stream.ok()) << stream.status();
  std::byte* on_device = (*pool)->buffer_data(0);
  ASSERT_TRUE(
      stream->CopyToDeviceAsync(on_device, pattern.data(), kBytes).ok());
  const absl::Status copied =
      stream->CopyToHostAsync(block.get() + kNeighbour, on_device, kBytes);
  EXPECT_TRUE(copied.ok()) << copied;
  const absl::Status synced = stream->Synchronize();
  EXPECT_TRUE(synced.ok()) << synced;
  EXPECT_EQ(std::memcmp(block.get() + kNeighbour, pattern.data(), kBytes), 0);

  absl::StatusOr<Loader> read = Build(*dataset, options, GatherMode::kOff);
  ASSERT_TRUE(read.ok()) << read.status();
  ExpectSameBatches(Drain(*gathered, 2), Drain(*read, 2));
}

TEST(GatherPath, LoadersOnEachGpuShareOneRegistration_CUDA) {
  SKIP_WITHOUT_GPU();
  const auto dataset = Rows(64);
  const HeldRanges held = RangesOf(*dataset);
  const std::vector<absl::Span<const std::byte>>& ranges = held.ranges;
  // One loader per GPU (two on cuda:0 with a single GPU).
  const int gpus = std::min(2, Device::CudaDeviceCount());
  std::vector<Loader> loaders;
  for (int i = 0; i < 2; ++i) {
    LoaderOptions options = Shuffled(8, 1);
    options.device = *Device::Cuda(i % gpus);
    absl::StatusOr<Loader> loader = Build(dataset, options, GatherMode::kOn);
    ASSERT_TRUE(loader.ok()) << loader.status();
    loaders.push_back(*std::move(loader));
  }
  for (absl::Span<const std::byte> range : ranges) {
    EXPECT_EQ(HostRegistry::Global().references(range, true), 2);
  }
  EXPECT_GT(loaders[0].stats().gather_registered_bytes, 0u);
  EXPECT_EQ(loaders[1].stats().gather_registered_bytes, 0u);
  LoaderOptions options = Shuffled(8, 1);
  options.device = *Device::Cuda(gpus - 1);
  absl::StatusOr<Loader> read = Build(dataset, options, GatherMode::kOff);
  ASSERT_TRUE(read.ok()) << read.status();
  const std::vector<HostBatch> expected = Drain(*read, 1);
  for (Loader& loader : loaders) ExpectSameBatches(Drain(loader, 1), expected);
  loaders.clear();
  for (absl::Span<const std::byte> range : ranges) {
    EXPECT_EQ(HostRegistry::Global().references(range, true), 0);
  }
}

}  // namespace
}  // namespace pinwheel
