#include "loader/storage/cache/planned_record_file.h"

#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"

#include "loader/storage/cache/read_plan.h"

namespace pinwheel {

absl::StatusOr<std::shared_ptr<PlannedRecordFile>> PlannedRecordFile::Create(
    std::shared_ptr<const RecordFileDataset> dataset,
    std::shared_ptr<CachedStore> cache) {
  if (dataset == nullptr || cache == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("PlannedRecordFile: the ",
                     dataset == nullptr ? "dataset" : "cache", " is null"));
  }
  if (dataset->store() != cache.get()) {
    return absl::InvalidArgumentError(
        absl::StrCat("PlannedRecordFile: ", dataset->path(),
                     " is not read through this cache (open it with "
                     "RecordFileDataset::Open(url, storage, cache))"));
  }
  return std::shared_ptr<PlannedRecordFile>(
      new PlannedRecordFile(std::move(dataset), std::move(cache)));
}

absl::Status PlannedRecordFile::StartEpoch(const EpochSampling& s) const {
  if (!s.default_sampler) {
    // A custom sampler's order is not known here: no plan, and none left
    // from an earlier loader to mislead the cache.
    cache_->SkipPlanBefore(std::numeric_limits<int64_t>::max());
    return absl::OkStatus();
  }
  return planner_.Start(
      *cache_, s.epoch,
      {.rank = s.rank,
       .world_size = s.world_size,
       .shuffle = s.shuffle,
       .seed = s.seed,
       .drop_tail = s.drop_tail,
       .batch_size = s.batch_size},
      s.resume,
      [&](int64_t first, int64_t epochs, const LoaderCheckpoint* resume) {
        return PlanRecordFile(
            dataset_->path(), dataset_->header(),
            {.rank = s.rank, .world_size = s.world_size},
            {.shuffle = s.shuffle,
             .seed = s.seed,
             .drop_tail = s.drop_tail,
             .batch_size = s.batch_size},
            {.first_epoch = first, .epochs = epochs, .resume = resume});
      });
}

}  // namespace pinwheel
