// DrainEpoch: the consumer loop of the loader tests. Calls Loader::Next()
// until the end of the epoch (or an error), keeps what each batch was (its
// epoch, index, sample indices and, when asked, its fields copied to the
// host), releases it, and returns the batches and how the epoch ended.
//
// Example:
//   absl::StatusOr<Loader> loader = LoaderBuilder(dataset).Build();
//   ASSERT_TRUE(loader.ok()) << loader.status();
//   const DrainedEpoch epoch = DrainEpoch(*loader, {.copy_fields = true});
//   ASSERT_TRUE(epoch.status.ok()) << epoch.status;
//   EXPECT_EQ(epoch.indices().size(), 100u);
//
// A check that needs the live batch (its device pointers, DLPack, a field by
// name) goes in `on_batch`. Not thread-safe: one consumer, as Loader itself.
#ifndef PINWHEEL_TESTS_SUPPORT_DRAIN_EPOCH_H_
#define PINWHEEL_TESTS_SUPPORT_DRAIN_EPOCH_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <gtest/gtest.h>
#include <optional>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include "loader/loader.h"
#include "tests/support/test_datasets.h"
#include "transfer/device_batch.h"

namespace pinwheel::testing_support {

// A delivered batch, as kept after its release.
struct HostBatch {
  int64_t epoch = -1;
  int64_t index = -1;
  int64_t size = 0;                            // samples
  std::vector<int64_t> indices;                // sample_indices()
  std::vector<std::vector<std::byte>> fields;  // host copies, when asked
};

// Returns `batch`'s epoch, index, size and sample indices and, with
// `copy_fields`, a host copy of each of its fields.
// REQUIRES: with `copy_fields`, the batch's data has landed (WaitOnHost()).
inline HostBatch ToHost(const DeviceBatch& batch, bool copy_fields) {
  HostBatch host{.epoch = batch.epoch(),
                 .index = batch.index(),
                 .size = batch.size(),
                 .indices = {batch.sample_indices().begin(),
                             batch.sample_indices().end()}};
  if (copy_fields) {
    for (int f = 0; f < batch.num_fields(); ++f) {
      host.fields.push_back(CopyToHost(batch.field(f), batch.device()));
    }
  }
  return host;
}

struct DrainOptions {
  // Waits for each batch's data and copies its fields to the host.
  bool copy_fields = false;
  // Runs on each batch, before it is copied and released. A fatal failure
  // in it (ASSERT_*) ends the drain with an Aborted status, so the caller's
  // check of the status stops the test as the ASSERT would have.
  std::function<void(const DeviceBatch&)> on_batch;
};

// What DrainEpoch() read.
struct DrainedEpoch {
  std::vector<HostBatch> batches;
  // OK when Next() reached the end of the epoch; else the first error, of
  // Next() (which ends the drain) or of waiting for or releasing a batch.
  absl::Status status;

  // Returns every batch's sample indices, in delivery order.
  std::vector<int64_t> indices() const {
    std::vector<int64_t> all;
    for (const HostBatch& batch : batches) {
      all.insert(all.end(), batch.indices.begin(), batch.indices.end());
    }
    return all;
  }
  // Returns how many samples the batches held.
  int64_t samples() const {
    int64_t n = 0;
    for (const HostBatch& batch : batches) n += batch.size;
    return n;
  }
};

// Calls loader.Next() until the end of the current epoch or an error,
// releasing every batch (on the stream it last waited on: see
// Note [release fences reuse] in transfer/device_batch.h).
inline DrainedEpoch DrainEpoch(Loader& loader,
                               const DrainOptions& options = {}) {
  DrainedEpoch out;
  while (true) {
    absl::StatusOr<std::optional<DeviceBatch>> next = loader.Next();
    if (!next.ok()) {
      out.status.Update(next.status());
      break;
    }
    if (!next->has_value()) break;
    DeviceBatch& batch = **next;
    if (options.on_batch) {
      const bool failed_before = ::testing::Test::HasFatalFailure();
      options.on_batch(batch);
      if (!failed_before && ::testing::Test::HasFatalFailure()) {
        out.status.Update(absl::AbortedError("a fatal failure in on_batch"));
        break;
      }
    }
    if (options.copy_fields) out.status.Update(batch.WaitOnHost());
    out.batches.push_back(ToHost(batch, options.copy_fields));
    out.status.Update(batch.Release());
  }
  return out;
}

}  // namespace pinwheel::testing_support

#endif  // PINWHEEL_TESTS_SUPPORT_DRAIN_EPOCH_H_
