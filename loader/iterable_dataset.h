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
// (nothing at the epoch's start), plus the sample's position in its batch
// (its place among the batch's reads: the same unless a SampleFinish
// skipped a sample before it). Those are exactly what a checkpoint holds, so a
// resumed epoch draws the same numbers for every sample as the uninterrupted
// one, provided the batch_size is the same (the loader's batches are cut at the
// same stream states) and SaveState() tells positions apart (as resuming needs
// anyway). A stream without SaveState() is keyed by the count of the shard's
// batches before it instead (reproducible from run to run; it cannot be
// resumed). Unlike a map-style sample's, the key depends on the shard split,
// i.e. on num_workers and world_size (which decide what each shard holds).
//
// Note [a streamed sample finished elsewhere]
// A shard's samples are read in order by one worker (a stream has one
// position), so a batch whose every sample is also decoded in Next() keeps
// one core busy however many workers there are. A stream can split the
// work: NextOrDefer() reads what only the stream can read (the position,
// the bytes) and hands back a SampleFinish that does the rest (decoding,
// cropping). The loader runs a batch's finishes in parallel on any of its
// workers (an idle worker helps the one reading), after the read and
// before the batch is delivered, so the stream's next sample is read while
// earlier ones decode. A finish may report its sample bad and skipped
// (FinishResult::kSkipped): the loader then reads the next sample in its
// place, so a batch holds the same samples as when read in order.
#ifndef PINWHEEL_LOADER_ITERABLE_DATASET_H_
#define PINWHEEL_LOADER_ITERABLE_DATASET_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "absl/functional/any_invocable.h"
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
  // What a SampleFinish did with its sample.
  enum class FinishResult {
    kWritten,  // the sample is in the view
    kSkipped,  // the sample was bad and the stream skips bad samples: the
               // loader reads the next one in its place
  };
  // The rest of one sample's work (Note [a streamed sample finished
  // elsewhere]), called once, on any worker thread, at the same time as
  // other samples' finishes and as this stream's next NextOrDefer(): it
  // must not touch the stream. It writes the sample into `out`, the view
  // NextOrDefer() was given (the same place and generator), and returns
  // what it did, or an error, which stops the loader as Next()'s would.
  using SampleFinish =
      absl::AnyInvocable<absl::StatusOr<FinishResult>(SampleView& out) &&>;

  virtual ~SampleStream() = default;
  // Writes the next sample into `out` and returns true, or returns false at
  // the end of the shard, or an error. An error, an exception (of any type)
  // or a misuse of `out` (see SampleView) stops the loader; Next() reports
  // it naming the shard, the sample, the batch and the epoch.
  virtual absl::StatusOr<bool> Next(SampleView& out) = 0;

  // Optional: Next() that may leave the costly part of the sample to
  // `finish` (Note [a streamed sample finished elsewhere]). Returns as
  // Next() does; when it returns true with `finish` set, the sample is
  // written only once the loader has called `finish` (until then the
  // view's bytes are the slot's old ones). `finish` is empty on entry. The
  // default calls Next() and leaves `finish` empty.
  virtual absl::StatusOr<bool> NextOrDefer(SampleView& out,
                                           SampleFinish& /*finish*/) {
    return Next(out);
  }

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

 protected:
  // For a stream that overrides NextOrDefer(): its Next() in one line
  // (`return NextFinishedHere(out);`), each finish run on the calling thread
  // and the samples a finish skips read past.
  // REQUIRES: NextOrDefer() is overridden (the default calls Next()).
  absl::StatusOr<bool> NextFinishedHere(SampleView& out) {
    for (;;) {
      SampleFinish finish;
      absl::StatusOr<bool> more = NextOrDefer(out, finish);
      if (!more.ok() || !*more || !finish) return more;
      absl::StatusOr<FinishResult> finished = std::move(finish)(out);
      if (!finished.ok()) return finished.status();
      if (*finished == FinishResult::kWritten) return true;
    }
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

  // Optional: true when this dataset's streams leave their samples' costly
  // part to a SampleFinish (SampleStream::NextOrDefer), which any worker
  // may run: workers then help with batches they did not claim, and
  // Build() does not say that fewer slots than workers leave workers idle.
  // The default is false.
  virtual bool defers_sample_work() const { return false; }
};

}  // namespace pinwheel

#endif  // PINWHEEL_LOADER_ITERABLE_DATASET_H_
