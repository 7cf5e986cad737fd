// EpochPlanner: which epochs a planned dataset appends to its cache's plan
// when the loader starts an epoch (Note [which epochs are planned] in
// loader/storage/cache/planned_tar_shards.h), shared by PlannedTarShards
// and PlannedRecordFile.
#ifndef PINWHEEL_LOADER_STORAGE_CACHE_INTERNAL_EPOCH_PLANNER_H_
#define PINWHEEL_LOADER_STORAGE_CACHE_INTERNAL_EPOCH_PLANNER_H_

#include <cstdint>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

#include "loader/loader_checkpoint.h"
#include "loader/storage/cache/cached_store.h"
#include "loader/storage/cache/read_plan.h"

namespace pinwheel::internal {

// Thread-safe.
class EpochPlanner {
 public:
  // What the reads depend on besides the epoch: the process's share and
  // the order's parameters. Two starts with different ones never continue
  // each other's plan.
  struct Share {
    int rank = 0;
    int world_size = 1;
    int streams = 1;
    bool shuffle = false;
    uint64_t seed = 0;
    bool drop_tail = false;
    int64_t batch_size = 0;
    friend bool operator==(const Share&, const Share&) = default;
  };
  // Returns the plan of `epochs` epochs from `first`, the first of them
  // continuing from `resume` when not null.
  using PlanFn = absl::FunctionRef<absl::StatusOr<ReadPlan>(
      int64_t first, int64_t epochs, const LoaderCheckpoint* resume)>;

  // The loader starts `epoch` with `share` (from `resume` when not null):
  // drops the reads the loader left behind and appends what the plan
  // lacks to `cache`'s plan; plan()'s or AppendPlan()'s error.
  absl::Status Start(CachedStore& cache, int64_t epoch, const Share& share,
                     const LoaderCheckpoint* resume, PlanFn plan)
      ABSL_LOCKS_EXCLUDED(mu_);

 private:
  absl::Mutex mu_;
  int64_t started_ ABSL_GUARDED_BY(mu_) = -1;  // -1: none yet
  Share share_ ABSL_GUARDED_BY(mu_);
  int64_t planned_through_ ABSL_GUARDED_BY(mu_) = -1;
};

}  // namespace pinwheel::internal

#endif  // PINWHEEL_LOADER_STORAGE_CACHE_INTERNAL_EPOCH_PLANNER_H_
