#include "loader/storage/cache/internal/epoch_planner.h"

#include <limits>

#include "pinning/base/mutex.h"
#include "pinning/base/status_macros.h"

namespace pinwheel::internal {

absl::Status EpochPlanner::Start(CachedStore& cache, int64_t epoch,
                                 const Share& share,
                                 const LoaderCheckpoint* resume, PlanFn plan) {
  MutexLock lock(&mu_);
  const bool continues = started_ >= 0 && share == share_ &&
                         resume == nullptr && epoch == started_ + 1 &&
                         planned_through_ >= epoch;
  started_ = epoch;
  share_ = share;
  int64_t first = epoch;
  int64_t epochs = 2;
  if (continues) {
    cache.SkipPlanBefore(epoch);
    if (planned_through_ > epoch) return absl::OkStatus();
    first = epoch + 1;
    epochs = 1;
  } else {
    cache.SkipPlanBefore(std::numeric_limits<int64_t>::max());
    planned_through_ = -1;
  }
  PINWHEEL_ASSIGN_OR_RETURN(
      ReadPlan reads, plan(first, epochs, first == epoch ? resume : nullptr));
  PINWHEEL_RETURN_IF_ERROR(cache.AppendPlan(reads));
  planned_through_ = first + epochs - 1;
  return absl::OkStatus();
}

}  // namespace pinwheel::internal
