// ArenaCpus: moves every thread that works in a oneTBB arena onto a set of
// CPUs while it works there, and gives it back its own mask when it
// leaves (oneTBB's worker threads serve every arena of the process). How a
// loader's threads leave a launcher's one-core binding: Note [Open MPI's
// default binding is widened] (loader/worker_cpus.h).
//
// Example:
//   tbb::task_arena arena(14, 1);
//   ArenaCpus cpus(arena, {16, 17, ..., 31});  // before any work is queued
//   arena.execute([] { ... });  // runs on CPUs 16-31
//   // destroy `cpus` before `arena`
#ifndef PINWHEEL_LOADER_INTERNAL_ARENA_CPUS_H_
#define PINWHEEL_LOADER_INTERNAL_ARENA_CPUS_H_

#include <atomic>
#include <string>
#include <vector>

#include "oneapi/tbb/task_arena.h"
#include "oneapi/tbb/task_scheduler_observer.h"

#include "pinning/base/thread_cpus.h"

namespace pinwheel::internal {

// Thread-safe (oneTBB calls it from each thread that enters or leaves).
class ArenaCpus : public tbb::task_scheduler_observer {
 public:
  // Observes `arena` (which must outlive this) from now on; `cpus` not
  // empty.
  ArenaCpus(tbb::task_arena& arena, std::vector<int> cpus);
  ~ArenaCpus() override;
  ArenaCpus(const ArenaCpus&) = delete;
  ArenaCpus& operator=(const ArenaCpus&) = delete;

  void on_scheduler_entry(bool is_worker) override;
  void on_scheduler_exit(bool is_worker) override;

  // Returns how many times a thread could not be moved (sched_setaffinity
  // refused: the CPUs left the cgroup's cpuset since Build()), and the
  // first errno; such a thread keeps its mask.
  int refused() const { return refused_.load(std::memory_order_relaxed); }
  int first_errno() const {
    return first_errno_.load(std::memory_order_relaxed);
  }

 private:
  const std::vector<int> cpus_;
  const CpuMask wanted_;  // of cpus_
  std::atomic<int> refused_{0};
  std::atomic<int> first_errno_{0};
};

// Returns whether the kernel lets a thread of this process run on `cpus`
// now (tried on a thread started for it); false for an empty list.
bool ThreadCanRunOn(const std::vector<int>& cpus);

}  // namespace pinwheel::internal

#endif  // PINWHEEL_LOADER_INTERNAL_ARENA_CPUS_H_
