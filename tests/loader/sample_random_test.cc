// SampleRandom and SampleView::random(): the generator's statistics, and
// that augmentation drawn from it is the same with any number of workers,
// after a checkpoint/resume (map-style and iterable), and different from
// epoch to epoch and seed to seed.
#include "loader/sample_random.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

#include "loader/dataset.h"
#include "loader/internal/random.h"
#include "loader/iterable_dataset.h"
#include "loader/loader.h"
#include "loader/loader_builder.h"
#include "loader/loader_checkpoint.h"
#include "tests/support/drain_epoch.h"
#include "tests/support/scripted_streams.h"
#include "transfer/device.h"

namespace pinwheel {
namespace {

// Note [byte sets]: sets of drawn bytes hold them as strings: GCC 12 at -O3
// (Release) reports a false -Wstringop-overread in the memcmp of
// std::vector<std::byte>'s operator<=>.
std::string AsString(const std::vector<std::byte>& bytes) {
  return std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}

using testing_support::CopyToHost;
using testing_support::ScriptedStreams;

// --- The generator --------------------------------------------------------

TEST(SampleRandom, IsAPureFunctionOfSeedEpochAndKey) {
  SampleRandom a(7, 3, 41);
  SampleRandom b(7, 3, 41);
  for (int i = 0; i < 100; ++i) ASSERT_EQ(a.NextU64(), b.NextU64());
  const uint64_t first = SampleRandom(7, 3, 41).NextU64();
  EXPECT_NE(SampleRandom(8, 3, 41).NextU64(), first);
  EXPECT_NE(SampleRandom(7, 4, 41).NextU64(), first);
  EXPECT_NE(SampleRandom(7, 3, 42).NextU64(), first);
}

TEST(SampleRandom, UniformIntStaysInBoundsWithoutBias) {
  // 6 buckets, 600k draws: each count within 1.5% of 100k (the standard
  // deviation is ~290, so 1.5% is > 5 sigma).
  SampleRandom rng(1, 0, 2);
  std::vector<int64_t> counts(6, 0);
  for (int i = 0; i < 600000; ++i) {
    const int64_t x = rng.UniformInt(-2, 3);
    ASSERT_GE(x, -2);
    ASSERT_LE(x, 3);
    ++counts[static_cast<size_t>(x + 2)];
  }
  for (int64_t c : counts) EXPECT_NEAR(c, 100000, 1500);
  // Degenerate and extreme ranges.
  EXPECT_EQ(rng.UniformInt(5, 5), 5);
  const int64_t lo = std::numeric_limits<int64_t>::min();
  const int64_t hi = std::numeric_limits<int64_t>::max();
  bool negative = false;
  bool positive = false;
  for (int i = 0; i < 64; ++i) {
    const int64_t x = rng.UniformInt(lo, hi);
    negative |= x < 0;
    positive |= x > 0;
  }
  EXPECT_TRUE(negative && positive);
  // A range just over half of 2^64 (the rejection path's worst case).
  const int64_t big_hi = std::numeric_limits<int64_t>::max() / 2 + 7;
  for (int i = 0; i < 1000; ++i) {
    const int64_t x = rng.UniformInt(-big_hi, big_hi);
    ASSERT_GE(x, -big_hi);
    ASSERT_LE(x, big_hi);
  }
}

TEST(SampleRandom, UniformFloatStaysInItsHalfOpenRangeWithTheRightMoments) {
  SampleRandom rng(3, 1, 9);
  double sum = 0;
  double sum_sq = 0;
  constexpr int kDraws = 400000;
  for (int i = 0; i < kDraws; ++i) {
    const float x = rng.UniformFloat(0.08f, 1.0f);
    ASSERT_GE(x, 0.08f);
    ASSERT_LT(x, 1.0f);
    sum += x;
    sum_sq += static_cast<double>(x) * x;
  }
  const double mean = sum / kDraws;
  const double variance = sum_sq / kDraws - mean * mean;
  EXPECT_NEAR(mean, 0.54, 0.003);                    // (a + b) / 2
  EXPECT_NEAR(variance, 0.92 * 0.92 / 12.0, 0.002);  // (b - a)^2 / 12
  // An empty range returns its lower end.
  EXPECT_EQ(rng.UniformFloat(2.0f, 2.0f), 2.0f);
  // Deciles of Uniform() hold 10% each, within 0.5% (> 5 sigma).
  std::vector<int> deciles(10, 0);
  for (int i = 0; i < 200000; ++i) {
    const double u = rng.Uniform();
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    ++deciles[static_cast<size_t>(u * 10)];
  }
  for (int d : deciles) EXPECT_NEAR(d, 20000, 1000);
}

TEST(SampleRandom, BernoulliHitsItsProbability) {
  SampleRandom rng(5, 2, 11);
  for (double p : {0.1, 0.5, 0.9}) {
    int hits = 0;
    constexpr int kDraws = 200000;
    for (int i = 0; i < kDraws; ++i) hits += rng.Bernoulli(p) ? 1 : 0;
    EXPECT_NEAR(static_cast<double>(hits) / kDraws, p, 0.005) << p;
  }
  for (int i = 0; i < 1000; ++i) {
    ASSERT_FALSE(rng.Bernoulli(0.0));
    ASSERT_FALSE(rng.Bernoulli(-1.0));
    ASSERT_TRUE(rng.Bernoulli(1.0));
    ASSERT_TRUE(rng.Bernoulli(2.0));
  }
}

TEST(SampleRandom, SharesItsMixerWithTheSamplersGenerator) {
  // SplitMix64Stream(s) and SampleRandom draw from the same SplitMix64
  // sequence; internal::Mix64 is SampleRandom's mixer.
  internal::SplitMix64Stream stream(12345);
  EXPECT_EQ(stream.Next(), internal::Mix64(12345 + internal::kGoldenGamma));
  EXPECT_EQ(internal::Mix64(0), 0u);  // SplitMix64's mixer fixes 0
  EXPECT_NE(internal::HashBytes("12", 0), internal::HashBytes("13", 0));
  EXPECT_NE(internal::HashBytes("", 0), internal::HashBytes("", 1));
}

// --- Through the loader ---------------------------------------------------

// Sample i: "noise" u8[24] drawn from out.random() (three words, one of
// them through UniformInt, as a crop offset would be), "id" i64[] = i.
SampleLayout AugmentedLayout() {
  return *SampleLayout::Create({
      {.name = "noise", .dtype = DType::kUInt8, .shape = {24}},
      {.name = "id", .dtype = DType::kInt64, .shape = {}},
  });
}

absl::Status WriteAugmented(int64_t id, SampleView& out) {
  SampleRandom& rng = out.random();
  uint64_t words[3] = {rng.NextU64(), 0, 0};
  words[1] = static_cast<uint64_t>(rng.UniformInt(0, 1000000007));
  words[2] = rng.Bernoulli(0.5) ? rng.NextU64() : ~rng.NextU64();
  std::memcpy(out.field(0).data(), words, sizeof(words));
  std::memcpy(out.field(1).data(), &id, sizeof(id));
  return absl::OkStatus();
}

class AugmentedDataset : public Dataset {
 public:
  explicit AugmentedDataset(int64_t size) : size_(size) {}
  int64_t size() const override { return size_; }
  const SampleLayout& layout() const override { return layout_; }
  absl::Status Read(int64_t index, SampleView& out) const override {
    return WriteAugmented(index, out);
  }

 private:
  int64_t size_;
  SampleLayout layout_ = AugmentedLayout();
};

// What a run delivered: per batch its fields' bytes, and per sample id its
// noise.
struct Drawn {
  std::vector<std::vector<std::vector<std::byte>>> batches;
  std::map<int64_t, std::vector<std::byte>> noise;
};

// Reads `batches` batches (or to the epoch's end when < 0) of the current
// epoch into `run`; returns whether the epoch ended.
bool ReadBatches(Loader& loader, int64_t batches, Drawn& run) {
  for (int64_t b = 0; batches < 0 || b < batches; ++b) {
    absl::StatusOr<std::optional<DeviceBatch>> next = loader.Next();
    EXPECT_TRUE(next.ok()) << next.status();
    if (!next.ok() || !next->has_value()) return true;
    DeviceBatch& batch = **next;
    EXPECT_TRUE(batch.WaitOnHost().ok());
    std::vector<std::vector<std::byte>> fields;
    for (int f = 0; f < 2; ++f) {
      fields.push_back(CopyToHost(batch.field(f), batch.device()));
    }
    for (int64_t p = 0; p < batch.size(); ++p) {
      int64_t id;
      std::memcpy(&id, fields[1].data() + 8 * p, 8);
      const std::byte* noise = fields[0].data() + 24 * p;
      EXPECT_EQ(run.noise.count(id), 0u) << "sample " << id << " twice";
      run.noise[id] = std::vector<std::byte>(noise, noise + 24);
    }
    run.batches.push_back(std::move(fields));
    EXPECT_TRUE(batch.Release().ok());
  }
  return false;
}

Drawn ReadEpoch(Loader& loader) {
  Drawn run;
  ReadBatches(loader, -1, run);
  return run;
}

absl::StatusOr<Loader> BuildMapStyle(
    int workers, uint64_t seed, std::optional<LoaderCheckpoint> from = {}) {
  LoaderBuilder builder(std::make_shared<AugmentedDataset>(203));
  builder.batch_size(8).shuffle(seed).num_workers(workers).prefetch(4).device(
      Device::Host());
  if (from) builder.resume(*from);
  return builder.Build();
}

TEST(SampleRandomLoader, BatchesAreByteIdenticalWithAnyNumberOfWorkers) {
  std::optional<Drawn> reference;
  for (int workers : {0, 1, 4}) {
    absl::StatusOr<Loader> loader = BuildMapStyle(workers, 7);
    ASSERT_TRUE(loader.ok()) << loader.status();
    for (int64_t epoch = 0; epoch < 2; ++epoch) {
      const Drawn run = ReadEpoch(*loader);
      ASSERT_EQ(run.noise.size(), 203u);
      if (epoch == 1) continue;
      if (!reference) {
        reference = run;
      } else {
        EXPECT_EQ(run.batches, reference->batches) << workers << " workers";
      }
    }
  }
}

// The fraction of sample ids whose noise differs between two runs.
double Differing(const Drawn& a, const Drawn& b) {
  int differing = 0;
  for (const auto& [id, noise] : a.noise) {
    differing += b.noise.at(id) != noise ? 1 : 0;
  }
  return static_cast<double>(differing) / static_cast<double>(a.noise.size());
}

TEST(SampleRandomLoader, EpochsAndSeedsDrawDifferentNumbers) {
  absl::StatusOr<Loader> loader = BuildMapStyle(2, 7);
  ASSERT_TRUE(loader.ok()) << loader.status();
  const Drawn epoch0 = ReadEpoch(*loader);
  const Drawn epoch1 = ReadEpoch(*loader);
  EXPECT_EQ(Differing(epoch0, epoch1), 1.0);
  absl::StatusOr<Loader> other = BuildMapStyle(2, 8);
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_EQ(Differing(epoch0, ReadEpoch(*other)), 1.0);
  // Within one epoch, no two samples drew the same numbers.
  std::set<std::string> distinct;  // Note [byte sets]
  for (const auto& [id, noise] : epoch0.noise) distinct.insert(AsString(noise));
  EXPECT_EQ(distinct.size(), epoch0.noise.size());
}

TEST(SampleRandomLoader, AResumedEpochDrawsWhatTheUninterruptedOneDrew) {
  absl::StatusOr<Loader> whole = BuildMapStyle(3, 11);
  ASSERT_TRUE(whole.ok()) << whole.status();
  const Drawn uninterrupted = ReadEpoch(*whole);
  for (int64_t k : {1, 5, 17}) {
    absl::StatusOr<Loader> first = BuildMapStyle(3, 11);
    ASSERT_TRUE(first.ok()) << first.status();
    Drawn run;
    ReadBatches(*first, k, run);
    absl::StatusOr<LoaderCheckpoint> checkpoint = first->Checkpoint();
    ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
    // Resumed with another worker count: still the same bytes.
    absl::StatusOr<Loader> second = BuildMapStyle(1, 11, *checkpoint);
    ASSERT_TRUE(second.ok()) << second.status();
    ReadBatches(*second, -1, run);
    EXPECT_EQ(run.noise, uninterrupted.noise) << "checkpoint after " << k;
  }
}

// --- Iterable datasets ------------------------------------------------------

std::shared_ptr<ScriptedStreams> AugmentedStreams(bool resumable) {
  auto dataset = ScriptedStreams::Strided(203);
  dataset->set_content(AugmentedLayout(), WriteAugmented);
  dataset->set_resumable(resumable);
  return dataset;
}

absl::StatusOr<Loader> BuildIterable(
    std::shared_ptr<ScriptedStreams> dataset, int workers, uint64_t seed,
    std::optional<LoaderCheckpoint> from = {}) {
  LoaderBuilder builder(
      std::static_pointer_cast<const IterableDataset>(dataset));
  builder.batch_size(6).num_workers(workers).prefetch(4).device(Device::Host());
  LoaderOptions options = builder.options();
  options.seed = seed;  // an iterable dataset takes no shuffle
  builder.options(options);
  if (from) builder.resume(*from);
  return builder.Build();
}

TEST(SampleRandomStreams, EveryStreamedSampleGetsItsOwnGenerator) {
  for (bool resumable : {false, true}) {
    absl::StatusOr<Loader> loader =
        BuildIterable(AugmentedStreams(resumable), 3, 5);
    ASSERT_TRUE(loader.ok()) << loader.status();
    const Drawn run = ReadEpoch(*loader);
    ASSERT_EQ(run.noise.size(), 203u);
    std::set<std::string> distinct;  // Note [byte sets]
    for (const auto& [id, noise] : run.noise) distinct.insert(AsString(noise));
    EXPECT_EQ(distinct.size(), 203u) << "resumable " << resumable;
  }
}

TEST(SampleRandomStreams, AreReproducibleAndDifferBetweenEpochsAndSeeds) {
  for (bool resumable : {false, true}) {
    auto dataset = AugmentedStreams(resumable);
    absl::StatusOr<Loader> a = BuildIterable(dataset, 3, 5);
    absl::StatusOr<Loader> b = BuildIterable(dataset, 3, 5);
    absl::StatusOr<Loader> c = BuildIterable(dataset, 3, 6);
    ASSERT_TRUE(a.ok() && b.ok() && c.ok());
    const Drawn a0 = ReadEpoch(*a);
    EXPECT_EQ(a0.noise, ReadEpoch(*b).noise);
    EXPECT_EQ(Differing(a0, ReadEpoch(*a)), 1.0);  // epoch 1
    EXPECT_EQ(Differing(a0, ReadEpoch(*c)), 1.0);  // another seed
  }
}

TEST(SampleRandomStreams, AResumedEpochDrawsWhatTheUninterruptedOneDrew) {
  auto dataset = AugmentedStreams(/*resumable=*/true);
  for (int workers : {1, 3}) {
    absl::StatusOr<Loader> whole = BuildIterable(dataset, workers, 9);
    ASSERT_TRUE(whole.ok()) << whole.status();
    const Drawn uninterrupted = ReadEpoch(*whole);
    ASSERT_EQ(uninterrupted.noise.size(), 203u);
    for (int64_t k : {1, 4, 11}) {
      absl::StatusOr<Loader> first = BuildIterable(dataset, workers, 9);
      ASSERT_TRUE(first.ok()) << first.status();
      Drawn run;
      ReadBatches(*first, k, run);
      absl::StatusOr<LoaderCheckpoint> checkpoint = first->Checkpoint();
      ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
      absl::StatusOr<LoaderCheckpoint> parsed =
          LoaderCheckpoint::FromBytes(checkpoint->ToBytes());
      ASSERT_TRUE(parsed.ok()) << parsed.status();
      absl::StatusOr<Loader> second =
          BuildIterable(dataset, workers, 9, *parsed);
      ASSERT_TRUE(second.ok()) << second.status();
      ReadBatches(*second, -1, run);
      EXPECT_EQ(run.noise, uninterrupted.noise)
          << workers << " workers, checkpoint after " << k;
    }
  }
}

}  // namespace
}  // namespace pinwheel
