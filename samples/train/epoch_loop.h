// The sample trainer's epochs: from where the run starts (the first epoch,
// or the batch a checkpoint stood at) to the last, each a training pass, a
// held-out pass and one line of results (rank 0), with checkpoints on the
// way (Note [exact resume] in loader/loader_checkpoint.h).
//
// Example:
//   EpochLoop loop(options, job, collective, *mlp, compute, train_loader,
//                  eval_loader, data.train->size());
//   PINWHEEL_RETURN_IF_ERROR(loop.Run(resumed));
//   if (loop.accuracy()) absl::PrintF("%.2f%%\n", *loop.accuracy());
#ifndef PINWHEEL_SAMPLES_TRAIN_EPOCH_LOOP_H_
#define PINWHEEL_SAMPLES_TRAIN_EPOCH_LOOP_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

#include "loader/loader.h"
#include "loader/telemetry/rank_wait.h"
#include "samples/train/collective.h"
#include "samples/train/mlp.h"
#include "samples/train/train_checkpoint.h"
#include "transfer/stream.h"

namespace pinwheel::train {

// What the command line asks of the epochs.
struct EpochOptions {
  int epochs = 1;                 // the job's last epoch (1-based)
  std::string checkpoint_dir;     // empty: no checkpoints
  int64_t checkpoint_every = 0;   // also every N steps; 0: at epoch ends only
  int64_t die_after_batches = 0;  // testing: SIGKILL after step N; 0: never
  // A file rank 0 appends "step S epoch E batch B" to after each step (the
  // per-step log samples/tools/kill_anywhere.py watches); empty: none.
  std::string step_log;
  bool check_coverage = false;  // CheckCoverage after every epoch
};

// Not thread-safe: the trainer's one thread runs it, every rank making the
// same calls (the sums over ranks are collective).
class EpochLoop {
 public:
  // `job`: the fields every checkpoint of this run shares (shape, seed,
  // batch size, world size, SGD options); the loop fills in the rest each
  // time it writes one. Borrows the others, each of which must outlive the
  // loop: `compute` is `mlp`'s stream, `train_samples` the size of the
  // dataset `train` reads.
  EpochLoop(EpochOptions options, TrainCheckpoint job, Collective& collective,
            Mlp& mlp, const Stream& compute, Loader& train, Loader& held_out,
            int64_t train_samples);

  ~EpochLoop();
  EpochLoop(const EpochLoop&) = delete;
  EpochLoop& operator=(const EpochLoop&) = delete;

  // Trains the epochs left: from `resumed`'s position when given (already
  // checked to fit this run, and restored into the model and the training
  // loader), else from the first epoch. Returns the first error.
  [[nodiscard]] absl::Status Run(const std::optional<TrainCheckpoint>& resumed);

  // Returns the training steps taken in the job so far (across resumes).
  int64_t step() const { return step_; }
  // Returns the last epoch's held-out accuracy in percent; nullopt when no
  // epoch ran.
  std::optional<double> accuracy() const { return accuracy_; }

 private:
  // Where an epoch starts: 0 and 0 unless it is the resumed one.
  struct EpochStart {
    int64_t batches = 0;   // of the epoch, trained before this run
    int64_t position = 0;  // its first global position this run reads
  };
  // This rank's training pass.
  struct TrainingPass {
    int64_t batches_before = 0;  // of the epoch, trained before this pass
    int64_t step_before = 0;     // of the job, taken before this pass
    MlpMetrics metrics;
    absl::Duration time;
    // Blocked on the loader: in Next(), and on the host backend in
    // DeviceBatch::WaitOn (there it is the copy). Note [what waiting for
    // data counts] in epoch_loop.cc.
    absl::Duration waited;
    // On a GPU, the host time of DeviceBatch::WaitOn: a cudaStreamWaitEvent,
    // which returns at once unless the GPU's queue of work is full or the
    // driver is busy; not waiting for data, said apart.
    absl::Duration enqueue_stalled;
    // On a GPU, the part of the wait in Next() in which the copy waited for
    // a device buffer this rank's own steps still held: the GPU's
    // back-pressure, not the data's; said apart (LoaderStats::
    // consumer_wait_behind_buffers).
    absl::Duration behind_buffers;
    int64_t bytes = 0;  // delivered by the loader
    // The training loader's stall verdict after the pass
    // (loader/telemetry/stall_verdict.h; its last 1024 batches).
    std::string verdict;
    // With --workers/--prefetch=auto: where the tuner stands after the
    // pass ("auto: 6 of 14 workers, prefetch 8 of 64, 3 changes; last:
    // ..."); empty otherwise.
    std::string auto_tune;
    // The same stats as this rank's record for SlowestRankOf().
    RankWait rank_wait;
  };
  // This rank's held-out pass.
  struct HeldOutPass {
    MlpMetrics metrics;
    absl::Duration time;
  };
  // The training passes of all ranks together.
  struct EpochSums {
    double loss_sum = 0;
    double samples = 0;
    double bytes = 0;
    std::vector<double> rates;             // samples/s, one a rank
    std::vector<double> waited_percents;   // one a rank
    std::vector<double> stalled_percents;  // enqueue_stalled, one a rank
    std::vector<double> behind_percents;   // behind_buffers, one a rank
    // SlowestRankOf() the ranks' RankWaits (empty with one rank).
    std::string slowest_rank;
  };

  // One epoch: the training pass, the held-out pass, the sums over the
  // ranks (and the coverage check), the epoch's line and its checkpoint.
  // A training loss that is not finite (on any rank) ends the run with an
  // error naming the epoch and the first such step, before the epoch's line
  // and checkpoint.
  absl::Status TrainEpoch(int epoch, EpochStart start);
  absl::StatusOr<TrainingPass> RunTrainingPass(int epoch,
                                               int64_t batches_before,
                                               std::vector<int32_t>* coverage);
  absl::StatusOr<HeldOutPass> RunHeldOutPass();
  absl::StatusOr<EpochSums> SumOverRanks(const TrainingPass& trained);
  absl::Status NonFiniteLoss(int epoch, const TrainingPass& trained,
                             double loss_sum) const;
  void SayEpoch(int epoch, const TrainingPass& trained,
                const HeldOutPass& evaluated, const EpochSums& sums,
                int64_t batches_before) const;
  // Runs after each training step: counts it, checkpoints every
  // --checkpoint_every steps, dies on --die_after_batches.
  absl::Status AfterStep(int epoch, int64_t batches_in_epoch);
  // Writes the checkpoint (rank 0, when a directory was given): the loader's
  // position and the model as they stand after the last step.
  absl::Status SaveCheckpoint(int64_t epoch, int64_t batches_in_epoch);

  const EpochOptions options_;
  const TrainCheckpoint job_;
  Collective& collective_;
  Mlp& mlp_;
  const Stream& compute_;
  Loader& train_;
  Loader& held_out_;
  const int64_t train_samples_;

  int64_t step_ = 0;      // training steps taken in the job so far
  int step_log_fd_ = -1;  // options_.step_log, opened at the first step
  std::optional<double> accuracy_;
};

}  // namespace pinwheel::train

#endif  // PINWHEEL_SAMPLES_TRAIN_EPOCH_LOOP_H_
