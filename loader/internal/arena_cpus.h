// ArenaCpus: moves every thread that comes to work in a oneTBB arena onto a
// set of CPUs. How a loader's threads leave a launcher's one-core binding:
// Note [Open MPI's default binding is widened] (loader/worker_cpus.h).
//
// A thread stays on those CPUs when it leaves: oneTBB's threads leave an
// arena whenever it runs dry (every few batches of a small one), and
// giving each back its old mask moved it onto the training loop's core
// and back again each time (measured: W2 at 0.19 of the raw copy against
// 0.27 for the same CPUs given by mpirun). oneTBB's threads serve every
// arena of the process, so another arena's work may then run on these
// CPUs; an arena bound to a NUMA node binds its threads itself.
//
// Example:
//   tbb::task_arena arena(14, 1);
//   ArenaCpus cpus(arena, {16, 17, ..., 31});  // before any work is queued
//   arena.execute([] { ... });  // runs on CPUs 16-31
//   // destroy `cpus` before `arena`
#ifndef PINWHEEL_LOADER_INTERNAL_ARENA_CPUS_H_
#define PINWHEEL_LOADER_INTERNAL_ARENA_CPUS_H_

#include <cstdint>
#include <vector>

#include "oneapi/tbb/task_arena.h"
#include "oneapi/tbb/task_scheduler_observer.h"

#include "pinning/base/thread_cpus.h"

namespace pinwheel::internal {

// Thread-safe (oneTBB calls it from each thread that enters the arena).
class ArenaCpus : public tbb::task_scheduler_observer {
 public:
  // Observes `arena` (which must outlive this) from now on; `cpus` not
  // empty.
  ArenaCpus(tbb::task_arena& arena, const std::vector<int>& cpus);
  ~ArenaCpus() override;
  ArenaCpus(const ArenaCpus&) = delete;
  ArenaCpus& operator=(const ArenaCpus&) = delete;

  // Moves the calling thread, once per thread; a thread the kernel does
  // not let onto the CPUs (they left the cgroup's cpuset since Build()
  // tried them: ThreadCanRunOn()) keeps its mask.
  void on_scheduler_entry(bool is_worker) override;

 private:
  const uint64_t id_;     // distinct per ArenaCpus of the process
  const CpuMask wanted_;  // the CPUs given at construction
};

// Returns whether the kernel lets a thread of this process run on `cpus`
// now (tried on a thread started for it); false for an empty list.
bool ThreadCanRunOn(const std::vector<int>& cpus);

}  // namespace pinwheel::internal

#endif  // PINWHEEL_LOADER_INTERNAL_ARENA_CPUS_H_
