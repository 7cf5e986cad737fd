// IterableDataset: a dataset read as streams rather than by index. The
// loader splits it into shards (world_size × max(1, num_workers)); each shard
// is opened once per epoch and read by one worker at a time, so nothing is
// read twice or skipped. Each batch holds samples of one shard, so each
// shard's last batch may be short (dropped under drop_last).
//
// Example:
//   class Lines : public pinwheel::IterableDataset {
//     const SampleLayout& layout() const override { return layout_; }
//     absl::StatusOr<std::unique_ptr<SampleStream>> OpenShard(
//         int shard, int num_shards, int64_t epoch) const override {
//       return std::make_unique<LineStream>(path_, shard, num_shards);
//     }
//   };
//
// Note [a streamed sample's generator]
// SampleStream::Next() gets a SampleView whose random() is, like a map-style
// sample's, a pure function of the loader's seed and the epoch, and keyed by
// where the sample stands in its shard: the shard's number (over all ranks)
// and the stream's SaveState() taken after the shard's previous batch
// (nothing at the epoch's start), plus the sample's position in its batch.
// Those are exactly what a checkpoint holds, so a resumed epoch draws the
// same numbers for every sample as the uninterrupted one, provided the
// batch_size is the same (the loader's batches are cut at the same stream
// states) and SaveState() tells positions apart (as resuming needs anyway).
// A stream without SaveState() is keyed by the count of the shard's batches
// before it instead (reproducible from run to run; it cannot be resumed).
// Unlike a map-style sample's, the key depends on the shard split, i.e. on
// num_workers and world_size (which decide what each shard holds).
#ifndef PINWHEEL_LOADER_ITERABLE_DATASET_H_
#define PINWHEEL_LOADER_ITERABLE_DATASET_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

#include "loader/dataset.h"
#include "loader/loader_checkpoint.h"
#include "transfer/sample_layout.h"

namespace pinwheel {

// One shard's samples for one epoch. Not thread-safe: the loader never
// calls one stream from two threads at once. The loader destroys it at the
// end of its epoch (or at a restart or shutdown); the destructor must not
// throw (it is noexcept: an exception there ends the process).
class SampleStream {
 public:
  virtual ~SampleStream() = default;
  // Writes the next sample into `out` and returns true, or returns false at
  // the end of the shard, or an error. An error, an exception (of any type)
  // or a misuse of `out` (see SampleView) stops the loader; Next() reports
  // it naming the shard, the sample, the batch and the epoch.
  virtual absl::StatusOr<bool> Next(SampleView& out) = 0;

  // Optional, for Loader::Checkpoint() (see Note [exact resume] in
  // loader/loader_checkpoint.h). SaveState() returns the stream's position
  // as bytes (small: a file offset, a counter) such that RestoreState() on a
  // fresh stream of the same shard and epoch continues with the very next
  // sample. The loader calls SaveState() after every batch it reads from
  // the stream. The defaults return Unimplemented: Checkpoint() then
  // returns FailedPrecondition.
  virtual absl::StatusOr<std::string> SaveState() const {
    return absl::UnimplementedError("SampleStream::SaveState() not overridden");
  }
  virtual absl::Status RestoreState(absl::string_view /*state*/) {
    return absl::UnimplementedError(
        "SampleStream::RestoreState() not overridden");
  }
};

// Which part of an epoch this process reads: what the loader tells
// IterableDataset::StartEpoch(). This rank opens the shards
// rank × shards_per_rank + i for 0 <= i < shards_per_rank, of
// world_size × shards_per_rank (ShardSource::StreamOf). A value.
struct EpochShare {
  int64_t epoch = 0;
  int rank = 0;
  int world_size = 1;
  int shards_per_rank = 1;  // max(1, num_workers)
  // The checkpoint this epoch resumes from (its epoch is `epoch`); null when
  // the epoch starts from the beginning. Borrowed for the call.
  const LoaderCheckpoint* resume = nullptr;
};

// Interface; layout() constant, OpenShard() and StartEpoch() thread-safe.
class IterableDataset {
 public:
  virtual ~IterableDataset() = default;
  virtual const SampleLayout& layout() const = 0;
  // Returns the stream of shard `shard` (0 <= shard < num_shards) for
  // `epoch`. Together the shards must hold every sample exactly once. An
  // error, an exception (of any type) or OK with a null stream
  // (InvalidArgument) stops the loader, reported naming shard and epoch.
  // A shard may be empty; an epoch whose shards are all empty ends at once
  // (Loader::Next() returns nullopt).
  virtual absl::StatusOr<std::unique_ptr<SampleStream>> OpenShard(
      int shard, int num_shards, int64_t epoch) const = 0;

  // Optional: called at the start of every epoch, before OpenShard() of any
  // of this process's shards of it, saying which shards this process will
  // read and from where. A dataset that reads through a cache plans the
  // epoch's reads here (loader/storage/cache/planned_tar_shards.h). An error
  // or exception stops the loader, reported naming the epoch. The default
  // does nothing.
  virtual absl::Status StartEpoch(const EpochShare& /*share*/) const {
    return absl::OkStatus();
  }
};

}  // namespace pinwheel

#endif  // PINWHEEL_LOADER_ITERABLE_DATASET_H_
