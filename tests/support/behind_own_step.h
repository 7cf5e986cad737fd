// RunBehindOwnStep: a consumer whose own stream work holds its one device
// buffer. Builds a loader (host backend) of `batches` batches of 2 samples
// with one device buffer, and for each batch queues a `step` (a sleep) on
// the consumer's stream and releases the batch behind it, so that every
// next batch's copy, and Next() with it, waits for the step before it.
// Returns the loader's stats once the stream has drained.
//
// Example:
//   absl::StatusOr<LoaderStats> stats =
//       RunBehindOwnStep(6, absl::Milliseconds(40));
//   ASSERT_TRUE(stats.ok()) << stats.status();
//   EXPECT_GT(stats->consumer_wait_behind_buffers, absl::ZeroDuration());
#ifndef PINWHEEL_TESTS_SUPPORT_BEHIND_OWN_STEP_H_
#define PINWHEEL_TESTS_SUPPORT_BEHIND_OWN_STEP_H_

#include <memory>
#include <optional>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

#include "loader/loader.h"
#include "loader/loader_builder.h"
#include "pinning/base/status_macros.h"
#include "tests/support/test_datasets.h"
#include "transfer/device.h"
#include "transfer/stream.h"

namespace pinwheel::testing_support {

inline absl::StatusOr<LoaderStats> RunBehindOwnStep(int batches,
                                                    absl::Duration step) {
  auto dataset = std::make_shared<PatternDataset>(2 * batches);
  PINWHEEL_ASSIGN_OR_RETURN(Loader loader, LoaderBuilder(dataset)
                                               .batch_size(2)
                                               .num_workers(2)
                                               .device_buffers(1)
                                               .device(Device::Host())
                                               .Build());
  PINWHEEL_ASSIGN_OR_RETURN(Stream compute, Stream::Create(Device::Host()));
  for (int b = 0; b < batches; ++b) {
    PINWHEEL_ASSIGN_OR_RETURN(std::optional<DeviceBatch> batch, loader.Next());
    if (!batch) {
      return absl::InternalError(absl::StrCat("the epoch ended at batch ", b));
    }
    PINWHEEL_RETURN_IF_ERROR(batch->WaitOn(compute));
    PINWHEEL_RETURN_IF_ERROR(
        compute.EnqueueHostTask([step] { absl::SleepFor(step); }));
    PINWHEEL_RETURN_IF_ERROR(batch->Release(compute));
  }
  PINWHEEL_RETURN_IF_ERROR(compute.Synchronize());
  return loader.stats();
}

}  // namespace pinwheel::testing_support

#endif  // PINWHEEL_TESTS_SUPPORT_BEHIND_OWN_STEP_H_
