// BatchFiller: writes a batch's samples into its pinned slot. Prepares each
// sample's view (variable-length fields at their maximum), calls the user's
// Read or SampleStream::Next through CallUser(), checks what came back,
// zeroes the padding of variable-length fields, and on a failed sample
// either names it (ErrorPolicy::kStop: index, position, batch and epoch) or
// compacts the batch without it (kSkipSample) or reads a deterministic
// replacement in its place (kReplace); pads short batches to batch_size with
// a validity field (LoaderOptions::pad_last_batch).
//
// Thread-safe: Fill calls run concurrently on the loader's workers, each on
// its own batch.
#ifndef PINWHEEL_LOADER_PIPELINE_BATCH_FILLER_H_
#define PINWHEEL_LOADER_PIPELINE_BATCH_FILLER_H_

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"

#include "loader/dataset.h"
#include "loader/iterable_dataset.h"
#include "loader/loader_options.h"
#include "loader/pipeline/batch_source.h"
#include "loader/pipeline/reads_in_flight.h"
#include "loader/pipeline/stop_flag.h"
#include "loader/pipeline/user_code.h"
#include "loader/pipeline/worker_gate.h"
#include "transfer/sample_layout.h"

namespace pinwheel::internal {

class BatchFiller {
 public:
  // Borrows `layout`, `worker_init` and `stop`, which must outlive it.
  // `inline_mode`: samples are read on the consumer's thread, never split
  // over the workers.
  BatchFiller(const BatchLayout& layout, const LoaderOptions& options,
              bool inline_mode, WorkerInit& worker_init, const StopFlag& stop);

  // Reads batch.info.sample_indices from `dataset` into batch.slot. On
  // failure sets batch.status (kStop, naming the first failed sample) or
  // drops the failed samples from the batch (kSkipSample, counted in
  // samples_skipped()); when stopping, leaves it half-read
  // (batch.abandoned).
  void FillIndexed(const Dataset& dataset, ProducedBatch& batch);

  // Reads up to batch_size samples of `stream` (shard batch.shard) into
  // batch.slot, setting batch.info.samples, and after them the stream's
  // state. Returns whether the stream is done (exhausted or failed). A
  // failure is batch.status, naming the shard and the sample. The n-th
  // sample read for the batch has its generator keyed by
  // Mix64(stream_key + n) (see Note [a streamed sample's generator] in
  // loader/iterable_dataset.h); n is its position unless a finish skipped
  // a sample before it. Samples the stream defers (SampleStream::
  // NextOrDefer) are finished by any worker before this returns
  // (batch_filler_streamed.cc).
  bool FillStreamed(SampleStream& stream, ProducedBatch& batch,
                    uint64_t stream_key = 0);

  // Reads hold `gate` (an auto-tuned worker count; null: none), which must
  // outlive this. REQUIRES: no Fill running.
  void set_gate(WorkerGate* gate) { gate_ = gate; }

  // Returns the samples left out under kSkipSample so far.
  int64_t samples_skipped() const {
    return samples_skipped_.load(std::memory_order_relaxed);
  }
  // Returns the samples replaced under kReplace so far, and the last
  // replacement's cause.
  int64_t samples_replaced() const {
    return samples_replaced_.load(std::memory_order_relaxed);
  }
  std::string last_replaced() const ABSL_LOCKS_EXCLUDED(replaced_mu_);

  // Returns the user reads (Read, SampleStream::Next) running now.
  std::vector<RunningRead> RunningReads() const { return reads_.Running(); }

 private:
  // FillStreamed()'s parts (batch_filler_streamed.cc).
  struct Deferred;
  struct StreamedRun;
  struct FinishTask;
  // Reads samples from `stream` into the batch's free places (holding the
  // gate), starting each deferred sample's finish as a task.
  void ReadRound(SampleStream& stream, ProducedBatch& batch, StreamedRun& run);
  // Runs one deferred sample's finish (holding the gate) and checks it.
  void RunFinish(Deferred& d, const ProducedBatch& batch, StreamedRun& run);
  // Waits for the round's finishes; records the first failure and moves
  // the samples after skipped ones down. Returns the samples skipped.
  int64_t FinishRound(ProducedBatch& batch, StreamedRun& run);
  // Sets the view's variable-length fields to their maximum before a read.
  void PrepareView(SampleView& view) const;
  // After a successful read: checks the view's misuse and lengths and zeroes
  // the padding of variable-length fields.
  absl::Status FinishView(SampleView& view) const;
  // kReplace: reads a deterministic replacement into each failed sample's
  // place (up to kReplaceAttempts each); sets batch.status naming the
  // sample when none could be read.
  void Replace(const Dataset& dataset, ProducedBatch& batch,
               std::vector<absl::Status>& failures);
  // pad_last_batch: writes the validity field and pads a short batch with
  // zeroed samples up to batch_size.
  void Pad(ProducedBatch& batch) const;
  // Returns what a SampleView of a dataset read shows as its layout: null
  // (the slot's) unless pad_ (read_sample_).
  const SampleLayout* ReadLayout() const {
    return pad_ ? &read_sample_ : nullptr;
  }
  // Copies sample `from`'s bytes over sample `to`'s, field by field.
  void MoveSample(ProducedBatch& batch, int64_t from, int64_t to) const;
  // Moves the samples that did not fail down over those that did.
  void Compact(ProducedBatch& batch,
               const std::vector<absl::Status>& failures) const;

  const BatchLayout& layout_;
  const int64_t batch_size_;
  const uint64_t seed_;
  const ErrorPolicy on_error_;
  const bool drop_last_;
  const bool inline_;
  WorkerInit& worker_init_;
  const StopFlag& stop_;
  std::atomic<int64_t> samples_skipped_{0};
  ReadsInFlight reads_;
  const bool pad_;
  // pad_: the dataset's own fields (layout_'s sample fields but the
  // validity field), the layout Read() sees in its SampleView: shipped
  // datasets check it against theirs.
  SampleLayout read_sample_;
  std::atomic<int64_t> samples_replaced_{0};
  WorkerGate* gate_ = nullptr;
  mutable absl::Mutex replaced_mu_;
  std::string last_replaced_ ABSL_GUARDED_BY(replaced_mu_);
};

}  // namespace pinwheel::internal

#endif  // PINWHEEL_LOADER_PIPELINE_BATCH_FILLER_H_
