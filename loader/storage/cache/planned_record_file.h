// PlannedRecordFile: a RecordFileDataset read through a CachedStore that it
// keeps told of the future, as PlannedTarShards does for tar shards: at the
// start of each epoch (Dataset::StartEpoch) it appends the records this
// rank's sampler will read in that epoch and the next (PlanRecordFile,
// loader/storage/cache/read_plan.h) to the cache's plan (Note [which
// epochs are planned] in planned_tar_shards.h). With a custom
// LoaderOptions::sampler there is nothing to plan from: the cache then
// works without a plan (reads cached into free room, or in place of blocks
// no plan needs).
//
// Example:
//   PINWHEEL_ASSIGN_OR_RETURN(std::shared_ptr<ObjectStore> remote,
//                             OpenObjectStore(url, {}));
//   PINWHEEL_ASSIGN_OR_RETURN(std::shared_ptr<CachedStore> cache,
//       CachedStore::Open(remote, {.budget_bytes = int64_t{64} << 30}));
//   PINWHEEL_ASSIGN_OR_RETURN(std::shared_ptr<RecordFileDataset> records,
//                             RecordFileDataset::Open(url, {}, cache));
//   PINWHEEL_ASSIGN_OR_RETURN(std::shared_ptr<PlannedRecordFile> train,
//                             PlannedRecordFile::Create(records, cache));
//   PINWHEEL_ASSIGN_OR_RETURN(Loader loader,
//       LoaderBuilder(train).batch_size(256).shuffle(7).Build());
//
// Thread-safe: as the dataset it wraps.
#ifndef PINWHEEL_LOADER_STORAGE_CACHE_PLANNED_RECORD_FILE_H_
#define PINWHEEL_LOADER_STORAGE_CACHE_PLANNED_RECORD_FILE_H_

#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include "loader/dataset.h"
#include "loader/record_file.h"
#include "loader/storage/cache/cached_store.h"
#include "loader/storage/cache/internal/epoch_planner.h"
#include "transfer/sample_layout.h"

namespace pinwheel {

class PlannedRecordFile final : public Dataset {
 public:
  // `dataset` must read through `cache` (opened with it as its store):
  // InvalidArgument otherwise, or when either is null.
  [[nodiscard]] static absl::StatusOr<std::shared_ptr<PlannedRecordFile>>
  Create(std::shared_ptr<const RecordFileDataset> dataset,
         std::shared_ptr<CachedStore> cache);

  int64_t size() const override { return dataset_->size(); }
  const SampleLayout& layout() const override { return dataset_->layout(); }
  absl::Status Read(int64_t index, SampleView& out) const override {
    return dataset_->Read(index, out);
  }
  // Plans the epoch (reading nothing: the header is the dataset's);
  // PlanRecordFile()'s errors (a checkpoint that does not fit).
  absl::Status StartEpoch(const EpochSampling& sampling) const override;

  const RecordFileDataset& dataset() const { return *dataset_; }
  CachedStore& cache() const { return *cache_; }

 private:
  PlannedRecordFile(std::shared_ptr<const RecordFileDataset> dataset,
                    std::shared_ptr<CachedStore> cache)
      : dataset_(std::move(dataset)), cache_(std::move(cache)) {}

  const std::shared_ptr<const RecordFileDataset> dataset_;
  const std::shared_ptr<CachedStore> cache_;
  mutable internal::EpochPlanner planner_;
};

}  // namespace pinwheel

#endif  // PINWHEEL_LOADER_STORAGE_CACHE_PLANNED_RECORD_FILE_H_
