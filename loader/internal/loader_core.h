// LoaderCore: the machinery behind Loader. See loader/loader.h for the
// contract and Note [the producer pipeline] in loader_core.cc for the design.
#ifndef PINWHEEL_LOADER_INTERNAL_LOADER_CORE_H_
#define PINWHEEL_LOADER_INTERNAL_LOADER_CORE_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <string>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "oneapi/tbb/task_arena.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "loader/dataset.h"
#include "loader/iterable_dataset.h"
#include "loader/loader.h"
#include "loader/loader_checkpoint.h"
#include "loader/loader_options.h"
#include "loader/sampler.h"
#include "pinning/pinned_ring.h"
#include "transfer/device_batch.h"
#include "transfer/transfer_stage.h"

namespace pinwheel::internal {

struct ProducedBatch;
class WorkerObserver;

// Not thread-safe for the consumer side (one consumer thread); the producer
// side runs on its own thread and the oneTBB arena.
class LoaderCore {
 public:
  // REQUIRES: options validated by LoaderBuilder; exactly one dataset set;
  // `resume`, when not null, checked by CheckResumable().
  static absl::StatusOr<std::unique_ptr<LoaderCore>> Create(
      const LoaderOptions& options, Device device,
      std::shared_ptr<const Dataset> dataset,
      std::shared_ptr<const IterableDataset> iterable,
      const LoaderCheckpoint* resume = nullptr);
  ~LoaderCore();

  absl::StatusOr<std::optional<DeviceBatch>> Next();
  absl::Status StartEpoch(int64_t epoch);
  int64_t epoch() const { return epoch_; }
  int64_t batches_per_epoch() const;
  const BatchLayout& layout() const { return layout_; }
  const Device& device() const { return device_; }
  LoaderStats stats() const;
  void Shutdown();
  // See Note [exact resume] in loader/loader_checkpoint.h.
  absl::StatusOr<LoaderCheckpoint> Checkpoint() const;

 private:
  friend class WorkerObserver;
  LoaderCore(const LoaderOptions& options, Device device,
             std::shared_ptr<const Dataset> dataset,
             std::shared_ptr<const IterableDataset> iterable,
             BatchLayout layout, std::unique_ptr<PinnedRing> ring,
             std::unique_ptr<TransferStage> stage,
             std::optional<BatchSampler> sampler);

  // Producer side.
  void StartProducer(int64_t first_epoch);
  void StopProducer();
  void ProducerLoop(int64_t first_epoch);
  void RunEpochMapStyle(int64_t epoch);
  void RunEpochIterable(int64_t epoch);
  void Fill(ProducedBatch& batch);
  void FillFromStream(ProducedBatch& batch);
  void Deliver(ProducedBatch& batch);
  // While stopping: gives a read batch's slot back instead of delivering it.
  // Returns whether it did (errors are still delivered).
  bool RecycleIfStopping(const ProducedBatch& batch);
  absl::Status ReadOne(int64_t index, SampleView& view) const;
  absl::Status InitWorkerIfNeeded();
  bool stopping() const { return stop_.load(std::memory_order_acquire); }
  // num_workers == 0: produce one batch on the consumer's thread. Returns
  // false when the inline epoch has no batch left.
  bool ProduceInline();
  // The order of `epoch`: the resumed epoch's from the checkpoint's
  // position, else a whole epoch's.
  const BatchSampler& SamplerFor(int64_t epoch) const;
  const DistributedSampler& ShareFor(int64_t epoch) const;
  // Consumer: takes the stream states recorded up to the delivered batch.
  void CommitStreamStates(int64_t epoch, int64_t index);
  void ClearResumeAndStreamStates();

  const LoaderOptions options_;
  const Device device_;
  const std::shared_ptr<const Dataset> dataset_;
  const std::shared_ptr<const IterableDataset> iterable_;
  const BatchLayout layout_;
  std::unique_ptr<PinnedRing> ring_;
  std::unique_ptr<TransferStage> stage_;
  const std::optional<BatchSampler> sampler_;
  const DistributedSampler* share_ = nullptr;  // sampler_'s sampler

  // Resume (see Note [exact resume]). Set before the producer starts and
  // cleared by StartEpoch() while it is stopped; read by both sides.
  int64_t resume_epoch_ = -1;
  std::optional<BatchSampler> resume_sampler_;       // map-style
  const DistributedSampler* resume_share_ = nullptr;  // resume_sampler_'s
  std::vector<std::optional<std::string>> resume_states_;  // iterable
  // num_workers == 0 with a map-style dataset: read on the consumer's thread.
  const bool inline_;
  std::unique_ptr<tbb::task_arena> arena_;
  std::unique_ptr<WorkerObserver> observer_;

  std::atomic<bool> stop_{false};
  std::thread producer_;

  // Inline production (num_workers == 0), consumer thread only.
  int64_t inline_epoch_ = 0;
  int64_t inline_next_ = 0;
  bool inline_epoch_done_ = true;

  // Iterable datasets: the current epoch's shard streams.
  struct Shard;
  std::vector<std::unique_ptr<Shard>> shards_;

  // Iterable: each delivered batch's shard and stream state after it, in
  // delivery order, until the consumer takes them.
  struct StreamState {
    int64_t epoch = 0;
    int64_t index = 0;
    int shard = 0;
    absl::StatusOr<std::string> state;
  };
  absl::Mutex states_mu_;
  std::deque<StreamState> stream_states_ ABSL_GUARDED_BY(states_mu_);

  mutable absl::Mutex mu_;
  absl::Status init_error_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_set<std::thread::id> initialized_ ABSL_GUARDED_BY(mu_);
  int next_worker_number_ ABSL_GUARDED_BY(mu_) = 0;
  std::atomic<int64_t> samples_skipped_{0};

  // Consumer side.
  int64_t epoch_ = 0;
  int64_t delivered_in_epoch_ = 0;
  // Map-style: positions of this rank's share of the epoch that delivered
  // batches cover. Iterable: per shard, the stream state after its last
  // delivered batch this epoch (nullopt: none delivered).
  int64_t consumed_in_epoch_ = 0;
  std::vector<std::optional<absl::StatusOr<std::string>>> committed_states_;
  absl::Status failed_;  // sticky error after ErrorPolicy::kStop
  bool shut_down_ = false;
  int64_t batches_delivered_ = 0;
  int64_t samples_delivered_ = 0;
  int64_t bytes_delivered_ = 0;
  int64_t epochs_completed_ = 0;
  absl::Duration consumer_wait_ = absl::ZeroDuration();
};

}  // namespace pinwheel::internal

#endif  // PINWHEEL_LOADER_INTERNAL_LOADER_CORE_H_
