// ShardSource: the batches of an IterableDataset. Each epoch opens this
// rank's max(num_workers, 1) shards (restoring their streams' states when
// resuming), and batches are taken from them round-robin, one batch of a
// shard in flight at a time so that each shard reads its samples in order;
// a batch holds samples of one shard only. Keeps each delivered batch's
// stream state for the consumer's checkpoints. See BatchSource for the
// contract.
#ifndef PINWHEEL_LOADER_PIPELINE_SHARD_SOURCE_H_
#define PINWHEEL_LOADER_PIPELINE_SHARD_SOURCE_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

#include "loader/iterable_dataset.h"
#include "loader/loader_checkpoint.h"
#include "loader/loader_options.h"
#include "loader/pipeline/batch_source.h"

namespace pinwheel::internal {

class ShardSource final : public BatchSource {
 public:
  // `resume`, when not null, was checked by CheckResumable().
  ShardSource(std::shared_ptr<const IterableDataset> dataset,
              const LoaderOptions& options, const LoaderCheckpoint* resume);

  // Returns the stream (of world_size × per_rank) that worker `i` of `rank`
  // reads: the split every loader uses, and the read plan of
  // loader/storage/cache/read_plan.h.
  static int64_t StreamOf(int rank, int64_t per_rank, int i) {
    return rank * per_rank + i;
  }

  int64_t batches_per_epoch() const override { return -1; }
  bool in_order() const override { return true; }
  bool reads_inline() const override { return false; }

  absl::Status StartEpoch(int64_t epoch, WorkerInit& worker_init) override;
  bool Claim(const StopFlag& stop, ProducedBatch& batch) override
      ABSL_LOCKS_EXCLUDED(mu_);
  void Interrupt() override ABSL_LOCKS_EXCLUDED(mu_);
  void Unclaim(ProducedBatch& batch) override ABSL_LOCKS_EXCLUDED(mu_);
  void Fill(BatchFiller& filler, ProducedBatch& batch) override
      ABSL_LOCKS_EXCLUDED(mu_);
  void PrepareDelivery(ProducedBatch& batch) override
      ABSL_LOCKS_EXCLUDED(states_mu_);
  void EndEpoch() override;

  void Delivered(const BatchInfo& batch) override
      ABSL_LOCKS_EXCLUDED(states_mu_);
  void EpochEnded() override {
    committed_states_.clear();
    last_delivered_shard_ = -1;
  }
  absl::Status Checkpoint(int64_t epoch, int64_t delivered,
                          LoaderCheckpoint& checkpoint) const override;
  void ForgetResume() override ABSL_LOCKS_EXCLUDED(states_mu_);

 private:
  struct Shard {
    std::unique_ptr<SampleStream> stream;  // used by the batch claiming it
    bool busy = false;                     // a batch of it is in flight
    bool done = false;                     // exhausted or failed
    // Keys the generators of its next batch's samples (see Note [a
    // streamed sample's generator] in loader/iterable_dataset.h); used by
    // the batch claiming it.
    uint64_t stream_key = 0;
    int64_t batches = 0;  // batches read from it this epoch
  };
  // Returns the key of the run of samples shard `shard` (of all ranks)
  // reads after stream state `state` (nullptr: from the epoch's start), or
  // after `batches` batches when its stream has no state to give.
  static uint64_t StreamKey(int64_t shard, const std::string* state,
                            int64_t batches);
  // Returns the shard whose turn it is: the first not done from turn_ on,
  // or -1 when every shard is done.
  int ShardInTurn() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The checkpoint's state of this rank's shard `i` when `epoch` is the
  // resumed one (it may hold no state: nothing read yet), else null.
  const std::optional<std::string>* ResumedState(int64_t epoch, size_t i) const;
  // Opens (and on the resumed epoch restores) shard `i` of this rank.
  absl::StatusOr<std::unique_ptr<SampleStream>> OpenShard(int64_t epoch,
                                                          int i) const;

  const std::shared_ptr<const IterableDataset> dataset_;
  // In 64 bits: Build() refused more than LoaderCheckpoint::kMaxNumShards
  // shards, so a shard number fits OpenShard()'s int.
  const int64_t per_rank_;  // shards of this rank: max(num_workers, 1)
  const int64_t rank_;
  const int64_t num_shards_;  // per_rank_ × world_size

  // Resume (see Note [exact resume]): set at creation, forgotten by
  // ForgetResume() while the producer is stopped; read by both sides.
  std::optional<LoaderCheckpoint> resume_;

  // The current epoch's shards; the vector changes only between epochs,
  // on the producer's thread.
  int64_t epoch_ = 0;
  std::vector<Shard> shards_;
  mutable absl::Mutex mu_;
  size_t turn_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t next_index_ ABSL_GUARDED_BY(mu_) = 0;
  // Producer, last stage: batches with samples delivered this epoch.
  int64_t delivered_ = 0;

  // Each delivered batch's shard and stream state after it, in delivery
  // order, until the consumer takes them.
  struct StreamState {
    int64_t epoch = 0;
    int64_t index = 0;
    int shard = 0;
    absl::StatusOr<std::string> state;
  };
  absl::Mutex states_mu_;
  std::deque<StreamState> stream_states_ ABSL_GUARDED_BY(states_mu_);
  // Consumer: per shard, the stream state after its last delivered batch
  // this epoch (nullopt: none delivered).
  std::vector<std::optional<absl::StatusOr<std::string>>> committed_states_;
  // Consumer: this rank's shard of the last batch delivered this epoch (-1:
  // none yet), whose successor's turn a checkpoint records.
  int last_delivered_shard_ = -1;
};

}  // namespace pinwheel::internal

#endif  // PINWHEEL_LOADER_PIPELINE_SHARD_SOURCE_H_
