#include "samples/train/epoch_loop.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <functional>
#include <numeric>
#include <optional>
#include <string>
#include <unistd.h>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

#include "loader/atomic_file.h"
#include "loader/loader.h"
#include "loader/sampler.h"
#include "loader/telemetry/rank_wait.h"
#include "loader/telemetry/stall_verdict.h"
#include "pinning/base/status_macros.h"
#include "samples/train/collective.h"
#include "samples/train/mlp.h"
#include "samples/train/train_checkpoint.h"
#include "transfer/device_batch.h"
#include "transfer/stream.h"

namespace pinwheel::train {
namespace {

double Sum(const std::vector<double>& values) {
  return std::accumulate(values.begin(), values.end(), 0.0);
}

// "0.9% 5.6%": one value a rank.
std::string Percents(const std::vector<double>& percents) {
  return absl::StrJoin(percents, " ", [](std::string* out, double percent) {
    absl::StrAppendFormat(out, "%.1f%%", percent);
  });
}

double Seconds(absl::Duration d) { return absl::ToDoubleSeconds(d); }

// A one-line progress bar, redrawn in place; silent unless stdout is a
// terminal.
class ProgressBar {
 public:
  ProgressBar(int epoch, int epochs, int64_t total, bool wanted)
      : epoch_(epoch),
        epochs_(epochs),
        total_(total),
        enabled_(wanted && isatty(STDOUT_FILENO) == 1),
        start_(absl::Now()) {}

  void Update(int64_t done, int64_t samples) {
    if (!enabled_) return;
    const int64_t step = std::max<int64_t>(total_ / 50, 1);
    if (done % step != 0 && done != total_) return;
    constexpr int kWidth = 30;
    const int filled =
        static_cast<int>(kWidth * done / std::max<int64_t>(total_, 1));
    const double secs = Seconds(absl::Now() - start_);
    absl::PrintF("\r  epoch %d/%d [%s%s] %3d%%  %.0f samples/s", epoch_,
                 epochs_, std::string(filled, '#'),
                 std::string(kWidth - filled, '.'),
                 static_cast<int>(100 * done / std::max<int64_t>(total_, 1)),
                 secs > 0 ? samples / secs : 0.0);
    std::fflush(stdout);
  }
  // Erases the bar so the next line starts clean.
  void Clear() {
    if (!enabled_) return;
    absl::PrintF("\r\033[K");
    std::fflush(stdout);
  }

 private:
  int epoch_, epochs_;
  int64_t total_;
  bool enabled_;
  absl::Time start_;
};

// What one pass over a loader's epoch cost the trainer.
struct PassCost {
  absl::Duration wait_on;  // inside DeviceBatch::WaitOn (host: the copy)
  int64_t batches = 0;
};

enum class Pass { kTrain, kEvaluate };

// Runs one epoch of `loader` through `mlp`: every batch is waited on, used
// and released on `compute`, the model's own stream (no host sync on cuda).
// `coverage`, when given, counts each dataset index read.
// `after_step`, when given, runs after each training batch is released.
absl::StatusOr<PassCost> RunEpoch(
    Loader& loader, Mlp& mlp, const Stream& compute, Pass pass,
    ProgressBar* progress, std::vector<int32_t>* coverage,
    const std::function<absl::Status()>& after_step = {}) {
  const int x = loader.layout().sample().FieldIndex("x");
  const int y = loader.layout().sample().FieldIndex("y");
  PassCost cost;
  int64_t samples = 0;
  while (true) {
    PINWHEEL_ASSIGN_OR_RETURN(std::optional<DeviceBatch> batch, loader.Next());
    if (!batch) break;  // end of the epoch
    const absl::Time wait_start = absl::Now();
    PINWHEEL_RETURN_IF_ERROR(batch->WaitOn(compute));
    cost.wait_on += absl::Now() - wait_start;
    const auto* xs = batch->field(x).data_as<const float>();
    const auto* ys = batch->field(y).data_as<const int64_t>();
    if (pass == Pass::kTrain) {
      PINWHEEL_RETURN_IF_ERROR(mlp.TrainStep(xs, ys, batch->size()));
    } else {
      PINWHEEL_RETURN_IF_ERROR(mlp.EvalStep(xs, ys, batch->size()));
    }
    samples += batch->size();
    if (coverage != nullptr) {
      for (int64_t index : batch->sample_indices()) ++(*coverage)[index];
    }
    // Fences the buffer's reuse behind the work just queued on `compute`.
    PINWHEEL_RETURN_IF_ERROR(batch->Release(compute));
    ++cost.batches;
    if (after_step) PINWHEEL_RETURN_IF_ERROR(after_step());
    if (progress != nullptr) progress->Update(cost.batches, samples);
  }
  return cost;
}

// Checks that the ranks together read every training sample exactly once in
// an epoch (`counts` holds this rank's reads per index; summed here). In an
// epoch resumed at global position `resumed_at` > 0, the samples at
// positions before it (of the epoch's shuffle `order`) were trained on
// before the checkpoint: they must be read by no rank, the others once.
absl::Status CheckCoverage(Collective& collective, std::vector<int32_t>& counts,
                           int epoch, const EpochShuffle& order,
                           int64_t resumed_at) {
  PINWHEEL_RETURN_IF_ERROR(collective.SumHost(counts));
  std::vector<int32_t> expected(counts.size(), 1);
  for (int64_t p = 0; p < resumed_at; ++p) expected[order.At(p)] = 0;
  int64_t missing = 0, repeated = 0, first_bad = -1;
  for (size_t i = 0; i < counts.size(); ++i) {
    if (counts[i] == expected[i]) continue;
    (counts[i] < expected[i] ? missing : repeated) += 1;
    if (first_bad < 0) first_bad = static_cast<int64_t>(i);
  }
  if (missing != 0 || repeated != 0) {
    return absl::InternalError(absl::StrFormat(
        "coverage: epoch %d: %d training samples read by no rank and %d "
        "read more often than expected (the first: sample %d, read %d times, "
        "expected %d) across %d ranks%s",
        epoch, missing, repeated, first_bad, counts[first_bad],
        expected[first_bad], collective.world_size(),
        resumed_at > 0
            ? absl::StrFormat(" (resumed at position %d)", resumed_at)
            : std::string()));
  }
  if (resumed_at > 0) {
    Say(collective,
        "coverage: epoch %d: the %d rank(s) together read each of the %d "
        "training samples after the resume point (position %d of %d) exactly "
        "once, and none before it\n",
        epoch, collective.world_size(),
        static_cast<int64_t>(counts.size()) - resumed_at, resumed_at,
        counts.size());
  } else {
    Say(collective,
        "coverage: epoch %d: the %d rank(s) together read each of the %d "
        "training samples exactly once\n",
        epoch, collective.world_size(), counts.size());
  }
  return absl::OkStatus();
}

}  // namespace

EpochLoop::EpochLoop(EpochOptions options, TrainCheckpoint job,
                     Collective& collective, Mlp& mlp, const Stream& compute,
                     Loader& train, Loader& held_out, int64_t train_samples)
    : options_(std::move(options)),
      job_(std::move(job)),
      collective_(collective),
      mlp_(mlp),
      compute_(compute),
      train_(train),
      held_out_(held_out),
      train_samples_(train_samples) {}

absl::Status EpochLoop::Run(const std::optional<TrainCheckpoint>& resumed) {
  int64_t first_epoch = 1;  // may be epochs + 1: the job had finished
  EpochStart resumed_start;
  if (resumed) {
    step_ = resumed->step;
    first_epoch = resumed->epoch;
    resumed_start = {.batches = resumed->batches_in_epoch,
                     .position = resumed->loader.position};
    Say(collective_,
        "resume: from %s/%s: epoch %d, after %d of its batches (%d steps in "
        "all; written by %d rank(s) at batch size %d; sample %d of %d)\n",
        options_.checkpoint_dir, kCheckpointFile, first_epoch,
        resumed_start.batches, step_, resumed->world_size, resumed->batch_size,
        resumed_start.position, train_samples_);
  }
  if (first_epoch > options_.epochs) {
    Say(collective_,
        "resume: the checkpoint is past the last of %d epochs; nothing left "
        "to train\n",
        options_.epochs);
  }
  for (int epoch = static_cast<int>(
           std::min<int64_t>(first_epoch, options_.epochs + 1));
       epoch <= options_.epochs; ++epoch) {
    const bool resumed_epoch = resumed && epoch == first_epoch;
    PINWHEEL_RETURN_IF_ERROR(
        TrainEpoch(epoch, resumed_epoch ? resumed_start : EpochStart()));
  }
  return absl::OkStatus();
}

absl::Status EpochLoop::TrainEpoch(int epoch, EpochStart start) {
  std::vector<int32_t> coverage;
  PINWHEEL_ASSIGN_OR_RETURN(
      const TrainingPass trained,
      RunTrainingPass(epoch, start.batches,
                      options_.check_coverage ? &coverage : nullptr));
  PINWHEEL_ASSIGN_OR_RETURN(const HeldOutPass evaluated, RunHeldOutPass());
  PINWHEEL_ASSIGN_OR_RETURN(const EpochSums sums, SumOverRanks(trained));
  // Every rank holds the same sum, so every rank stops here alike.
  if (!std::isfinite(sums.loss_sum)) {
    return NonFiniteLoss(epoch, trained, sums.loss_sum);
  }
  if (options_.check_coverage) {
    PINWHEEL_RETURN_IF_ERROR(CheckCoverage(
        collective_, coverage, epoch,
        EpochShuffle(train_samples_, job_.seed, epoch - 1), start.position));
  }
  accuracy_ = 100.0 * evaluated.metrics.eval_correct /
              std::max<int64_t>(evaluated.metrics.eval_samples, 1);
  SayEpoch(epoch, trained, evaluated, sums, start.batches);
  // The epoch's checkpoint: the loader now stands at the next epoch's start.
  return SaveCheckpoint(epoch + 1, 0);
}

absl::StatusOr<EpochLoop::TrainingPass> EpochLoop::RunTrainingPass(
    int epoch, int64_t batches_before, std::vector<int32_t>* coverage) {
  int64_t batches_in_epoch = batches_before;
  auto after_step = [&]() -> absl::Status {
    return AfterStep(epoch, ++batches_in_epoch);
  };
  const int64_t step_before = step_;
  const LoaderStats before = train_.stats();
  const absl::Time start = absl::Now();
  ProgressBar progress(
      epoch, options_.epochs, train_.batches_per_epoch(),
      collective_.world_size() == 1);  // mpirun fakes a terminal
  if (coverage != nullptr) coverage->assign(train_samples_, 0);
  PINWHEEL_ASSIGN_OR_RETURN(
      PassCost cost, RunEpoch(train_, mlp_, compute_, Pass::kTrain, &progress,
                              coverage, after_step));
  // The one host synchronisation of the training pass: the loss sums.
  TrainingPass trained{.batches_before = batches_before,
                       .step_before = step_before};
  PINWHEEL_ASSIGN_OR_RETURN(trained.metrics, mlp_.TakeMetrics());
  trained.time = absl::Now() - start;
  const LoaderStats after = train_.stats();
  progress.Clear();
  // Note [what waiting for data counts]
  // On the host backend DeviceBatch::WaitOn is the batch's copy. On a GPU it
  // queues a wait on the compute stream and returns; its host time is the
  // driver's (it blocks when the GPU's queue of work is full, or on the
  // driver's lock), not the data's, so it is said apart. A copy too slow
  // for the step still shows in Next(): the batches wait for their device
  // buffers. Measured on 2 x H200 (2026-11-27, issue 30): WaitOn held a
  // rank 0.5-0.7 % of an epoch; the 10-18 % one rank of two sometimes
  // waits is in Next() itself.
  // Part of that, on a GPU, is the copy waiting for a device buffer that
  // this rank's steps still hold (queued behind the step, and on two ranks
  // behind the all-reduce that waits for the other rank): the loader was
  // ahead and the GPU is the bound, so it is said apart too, "behind device
  // buffers" (Note [a wait behind the consumer's buffers] in
  // transfer/transfer_stage.cc). On 2 x H200 (session 20) such waits were
  // most of the epochs over 5 % in which one rank of two waited.
  const bool on_gpu = compute_.device().is_cuda();
  const absl::Duration in_next = after.consumer_wait - before.consumer_wait;
  trained.behind_buffers = on_gpu ? after.consumer_wait_behind_buffers -
                                        before.consumer_wait_behind_buffers
                                  : absl::ZeroDuration();
  trained.waited = in_next - trained.behind_buffers +
                   (on_gpu ? absl::ZeroDuration() : cost.wait_on);
  trained.enqueue_stalled = on_gpu ? cost.wait_on : absl::ZeroDuration();
  trained.bytes = after.bytes_delivered - before.bytes_delivered;
  trained.verdict = StallVerdictOf(after).line;
  const AutoTuneStats& tuned = after.auto_tune;
  if (tuned.workers_auto || tuned.prefetch_auto) {
    trained.auto_tune = absl::StrFormat(
        "auto: %d of %d workers, prefetch %d of %d, %d changes%s",
        tuned.workers, tuned.max_workers, tuned.prefetch, tuned.max_prefetch,
        tuned.changes,
        tuned.last_reason.empty()
            ? std::string()
            : absl::StrCat("; last: ", tuned.last_reason));
  }
  trained.rank_wait = RankWaitOf(after, collective_.rank());
  return trained;
}

absl::StatusOr<EpochLoop::HeldOutPass> EpochLoop::RunHeldOutPass() {
  const absl::Time start = absl::Now();
  PINWHEEL_RETURN_IF_ERROR(
      RunEpoch(held_out_, mlp_, compute_, Pass::kEvaluate, nullptr, nullptr)
          .status());
  HeldOutPass evaluated;
  PINWHEEL_ASSIGN_OR_RETURN(evaluated.metrics, mlp_.TakeMetrics());
  evaluated.time = absl::Now() - start;
  return evaluated;
}

absl::StatusOr<EpochLoop::EpochSums> EpochLoop::SumOverRanks(
    const TrainingPass& trained) {
  const int world = collective_.world_size();
  const double secs = Seconds(trained.time);
  // Loss, samples and bytes, then four figures of each rank in its own
  // slots: samples/s, and the shares of time waited for data, stalled in
  // WaitOn and behind device buffers.
  constexpr int kTotals = 3;
  std::vector<double> sums(kTotals + 4 * world, 0.0);
  auto mine = [&](int figure) -> double& {
    return sums[kTotals + figure * world + collective_.rank()];
  };
  sums[0] = trained.metrics.train_loss_sum;
  sums[1] = static_cast<double>(trained.metrics.train_samples);
  sums[2] = static_cast<double>(trained.bytes);
  mine(0) = trained.metrics.train_samples / secs;
  mine(1) = 100.0 * Seconds(trained.waited) / secs;
  mine(2) = 100.0 * Seconds(trained.enqueue_stalled) / secs;
  mine(3) = 100.0 * Seconds(trained.behind_buffers) / secs;
  PINWHEEL_RETURN_IF_ERROR(collective_.SumHost(sums));
  // Which rank waits longest for data, and why (issue 33): every rank's
  // RankWait, gathered as bytes.
  std::string slowest_rank;
  if (world > 1) {
    std::vector<uint8_t> gathered;
    PINWHEEL_RETURN_IF_ERROR(collective_.AllGatherBytes(
        &trained.rank_wait, sizeof(RankWait), gathered));
    std::vector<RankWait> ranks;
    for (int r = 0; r < world; ++r) {
      PINWHEEL_ASSIGN_OR_RETURN(
          RankWait one,
          RankWaitFromBytes(absl::MakeConstSpan(
              gathered.data() + static_cast<size_t>(r) * sizeof(RankWait),
              sizeof(RankWait))));
      ranks.push_back(one);
    }
    PINWHEEL_ASSIGN_OR_RETURN(SlowestRank slowest, SlowestRankOf(ranks));
    slowest_rank = std::move(slowest.line);
  }
  auto every_rank = [&](int figure) {
    const auto first = sums.begin() + kTotals + figure * world;
    return std::vector<double>(first, first + world);
  };
  return EpochSums{.loss_sum = sums[0],
                   .samples = sums[1],
                   .bytes = sums[2],
                   .rates = every_rank(0),
                   .waited_percents = every_rank(1),
                   .stalled_percents = every_rank(2),
                   .behind_percents = every_rank(3),
                   .slowest_rank = std::move(slowest_rank)};
}

absl::Status EpochLoop::NonFiniteLoss(int epoch, const TrainingPass& trained,
                                      double loss_sum) const {
  const int64_t first = trained.metrics.first_nonfinite_step;
  const std::string where =
      first > 0
          ? absl::StrFormat(
                "epoch %d, step %d of the epoch (step %d of the job)%s: the "
                "batch's training loss is not finite",
                epoch, trained.batches_before + first,
                trained.step_before + first,
                collective_.world_size() > 1
                    ? absl::StrFormat(" on rank %d", collective_.rank())
                    : std::string())
          : absl::StrFormat(
                "epoch %d: another rank's training loss is not finite", epoch);
  return absl::AbortedError(absl::StrFormat(
      "%s (the epoch's loss sum is %g): the model diverged; stopped without "
      "writing the epoch's checkpoint. Try a lower --lr (this run: %g at a "
      "global batch of %d)",
      where, loss_sum, job_.sgd.learning_rate,
      job_.batch_size * job_.world_size));
}

void EpochLoop::SayEpoch(int epoch, const TrainingPass& trained,
                         const HeldOutPass& evaluated, const EpochSums& sums,
                         int64_t batches_before) const {
  const int world = collective_.world_size();
  const double secs = Seconds(trained.time);
  const double total_rate = Sum(sums.rates);
  const double stalled = Sum(sums.stalled_percents);
  const double behind = Sum(sums.behind_percents);
  Say(collective_,
      "epoch %d/%d  train loss %.4f  held-out accuracy %.2f%%  %.0f "
      "samples/s  %.2f GB/s  waited for data %.1f%%%s%s  (%.1f s + %.1f s "
      "eval)%s\n",
      epoch, options_.epochs, sums.loss_sum / std::max(sums.samples, 1.0),
      *accuracy_, total_rate, sums.bytes / secs / 1e9,
      Sum(sums.waited_percents) / world,
      behind >= 0.05 * world
          ? absl::StrFormat(" (+%.1f%% behind device buffers)", behind / world)
          : std::string(),
      stalled >= 0.05 * world
          ? absl::StrFormat(" (+%.1f%% in WaitOn)", stalled / world)
          : std::string(),
      secs, Seconds(evaluated.time),
      batches_before > 0
          ? absl::StrFormat("  [resumed after batch %d: loss over the "
                            "rest]",
                            batches_before)
          : std::string());
  // Which stage bounds rank 0's loader, and what to do (issue 33).
  Say(collective_, "  loader%s: %s\n", world > 1 ? " (rank 0)" : "",
      trained.verdict);
  if (!trained.auto_tune.empty()) {
    Say(collective_, "  loader%s %s\n", world > 1 ? " (rank 0)" : "",
        trained.auto_tune);
  }
  if (world > 1) {
    Say(collective_,
        "  per rank samples/s: %s; total %.0f samples/s; per rank waited for "
        "data: %s%s%s\n",
        absl::StrJoin(sums.rates, " ",
                      [](std::string* out, double rate) {
                        absl::StrAppendFormat(out, "%.0f", rate);
                      }),
        total_rate, Percents(sums.waited_percents),
        behind >= 0.05 * world ? absl::StrCat("; behind device buffers: ",
                                              Percents(sums.behind_percents))
                               : std::string(),
        stalled >= 0.05 * world
            ? absl::StrCat("; in WaitOn: ", Percents(sums.stalled_percents))
            : std::string());
    Say(collective_, "  %s\n", sums.slowest_rank);
  }
}

EpochLoop::~EpochLoop() {
  if (step_log_fd_ >= 0) close(step_log_fd_);
}

absl::Status EpochLoop::AfterStep(int epoch, int64_t batches_in_epoch) {
  ++step_;
  if (!options_.step_log.empty() && collective_.rank() == 0) {
    if (step_log_fd_ < 0) {
      step_log_fd_ = open(options_.step_log.c_str(),
                          O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
      if (step_log_fd_ < 0) {
        return absl::ErrnoToStatus(
            errno,
            absl::StrFormat("--step_log=%s: cannot open it for appending",
                            options_.step_log));
      }
    }
    // One write a line: a reader (or a kill) never leaves half a line.
    const std::string line = absl::StrFormat("step %d epoch %d batch %d\n",
                                             step_, epoch, batches_in_epoch);
    const ssize_t written = write(step_log_fd_, line.data(), line.size());
    if (written < 0) {
      return absl::ErrnoToStatus(
          errno, absl::StrFormat("--step_log=%s: writing step %d failed",
                                 options_.step_log, step_));
    }
    if (written != static_cast<ssize_t>(line.size())) {  // sets no errno
      return absl::UnavailableError(absl::StrFormat(
          "--step_log=%s: writing step %d failed: %d of %d bytes written",
          options_.step_log, step_, written, line.size()));
    }
  }
  if (options_.checkpoint_every > 0 && step_ % options_.checkpoint_every == 0) {
    PINWHEEL_RETURN_IF_ERROR(SaveCheckpoint(epoch, batches_in_epoch));
  }
  if (options_.die_after_batches > 0 && step_ == options_.die_after_batches) {
    absl::PrintF("die_after_batches: raising SIGKILL after batch %d\n", step_);
    std::fflush(stdout);
    std::raise(SIGKILL);
  }
  return absl::OkStatus();
}

// Rank 0 writes: after the all-reduce every rank holds the same weights, and
// every rank's loader stands at the same position (Note [exact resume]).
// Taken after the step that used the last delivered batch.
absl::Status EpochLoop::SaveCheckpoint(int64_t epoch,
                                       int64_t batches_in_epoch) {
  if (options_.checkpoint_dir.empty() || collective_.rank() != 0) {
    return absl::OkStatus();
  }
  TrainCheckpoint c = job_;
  c.epoch = epoch;
  c.step = step_;
  c.batches_in_epoch = batches_in_epoch;
  PINWHEEL_ASSIGN_OR_RETURN(c.loader, train_.Checkpoint());
  // On cuda: copied after a synchronisation of the compute stream.
  PINWHEEL_ASSIGN_OR_RETURN(c.model, mlp_.SaveState());
  return WriteFileAtomically(
      absl::StrCat(options_.checkpoint_dir, "/", kCheckpointFile), c.ToBytes());
}

}  // namespace pinwheel::train
