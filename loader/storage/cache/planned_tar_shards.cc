#include "loader/storage/cache/planned_tar_shards.h"

#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"

#include "loader/storage/cache/read_plan.h"
#include "pinning/base/mutex.h"
#include "pinning/base/status_macros.h"

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

absl::Status PlannedTarShards::Plan(const EpochShare& share, int64_t first,
                                    int64_t epochs) const {
  const PlanEpochs which{
      .first_epoch = first,
      .epochs = epochs,
      .resume = first == share.epoch ? share.resume : nullptr};
  PINWHEEL_ASSIGN_OR_RETURN(
      ReadPlan plan,
      PlanTarShards(dataset_->shards(), dataset_->options(), *cache_,
                    {.rank = share.rank,
                     .world_size = share.world_size,
                     .workers = share.shards_per_rank},
                    which, dataset_->options().read_chunk_bytes));
  PINWHEEL_RETURN_IF_ERROR(cache_->AppendPlan(plan));
  planned_through_ = first + epochs - 1;
  return absl::OkStatus();
}

absl::Status PlannedTarShards::StartEpoch(const EpochShare& share) const {
  internal::MutexLock lock(&mu_);
  const bool same_share = started_ >= 0 && share.rank == share_.rank &&
                          share.world_size == share_.world_size &&
                          share.shards_per_rank == share_.shards_per_rank;
  const bool continues = same_share && share.resume == nullptr &&
                         share.epoch == started_ + 1 &&
                         planned_through_ >= share.epoch;
  started_ = share.epoch;
  share_ = share;
  share_.resume = nullptr;  // borrowed for the call only
  if (continues) {
    cache_->SkipPlanBefore(share.epoch);
    if (planned_through_ > share.epoch) return absl::OkStatus();
    return Plan(share, share.epoch + 1, 1);
  }
  cache_->SkipPlanBefore(std::numeric_limits<int64_t>::max());
  return Plan(share, share.epoch, 2);
}

}  // namespace pinwheel
