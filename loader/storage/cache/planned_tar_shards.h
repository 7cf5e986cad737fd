// PlannedTarShards: a TarShardDataset read through a CachedStore that it
// keeps told of the future. At the start of each epoch (the loader calls
// IterableDataset::StartEpoch) it appends that epoch's and the next one's
// reads to the cache's plan (PlanTarShards, loader/storage/cache/
// read_plan.h), so the cache prefetches in the order this process's streams
// will read and evicts by next use, with no call from the training loop.
//
// Example:
//   PINWHEEL_ASSIGN_OR_RETURN(std::shared_ptr<ObjectStore> remote,
//                             OpenObjectStore(urls.front(), {}));
//   PINWHEEL_ASSIGN_OR_RETURN(
//       std::shared_ptr<CachedStore> cache,
//       CachedStore::Open(remote, {.budget_bytes = int64_t{200} << 30,
//                                  .directory = "/nvme/pinwheel-cache"}));
//   TarShardOptions options{{.size = 224}, /*seed=*/7};
//   options.store = cache;
//   PINWHEEL_ASSIGN_OR_RETURN(std::shared_ptr<TarShardDataset> shards,
//                             TarShardDataset::Open(urls, options));
//   PINWHEEL_ASSIGN_OR_RETURN(std::shared_ptr<PlannedTarShards> train,
//                             PlannedTarShards::Create(shards, cache));
//   PINWHEEL_ASSIGN_OR_RETURN(Loader loader,
//       LoaderBuilder(train).batch_size(256).num_workers(8).Build());
// The GPU decode path is the same with OpenTarShardPipeline()'s dataset.
//
// Note [which epochs are planned]
// When epoch e starts, the plan should hold what is left of epoch e (from
// the checkpoint when the loader resumes) and then all of epoch e + 1, so
// that eviction at the end of e already knows what e + 1 reads first.
// - e follows the epoch started last, was planned then, with the same
//   share (rank, world size, streams) and no checkpoint: the reads the
//   loader left behind in earlier epochs (an epoch ended early) are
//   dropped (CachedStore::SkipPlanBefore) and epoch e + 1 is appended.
// - Otherwise (the first epoch, a resume, a jump back or ahead, a new share
//   after an elastic restart): every read not made yet is dropped, and
//   epochs e (from the checkpoint) and e + 1 are planned anew.
// A resumed job with the same cache directory thus fetches only what the
// plan needs and the cache does not hold (Note [warm restart] in
// cached_store.h).
//
// Thread-safe: StartEpoch() and OpenShard() from any thread.
#ifndef PINWHEEL_LOADER_STORAGE_CACHE_PLANNED_TAR_SHARDS_H_
#define PINWHEEL_LOADER_STORAGE_CACHE_PLANNED_TAR_SHARDS_H_

#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include "loader/image/tar_shards.h"
#include "loader/iterable_dataset.h"
#include "loader/storage/cache/cached_store.h"
#include "loader/storage/cache/internal/epoch_planner.h"
#include "transfer/sample_layout.h"

namespace pinwheel {

class PlannedTarShards final : public IterableDataset {
 public:
  // `dataset` must read through `cache` (its options().store is `cache`):
  // InvalidArgument otherwise, or when either is null.
  [[nodiscard]] static absl::StatusOr<std::shared_ptr<PlannedTarShards>> Create(
      std::shared_ptr<const TarShardDataset> dataset,
      std::shared_ptr<CachedStore> cache);

  const SampleLayout& layout() const override { return dataset_->layout(); }
  absl::StatusOr<std::unique_ptr<SampleStream>> OpenShard(
      int shard, int num_shards, int64_t epoch) const override {
    return dataset_->OpenShard(shard, num_shards, epoch);
  }
  bool defers_sample_work() const override {
    return dataset_->defers_sample_work();
  }
  // Plans the epoch (Note [which epochs are planned]); PlanTarShards()'s
  // errors (a shard's size, a checkpoint that does not fit).
  absl::Status StartEpoch(const EpochShare& share) const override;

  const TarShardDataset& dataset() const { return *dataset_; }
  CachedStore& cache() const { return *cache_; }

 private:
  PlannedTarShards(std::shared_ptr<const TarShardDataset> dataset,
                   std::shared_ptr<CachedStore> cache)
      : dataset_(std::move(dataset)), cache_(std::move(cache)) {}

  const std::shared_ptr<const TarShardDataset> dataset_;
  const std::shared_ptr<CachedStore> cache_;
  mutable internal::EpochPlanner planner_;
};

}  // namespace pinwheel

#endif  // PINWHEEL_LOADER_STORAGE_CACHE_PLANNED_TAR_SHARDS_H_
