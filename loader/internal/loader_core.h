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
#include "absl/container/flat_hash_map.h"
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
  // Waits until the consumer reads epoch `epoch` - 1 or later (see Note [at
  // most two epochs ahead]). Returns false when stopping instead.
  bool AwaitConsumerNear(int64_t epoch) ABSL_LOCKS_EXCLUDED(epoch_mu_);
  void RunEpochMapStyle(int64_t epoch);
  void RunEpochIterable(int64_t epoch);
  // Opens this rank's shards for `epoch` into shards_ (on the producer
  // thread, inside the arena), or returns why one could not be opened.
  absl::Status OpenShards(int64_t epoch);
  void Fill(ProducedBatch& batch);
  void FillFromStream(ProducedBatch& batch);
  // Sets the view's variable-length fields to their maximum before a read.
  void PrepareView(SampleView& view) const;
  // After a successful read: checks the view's misuse and lengths and zeroes
  // the padding of variable-length fields.
  absl::Status FinishView(SampleView& view) const;
  void Deliver(ProducedBatch& batch);
  // While stopping: gives a read batch's slot back instead of delivering it.
  // Returns whether it did (errors are still delivered).
  bool RecycleIfStopping(const ProducedBatch& batch);
  absl::Status ReadOne(int64_t index, SampleView& view) const;
  // Runs worker_init on this thread if it has not run for this thread and
  // its worker number since the producer started (see LoaderOptions::
  // worker_init). Returns its error, or the first one of this run.
  absl::Status InitWorkerIfNeeded() ABSL_LOCKS_EXCLUDED(mu_);
  // Returns the calling thread's worker number: its slot in the arena.
  int WorkerNumber() const;
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

  std::atomic<bool> stop_{false};
  std::thread producer_;
  // Identifies the current producer start across every loader of the
  // process (worker_init runs once per thread and number per start).
  std::atomic<uint64_t> run_id_{0};

  // The epoch the consumer reads (a copy of epoch_ for the producer).
  absl::Mutex epoch_mu_;
  int64_t consumer_epoch_ ABSL_GUARDED_BY(epoch_mu_) = 0;

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
  // This run's initialised threads (by a token never reused, unlike
  // std::thread::id) and the worker number each was initialised with.
  absl::flat_hash_map<uint64_t, int> initialized_ ABSL_GUARDED_BY(mu_);
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
  // Set when StartEpoch() stopped the producer but could not restart it;
  // Next() refuses until a StartEpoch() succeeds.
  absl::Status restart_failed_;
  bool shut_down_ = false;
  int64_t batches_delivered_ = 0;
  int64_t samples_delivered_ = 0;
  int64_t bytes_delivered_ = 0;
  int64_t epochs_completed_ = 0;
  absl::Duration consumer_wait_ = absl::ZeroDuration();
};

}  // namespace pinwheel::internal

#endif  // PINWHEEL_LOADER_INTERNAL_LOADER_CORE_H_
