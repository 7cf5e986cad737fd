// Producer: fills batches ahead of the consumer. Owns the producer thread,
// the stop flag, the epoch throttle (Note [at most two epochs ahead]), the
// inline mode (no workers: a batch read on the consumer's thread when it
// asks; with no ring, a batch submitted as a job with no slot, which the
// stage's writer makes from its BatchInfo alone) and ONE oneTBB pipeline, run
// each epoch over a BatchSource (Note [the producer pipeline] in producer.cc).
// Borrows the ring, the stage and the source from the LoaderCore that wires
// them.
//
// Example (LoaderCore):
//   producer_ = std::make_unique<Producer>(options, path.workers, device,
//                                          layout, ring_.get(), stage_.get(),
//                                          source_.get(), &latencies);
//   producer_->Start(first_epoch);
//   ...
//   producer_->Stop();  // joins; Start() may follow
//
// Thread-safety: Start(), Stop(), ProduceInline() and ConsumerReached() are
// for the consumer's thread; the rest runs on the producer's thread and its
// arena.
#ifndef PINWHEEL_LOADER_PIPELINE_PRODUCER_H_
#define PINWHEEL_LOADER_PIPELINE_PRODUCER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "oneapi/tbb/task_arena.h"

#include "loader/internal/arena_cpus.h"
#include "loader/loader_options.h"
#include "loader/pipeline/batch_filler.h"
#include "loader/pipeline/batch_source.h"
#include "loader/pipeline/reads_in_flight.h"
#include "loader/pipeline/stop_flag.h"
#include "loader/pipeline/user_code.h"
#include "loader/pipeline/worker_gate.h"
#include "loader/telemetry/stage_latencies.h"
#include "pinning/pinned_ring.h"
#include "transfer/device.h"
#include "transfer/sample_layout.h"
#include "transfer/transfer_stage.h"

namespace pinwheel::internal {

// Returns the OutOfRange error of an epoch past Loader::kMaxEpoch.
absl::Status PastTheLastEpoch(int64_t epoch);

class Producer {
 public:
  // Borrows `layout`, `ring`, `stage`, `source` and `latencies` (where the
  // slot waits and reads are timed), which must outlive it.
  // `workers` threads read (0: inline mode, LoaderPath::workers); when
  // `worker_cpus` is not empty they and the producer thread are moved onto
  // those CPUs (LoaderPath::worker_cpus); `ring` null: the batches hold no
  // slot (REQUIRES: workers == 0 and a source that reads inline).
  // REQUIRES: options validated by LoaderBuilder.
  Producer(const LoaderOptions& options, int workers,
           const std::vector<int>& worker_cpus, const Device& device,
           const BatchLayout& layout, PinnedRing* ring, TransferStage* stage,
           BatchSource* source, LatencyRecorder* latencies);
  Producer(const Producer&) = delete;
  Producer& operator=(const Producer&) = delete;
  // Calls Stop().
  ~Producer();

  // Starts producing at `first_epoch` (in inline mode: arms ProduceInline()).
  // REQUIRES: stopped.
  void Start(int64_t first_epoch) ABSL_LOCKS_EXCLUDED(epoch_mu_);
  // Stops reading (a batch left half-read is abandoned and its slot
  // recycled), cancels the ring and joins the producer thread. Idempotent.
  void Stop() ABSL_LOCKS_EXCLUDED(epoch_mu_);
  // Stop(), but waits for the producer thread only until `deadline`.
  // Returns nullopt when the thread stopped in time, else the user reads
  // still running (empty when it is stuck elsewhere: OpenShard, worker_init).
  // When it did not, the thread is detached and left to finish on its own: it
  // holds `keep_alive` (which must own everything it touches, this Producer
  // included) until it returns; Start() must not follow. See Note [abandoning a
  // stuck read] in loader_core.cc.
  std::optional<std::vector<RunningRead>> StopWithin(
      absl::Time deadline, std::shared_ptr<const void> keep_alive)
      ABSL_LOCKS_EXCLUDED(epoch_mu_, exit_mu_);

  // Reads hold `gate` (num_workers = kAuto), which must outlive this.
  // REQUIRES: stopped, not inline_mode().
  void UseGate(WorkerGate* gate) {
    gate_ = gate;
    filler_.set_gate(gate);
  }
  // The flag every wait of the producer side looks at (a WorkerGate's too).
  const StopFlag& stop_flag() const { return stop_; }

  // Returns whether batches are read on the consumer's thread.
  bool inline_mode() const { return inline_; }
  // Inline mode: produces one batch on the calling thread and submits it
  // (filled into a slot, or with no ring as a job with no slot). Returns
  // true when it produced a batch (or one whose samples were all skipped)
  // and more may follow; false when it queued the end of the epoch (the
  // next call starts the next epoch) or the loader stopped.
  bool ProduceInline();
  // The consumer now reads `epoch`: see Note [at most two epochs ahead].
  void ConsumerReached(int64_t epoch) ABSL_LOCKS_EXCLUDED(epoch_mu_);

  // Returns the samples left out under kSkipSample so far.
  int64_t samples_skipped() const { return filler_.samples_skipped(); }
  // kReplace: samples replaced so far, and the last one's cause.
  int64_t samples_replaced() const { return filler_.samples_replaced(); }
  std::string last_replaced() const { return filler_.last_replaced(); }

 private:
  void Loop(int64_t first_epoch);
  // Sets the stop flag and wakes every wait of the producer side.
  void RequestStop() ABSL_LOCKS_EXCLUDED(epoch_mu_);
  // Waits until the consumer reads epoch `epoch` - 1 or later. Returns
  // false when stopping instead.
  bool AwaitConsumerNear(int64_t epoch) ABSL_LOCKS_EXCLUDED(epoch_mu_);
  // One epoch through the pipeline.
  void RunEpoch(int64_t epoch);
  // Stops the loader and delivers `error` in the place of `epoch`'s next
  // batch.
  void Fail(int64_t epoch, absl::Status error);
  // Hands a read batch to the stage (or recycles its slot when it holds no
  // sample or was abandoned); an error also stops the loader.
  void Deliver(ProducedBatch& batch);
  // While stopping: gives a read batch's slot back instead of delivering it.
  // Returns whether it did (errors are still delivered).
  bool RecycleIfStopping(const ProducedBatch& batch);
  void SubmitEndOfEpoch(int64_t epoch);
  // Acquires a slot for `batch`, timing the wait (latencies_->slot_wait).
  absl::StatusOr<PinnedRing::Slot> AcquireSlot();
  // Fills `batch`, timing it (latencies_->read).
  void Fill(ProducedBatch& batch);
  // Inline mode: claims the inline epoch's next batch into `batch`
  // (starting the epoch first when due). Returns false at the epoch's end,
  // having queued its end-of-epoch marker and armed the next epoch.
  bool ClaimInline(ProducedBatch& batch);

  const LoaderOptions& options_;
  PinnedRing* const ring_;  // null: jobs hold no slot
  TransferStage* const stage_;
  BatchSource* const source_;
  LatencyRecorder* const latencies_;
  // No workers with a map-style dataset: read on the consumer's thread.
  const bool inline_;
  StopFlag stop_;
  WorkerInit worker_init_;
  BatchFiller filler_;
  WorkerGate* gate_ = nullptr;          // null: every worker reads
  const std::vector<int> worker_cpus_;  // the producer thread's, when set
  std::unique_ptr<tbb::task_arena> arena_;
  // Moves the threads that come to work in the arena (null: they keep
  // their mask); destroyed before the arena.
  std::unique_ptr<ArenaCpus> arena_cpus_;
  std::thread thread_;
  // The producer thread's exit (see StopWithin()).
  absl::Mutex exit_mu_;
  bool loop_done_ ABSL_GUARDED_BY(exit_mu_) = false;
  std::shared_ptr<const void> keep_alive_ ABSL_GUARDED_BY(exit_mu_);

  // The epoch the consumer reads (for the throttle).
  absl::Mutex epoch_mu_;
  int64_t consumer_epoch_ ABSL_GUARDED_BY(epoch_mu_) = 0;

  // Inline production, consumer thread only.
  int64_t inline_epoch_ = 0;
  bool inline_epoch_started_ = false;
  bool inline_epoch_done_ = true;
};

}  // namespace pinwheel::internal

#endif  // PINWHEEL_LOADER_PIPELINE_PRODUCER_H_
