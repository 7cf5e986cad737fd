// LoaderCore: the machinery behind Loader. It wires a loader together
// (Create: a LoaderPath, memory admission, the pinned ring, the transfer
// stage, the Producer) and serves the consumer: Next(),
// StartEpoch(), Checkpoint(), stats(). See loader/loader.h for the contract
// and Note [the producer pipeline] in producer.cc for how batches are made.
#ifndef PINWHEEL_LOADER_PIPELINE_LOADER_CORE_H_
#define PINWHEEL_LOADER_PIPELINE_LOADER_CORE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

#include "loader/dataset.h"
#include "loader/iterable_dataset.h"
#include "loader/loader_checkpoint.h"
#include "loader/loader_options.h"
#include "loader/loader_stats.h"
#include "loader/pipeline/auto_tuner.h"
#include "loader/pipeline/batch_source.h"
#include "loader/pipeline/loader_path.h"
#include "loader/pipeline/producer.h"
#include "loader/pipeline/worker_gate.h"
#include "loader/telemetry/stage_latencies.h"
#include "pinning/pinned_ring.h"
#include "transfer/device.h"
#include "transfer/device_batch.h"
#include "transfer/sample_layout.h"
#include "transfer/transfer_stage.h"

namespace pinwheel::internal {

// Not thread-safe: one consumer thread. Next(), StartEpoch() and
// Checkpoint() called while another of them runs on another thread return
// FailedPrecondition instead of racing (see Note [one consumer thread]).
// The producer side runs on its own thread and the oneTBB arena (Producer).
class LoaderCore {
 public:
  // Wires `path` (MakeWorkerPath() or PlanGather(), over batches laid out
  // by `layout`: DeliveredSampleLayout()'s) as it is: never edits
  // `options`. REQUIRES: options validated by LoaderBuilder; `resume`, when
  // not null, checked by CheckResumable() and the one `path` was made with.
  static absl::StatusOr<std::unique_ptr<LoaderCore>> Create(
      const LoaderOptions& options, Device device, BatchLayout layout,
      LoaderPath path, const LoaderCheckpoint* resume = nullptr);
  ~LoaderCore();

  // Returns the sample layout delivered for a dataset of `sample` layout
  // (pad_last_batch's mask appended), or InvalidArgument naming the mask.
  static absl::StatusOr<SampleLayout> DeliveredSampleLayout(
      const LoaderOptions& options, SampleLayout sample);
  // Returns the bytes of each device buffer on the worker path (see
  // LoaderBuilder::device_buffer_bytes()).
  static absl::StatusOr<size_t> DeviceBufferBytes(
      const LoaderOptions& options, const SampleLayout& dataset_layout);

  absl::StatusOr<std::optional<DeviceBatch>> Next();
  absl::Status StartEpoch(int64_t epoch);
  int64_t epoch() const { return epoch_; }
  int64_t batches_per_epoch() const { return source_->batches_per_epoch(); }
  // See Loader::layout() and Loader::input_layout().
  const BatchLayout& layout() const { return delivered_layout_; }
  const BatchLayout& input_layout() const { return layout_; }
  const Device& device() const { return device_; }
  LoaderStats stats() const;
  // stats() in two halves (Note [periodic stats] in
  // loader/telemetry/stats_reporter.h): the consumer's counters (the
  // consumer's thread only; cheap: a few integers), and what any thread may
  // add to them (latencies, ring, copy stage, workers' counts).
  LoaderStats ConsumerStats() const;
  void AddSharedStats(LoaderStats* stats) const;
  // See Loader::Shutdown() and Note [abandoning a stuck read].
  void Shutdown();
  const absl::Status& shutdown_status() const { return shutdown_status_; }
  // See Note [exact resume] in loader/loader_checkpoint.h.
  absl::StatusOr<LoaderCheckpoint> Checkpoint() const;

 private:
  LoaderCore(const LoaderOptions& options, Device device, BatchLayout layout,
             LoaderPath path, std::unique_ptr<PinnedRing> ring,
             std::unique_ptr<TransferStage> stage, int64_t first_epoch);

  // What the producer side touches, owned together: a producer thread
  // abandoned by Shutdown() keeps it alive until it returns (Note
  // [abandoning a stuck read] in loader_core.cc).
  struct Pipeline {
    LoaderOptions options;  // as built
    BatchLayout layout;     // the dataset's batches, as delivered
    // What the producer writes into a slot: layout, or the gather's keys.
    BatchLayout fill_layout;
    // Where the stages' latencies are recorded (LoaderStats::latency).
    std::unique_ptr<LatencyRecorder> latencies;
    // Declared in the order they are built; the producer, last, is stopped
    // and destroyed first.
    std::unique_ptr<BatchSource> source;
    std::unique_ptr<PinnedRing> ring;  // null: the jobs hold no slot
    std::unique_ptr<TransferStage> stage;
    // num_workers = kAuto: how many workers read (null otherwise); the
    // producer borrows it, so it is declared first and outlives it.
    std::unique_ptr<WorkerGate> gate;
    std::unique_ptr<Producer> producer;
  };

  const std::shared_ptr<Pipeline> pipeline_;
  // Borrowed from pipeline_, for as long as this LoaderCore lives.
  const LoaderOptions& options_;
  const Device device_;
  const BatchLayout& layout_;
  const BatchLayout& fill_layout_;
  const GatherReport gather_;
  BatchSource* const source_;
  PinnedRing* const ring_;  // null: the jobs hold no slot
  TransferStage* const stage_;
  // What the batches carry: the stage's writer's delivered layout.
  const BatchLayout& delivered_layout_;
  Producer* const producer_;
  LatencyRecorder* const latencies_;
  // kAuto's controller (a no-op without kAuto); consumer thread.
  std::unique_ptr<AutoTuner> tuner_;

  // The consumer call running (its name, "Next"...), or null: set on entry
  // to Next(), StartEpoch() and Checkpoint(), cleared on their exit.
  mutable std::atomic<const char*> in_call_{nullptr};

  int64_t epoch_ = 0;
  int64_t delivered_in_epoch_ = 0;
  absl::Status failed_;  // sticky error after ErrorPolicy::kStop
  // Set when StartEpoch() stopped the producer but could not restart it;
  // Next() refuses until a StartEpoch() succeeds.
  absl::Status restart_failed_;
  bool shut_down_ = false;
  absl::Status shutdown_status_;  // what the first Shutdown() returned
  int64_t batches_delivered_ = 0;
  int64_t samples_delivered_ = 0;
  int64_t bytes_delivered_ = 0;
  int64_t epochs_completed_ = 0;
  int64_t samples_padded_ = 0;
  // Delivered samples per source of a custom sampler with sources (else
  // empty).
  std::vector<int64_t> samples_per_source_;
  absl::Duration consumer_wait_ = absl::ZeroDuration();
  absl::Duration consumer_wait_behind_buffers_ = absl::ZeroDuration();
  // When Next() last returned a batch of this epoch (the step's start);
  // InfinitePast at an epoch's start.
  absl::Time last_batch_returned_ = absl::InfinitePast();
};

}  // namespace pinwheel::internal

#endif  // PINWHEEL_LOADER_PIPELINE_LOADER_CORE_H_
