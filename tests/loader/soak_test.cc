// Soak: many epochs of a small shuffled dataset with 8 workers and small
// random delays in Read. Every epoch delivers every index exactly once, in
// RandomSampler(seed) order, bit-exact; memory stays allocated up front and
// the resident set stays flat.
//
// PINWHEEL_SOAK_EPOCHS overrides the number of epochs (default 1000), e.g.
// for a quick run under a sanitizer.
#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

#include "loader/loader.h"
#include "loader/loader_builder.h"
#include "loader/sampler.h"
#include "tests/support/drain_epoch.h"
#include "tests/support/test_datasets.h"

namespace pinwheel {
namespace {

using testing_support::PatternDataset;

constexpr int64_t kSamples = 64;
constexpr int64_t kBatch = 8;
constexpr uint64_t kSeed = 2024;
// Growth of the resident set allowed between the checkpoint epoch and the
// end (allocator noise; a leak of a batch per epoch would exceed it).
constexpr int64_t kMaxRssGrowth = int64_t{8} << 20;

// SplitMix64: a deterministic delay per (index, epoch).
uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

TEST(LoaderSoak, EveryIndexOncePerEpochInSeedOrderWithFlatMemory) {
  const int64_t epochs =
      testing_support::PositiveIntFromEnv("PINWHEEL_SOAK_EPOCHS", 1000);
  const int64_t checkpoint =
      std::max<int64_t>(1, std::min<int64_t>(100, epochs / 10));
  testing_support::Watchdog watchdog("soak", testing_support::kSanitized
                                                 ? absl::Minutes(15)
                                                 : absl::Minutes(5));

  auto dataset = std::make_shared<PatternDataset>(kSamples);
  // Reads of each index so far: with one read per index per epoch, the
  // count is the epoch, so the delay is fixed per (index, epoch).
  auto reads = std::make_shared<std::array<std::atomic<int64_t>, kSamples>>();
  dataset->set_hook([reads](int64_t index) {
    const int64_t epoch = (*reads)[index].fetch_add(1);
    const uint64_t micros = Mix(static_cast<uint64_t>(index) * 1000003u +
                                static_cast<uint64_t>(epoch)) %
                            51;
    if (micros > 0) absl::SleepFor(absl::Microseconds(micros));
    return absl::OkStatus();
  });
  absl::StatusOr<Loader> loader = LoaderBuilder(dataset)
                                      .batch_size(kBatch)
                                      .shuffle(kSeed)
                                      .num_workers(8)
                                      .device(Device::Host())
                                      .Build();
  ASSERT_TRUE(loader.ok()) << loader.status();
  const LoaderStats initial = loader->stats();
  ASSERT_GT(initial.pinned_bytes, 0u);
  ASSERT_GT(initial.device_bytes, 0u);

  const RandomSampler sampler(kSamples, kSeed);
  int64_t rss_at_checkpoint = -1;
  std::vector<int64_t> order;
  order.reserve(kSamples);
  for (int64_t epoch = 0; epoch < epochs; ++epoch) {
    order.clear();
    int64_t batch_number = 0;
    const testing_support::DrainedEpoch drained = testing_support::DrainEpoch(
        *loader, {.on_batch = [&](const DeviceBatch& batch) {
          ASSERT_EQ(batch.epoch(), epoch);
          ASSERT_EQ(batch.index(), batch_number++);
          ASSERT_TRUE(batch.WaitOnHost().ok());
          for (int64_t p = 0; p < batch.size(); ++p) {
            const int64_t index = batch.sample_indices()[p];
            const std::vector<std::vector<std::byte>> expected =
                dataset->Expected(index);
            for (int f = 0; f < 3; ++f) {
              const size_t bytes = expected[f].size();
              ASSERT_EQ(0, std::memcmp(static_cast<const std::byte*>(
                                           batch.field(f).data) +
                                           p * bytes,
                                       expected[f].data(), bytes))
                  << "epoch " << epoch << " batch " << batch.index()
                  << " sample " << p << " field " << f;
            }
            order.push_back(index);
          }
        }});
    ASSERT_TRUE(drained.status.ok())
        << "epoch " << epoch << ": " << drained.status;
    ASSERT_EQ(batch_number, kSamples / kBatch) << "epoch " << epoch;
    // Exactly once each, in the seed's order for this epoch.
    ASSERT_EQ(order, sampler.Indices(epoch)) << "epoch " << epoch;
    const LoaderStats stats = loader->stats();
    ASSERT_EQ(stats.pinned_bytes, initial.pinned_bytes) << "epoch " << epoch;
    ASSERT_EQ(stats.device_bytes, initial.device_bytes) << "epoch " << epoch;
    ASSERT_EQ(stats.ring.slots, initial.ring.slots);
    ASSERT_EQ(stats.transfer.device_buffers, initial.transfer.device_buffers);
    if (epoch + 1 == checkpoint)
      rss_at_checkpoint = testing_support::ResidentBytes();
  }
  const int64_t rss_at_end = testing_support::ResidentBytes();
  const LoaderStats stats = loader->stats();
  EXPECT_EQ(stats.epochs_completed, epochs);
  EXPECT_EQ(stats.samples_delivered, kSamples * epochs);
  EXPECT_EQ(stats.samples_skipped, 0);
  for (int64_t i = 0; i < kSamples; ++i) {
    // The producer may have read ahead into the next epoch.
    EXPECT_GE((*reads)[i].load(), epochs) << "index " << i;
    EXPECT_LE((*reads)[i].load(), epochs + 1) << "index " << i;
  }
  ASSERT_GT(rss_at_checkpoint, 0);
  ASSERT_GT(rss_at_end, 0);
  // AddressSanitizer keeps freed memory in its quarantine (256 MiB by
  // default), so the resident set grows with every allocation there; its
  // LeakSanitizer checks for leaks instead.
#if defined(__SANITIZE_ADDRESS__)
  constexpr bool kQuarantine = true;
#else
  constexpr bool kQuarantine = false;
#endif
  if (!kQuarantine) {
    EXPECT_LE(rss_at_end - rss_at_checkpoint, kMaxRssGrowth)
        << "resident set grew from " << rss_at_checkpoint
        << " bytes after epoch " << checkpoint << " to " << rss_at_end
        << " bytes after epoch " << epochs;
  }
  std::printf(
      "soak: %lld epochs; RSS %lld KiB after epoch %lld, %lld KiB at the end\n",
      static_cast<long long>(epochs),
      static_cast<long long>(rss_at_checkpoint >> 10),
      static_cast<long long>(checkpoint),
      static_cast<long long>(rss_at_end >> 10));
}

}  // namespace
}  // namespace pinwheel
