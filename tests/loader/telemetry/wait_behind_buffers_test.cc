// LoaderStats::consumer_wait_behind_buffers on the host backend: a consumer
// whose own work still holds the device buffer it released waits in Next()
// behind it, and that wait is counted apart; a consumer waiting for slow
// reads, with buffers to spare, waits for data and none of it is counted
// behind buffers. (Note [a wait behind the consumer's buffers] in
// transfer/transfer_stage.cc.) The sleeps stage the two kinds of wait; the
// checks are on how the wait is split, with wide margins, never on speed.
#include <cstdint>
#include <gtest/gtest.h>
#include <memory>
#include <optional>

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

#include "loader/loader.h"
#include "loader/loader_builder.h"
#include "tests/support/behind_own_step.h"
#include "tests/support/test_datasets.h"
#include "transfer/device.h"

namespace pinwheel {
namespace {

using testing_support::PatternDataset;
using testing_support::RunBehindOwnStep;

constexpr absl::Duration kStep = absl::Milliseconds(40);
constexpr int kBatches = 6;

TEST(WaitBehindBuffers, AWaitForTheConsumersOwnWorkIsCountedApart) {
  // One device buffer, released behind a 40 ms "step" on the consumer's
  // stream: each next batch's copy waits for that step, and so does Next().
  const absl::StatusOr<LoaderStats> stats = RunBehindOwnStep(kBatches, kStep);
  ASSERT_TRUE(stats.ok()) << stats.status();
  // Batches 2..6 each waited for the step before them: about 5 x 40 ms.
  EXPECT_GE(stats->consumer_wait_behind_buffers, (kBatches - 1) * kStep / 2)
      << "consumer_wait " << stats->consumer_wait;
  EXPECT_LE(stats->consumer_wait_behind_buffers, stats->consumer_wait);
  EXPECT_GT(stats->transfer.buffer_waits, 0);
}

TEST(WaitBehindBuffers, AWaitForSlowReadsIsNotCountedBehindBuffers) {
  // Reads of 20 ms a sample, four device buffers, each batch released at
  // once: the consumer waits for data only.
  auto dataset = std::make_shared<PatternDataset>(64);
  dataset->set_hook([](int64_t) {
    absl::SleepFor(absl::Milliseconds(20));
    return absl::OkStatus();
  });
  absl::StatusOr<Loader> loader = LoaderBuilder(dataset)
                                      .batch_size(2)
                                      .num_workers(1)
                                      .device_buffers(4)
                                      .device(Device::Host())
                                      .Build();
  ASSERT_TRUE(loader.ok()) << loader.status();
  for (int b = 0; b < kBatches; ++b) {
    absl::StatusOr<std::optional<DeviceBatch>> batch = loader->Next();
    ASSERT_TRUE(batch.ok() && batch->has_value()) << batch.status();
    ASSERT_TRUE((*batch)->Release().ok());
  }
  const LoaderStats stats = loader->stats();
  EXPECT_GE(stats.consumer_wait, kBatches * absl::Milliseconds(20));
  EXPECT_EQ(stats.consumer_wait_behind_buffers, absl::ZeroDuration())
      << "consumer_wait " << stats.consumer_wait;
  EXPECT_EQ(stats.transfer.buffer_waits, 0);
}

}  // namespace
}  // namespace pinwheel
