// Where a loader's threads run. They inherit the affinity mask of the
// thread that builds the loader, with one exception: a launcher's default
// binding of the rank to one core, which the user never chose.
//
// Example (what Build() does):
//   CpuBudget budget = ShareAmongRanks(ReadCpuBudget(), env.local_world_size);
//   if (!options.keep_launcher_binding) {
//     budget = WidenDefaultBinding(budget, env);
//   }
//   // budget.worker_cpu_list == "16-31" under `mpirun -np 2` as rank 1 of a
//   // 32-CPU node; the workers' arena moves its threads there.
//
// Note [Open MPI's default binding is widened]
// Open MPI binds each rank to one core when it starts two ranks or fewer
// (measured on the 2 x H200 host: Cpus_allowed_list 0 and 1), and every
// thread the rank starts inherits that core. A loader of 14 workers there
// ran at 0.10 of the copy rate (issue 30); the line Build() printed named
// the fix, but the run stayed slow. So when
//   - the launcher is Open MPI (OMPI_COMM_WORLD_*) with at most two ranks,
//   - the process's mask is one core (its hardware threads: sysfs
//     thread_siblings_list), the binding Open MPI picks by default,
//   - the user did not ask for a binding (`--bind-to X` sets
//     OMPI_MCA_hwloc_base_binding_policy in the ranks; the default leaves
//     it unset: measured with Open MPI 4.1.6), and
//   - this rank's share of the CPUs its cgroup allows is wider (the allowed
//     CPUs in local-rank blocks, rank 0 of 2 the first half, less the first
//     core of each rank: Open MPI's default puts local rank r on the r-th
//     core, and its training loop stays there),
// the loader's own threads (its workers, its producer and copy threads)
// run on that share instead, and Build() says so once, naming the share
// and how to choose otherwise. The training thread and every thread the
// user starts keep the binding. The share never leaves the cgroup's cpuset
// (a container's or a Slurm job's CPUs), so a shared node's other jobs keep
// theirs; a binding the user asked for is kept, as is any binding when
// LoaderOptions::keep_launcher_binding is set. Where the loader binds its
// workers to a NUMA node (loader/numa_placement.h) it does not widen: no
// such machine was measured.
// Measured on 2 x H200 (32 cores, issue 30,
// samples/bench/results/h200x2-2026-11-27-s9-default-binding.txt):
// moving only the workers' arena lifted W1 from 0.09 to 0.22 of the raw
// copy while PE=16 reached 0.55 (the copy and producer threads stayed on
// the training loop's core); with all of them moved and left there, W1
// 0.58-0.61 against 0.54-0.60 for PE=16 in the same calls, W2 0.24-0.26
// against 0.25-0.26.
#ifndef PINWHEEL_LOADER_WORKER_CPUS_H_
#define PINWHEEL_LOADER_WORKER_CPUS_H_

#include <string>
#include <vector>

#include "loader/cpu_budget.h"
#include "loader/launch_environment.h"

namespace pinwheel {

// Returns the CPUs a thread of this process could be moved to, sorted: its
// cgroup's cpuset (v2 cpuset.cpus.effective, the nearest ancestor that has
// it; v1 cpuset.effective_cpus or cpuset.cpus), else the machine's online
// CPUs (/sys/devices/system/cpu/online), else 0 .. sources.online_cpus - 1
// (or sysconf's count). Never empty. Thread-safe.
std::vector<int> AllowedCpus(const CpuBudgetSources& sources = {});

// Returns the hardware threads of `cpu`'s core (sysfs
// topology/thread_siblings_list), {cpu} when unknown. Thread-safe.
std::vector<int> CoreSiblings(int cpu, const CpuBudgetSources& sources = {});

// Returns `budget` (read from `sources`) with worker_cpu_list set to this
// rank's share when Note [Open MPI's default binding is widened] applies,
// `cpus` counting it (at most the quota) and limited_by kCpuLimitRankShare
// unless the quota is smaller; `budget` unchanged otherwise.
CpuBudget WidenDefaultBinding(CpuBudget budget, const LaunchEnvironment& env,
                              const CpuBudgetSources& sources = {});

// Returns the line Build() says when `budget`'s threads were moved (empty
// when they were not): the binding, the share, and how to choose.
std::string WidenedBindingLine(const CpuBudget& budget,
                               const LaunchEnvironment& env);

}  // namespace pinwheel

#endif  // PINWHEEL_LOADER_WORKER_CPUS_H_
