#include "loader/storage/cache/planned_tar_shards.h"

#include <utility>

#include "absl/strings/str_cat.h"

#include "loader/storage/cache/read_plan.h"

namespace pinwheel {

absl::StatusOr<std::shared_ptr<PlannedTarShards>> PlannedTarShards::Create(
    std::shared_ptr<const TarShardDataset> dataset,
    std::shared_ptr<CachedStore> cache) {
  if (dataset == nullptr || cache == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("PlannedTarShards: the ",
                     dataset == nullptr ? "dataset" : "cache", " is null"));
  }
  if (dataset->options().store.get() != cache.get()) {
    return absl::InvalidArgumentError(
        "PlannedTarShards: the dataset does not read through this cache (set "
        "TarShardOptions::store to the cache before TarShardDataset::Open)");
  }
  return std::shared_ptr<PlannedTarShards>(
      new PlannedTarShards(std::move(dataset), std::move(cache)));
}

absl::Status PlannedTarShards::StartEpoch(const EpochShare& share) const {
  const TarShardOptions& options = dataset_->options();
  return planner_.Start(
      *cache_, share.epoch,
      {.rank = share.rank,
       .world_size = share.world_size,
       .streams = share.shards_per_rank},
      share.resume,
      [&](int64_t first, int64_t epochs, const LoaderCheckpoint* resume) {
        return PlanTarShards(
            dataset_->shards(), options, *cache_,
            {.rank = share.rank,
             .world_size = share.world_size,
             .workers = share.shards_per_rank},
            {.first_epoch = first, .epochs = epochs, .resume = resume},
            options.read_chunk_bytes);
      });
}

}  // namespace pinwheel
