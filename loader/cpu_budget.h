// CpuBudget: how many CPUs this process may keep busy at once, and what
// sets that number: its affinity mask (sched_getaffinity: what taskset,
// numactl, mpirun's binding, srun --cpus-per-task or a container's cpuset
// left it) and its cgroup CPU quota (cgroup v2 cpu.max, v1
// cpu.cfs_quota_us / cpu.cfs_period_us; the smallest along the cgroup's
// ancestors), the cgroup found through /proc/self/cgroup and
// /proc/self/mountinfo.
//
// Example:
//   const CpuBudget budget = ReadCpuBudget();
//   std::printf("%s\n", budget.ToString().c_str());
//   // "1 CPU, set by the affinity mask (CPU 0 of 32 online; no cgroup CPU
//   // quota)"
//
// Note [a loader sizes itself to its CPUs]
// Launchers narrow a process's CPUs without saying so: Open MPI 4 binds
// each rank to one core when it starts two ranks or fewer (measured on the
// 2 x H200 host, issue 30: Cpus_allowed_list 0 for rank 0 and 1 for rank
// 1), Slurm gives a task --cpus-per-task CPUs (1 by default), a container
// runs under a CPU quota. A loader that starts 14 workers inside one core
// delivered 0.10 of the raw copy rate there, with nothing to tell why. So
// LoaderBuilder::Build() reads the budget once: num_workers =
// LoaderOptions::kNumWorkersFromCpus takes its number from it, and an
// explicit num_workers above it is honoured but said once, on one line
// naming the CPUs, what limits them and the fix for the launcher
// (CpuOversubscription()); LoaderStats carries both. Ranks of one node that
// draw on the same CPUs (an unbound torchrun job, one container's quota)
// each count their share (ShareAmongRanks()). What this means at 8 GPUs a
// node: samples/train/MULTI_GPU.md.
#ifndef PINWHEEL_LOADER_CPU_BUDGET_H_
#define PINWHEEL_LOADER_CPU_BUDGET_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

#include "loader/launch_environment.h"

namespace pinwheel {

// Where the budget is read from; tests point these at a fake tree. A
// value; thread-compatible.
struct CpuBudgetSources {
  // Reads <proc_root>/self/cgroup and <proc_root>/self/mountinfo.
  std::string proc_root = "/proc";
  // Prefixed to the mount points mountinfo names ("" on a real machine).
  std::string fs_root;
  // The CPUs allowed; nullopt: sched_getaffinity() of the calling thread
  // (threads it starts inherit it).
  std::optional<std::vector<int>> affinity;
  // The machine's online CPUs; nullopt: sysconf(_SC_NPROCESSORS_ONLN).
  std::optional<int> online_cpus;
  // The binding the user gave Open MPI: `mpirun --bind-to core` sets
  // OMPI_MCA_hwloc_base_binding_policy=core in its ranks, its default
  // binding leaves it unset (measured, Open MPI 4.1.6); "" for unset;
  // nullopt: read the variable (loader/worker_cpus.h).
  std::optional<std::string> openmpi_binding_policy;
};

// What limits CpuBudget::cpus.
inline constexpr absl::string_view kCpuLimitMachine = "machine";
inline constexpr absl::string_view kCpuLimitAffinity = "affinity mask";
inline constexpr absl::string_view kCpuLimitQuota = "cgroup quota";
// The loader's threads were moved off a launcher's one-core binding onto
// this rank's share of the node (loader/worker_cpus.h).
inline constexpr absl::string_view kCpuLimitRankShare = "rank's share";

// A value; thread-compatible.
struct CpuBudget {
  // The CPUs this process may keep busy at once: the affinity mask's count,
  // lowered to the quota rounded up (1.5 CPUs of quota run 2 threads, each
  // throttled to 75 %), divided among the ranks sharing them (shared_by).
  // >= 1.
  int cpus = 1;
  // The ranks of this node drawing on the same CPUs (ShareAmongRanks()); 1
  // when this process has them to itself.
  int shared_by = 1;
  // What sets `cpus`: kCpuLimitAffinity, kCpuLimitQuota, kCpuLimitRankShare
  // or kCpuLimitMachine (none of them: every online CPU).
  std::string limited_by = std::string(kCpuLimitMachine);
  int online_cpus = 1;        // the machine's online CPUs
  int affinity_cpus = 1;      // CPUs in the affinity mask
  std::string affinity_list;  // the mask as a list, "0-3,8"
  double quota_cpus = 0;      // the cgroup quota / period; 0: no quota
  std::string quota_file;     // the file that set quota_cpus
  std::string quota_text;     // its content, "150000 100000"
  // Where the loader's threads run when not inside the affinity mask (Note
  // [Open MPI's default binding is widened], loader/worker_cpus.h): this
  // rank's share of the CPUs its cgroup allows, "16-31", and why, "this
  // rank's share of the 32 CPUs its cgroup allows among 2 ranks, in place
  // of Open MPI's binding to one core"; empty: they keep the mask. `cpus`
  // then counts the share (limited_by = kCpuLimitRankShare) unless a quota
  // is smaller.
  std::string worker_cpu_list;
  std::string worker_cpus_why;
  // Why a part could not be read (a cgroup file that does not parse, the
  // mask unreadable), naming the file and what it held; empty when all of
  // it was read. The budget then stands on the parts that were.
  std::string unread;

  // "2 CPUs, set by the cgroup quota (1.5 CPUs: /sys/fs/cgroup/cpu.max
  // '150000 100000'; affinity mask 0-7 of 8 online)".
  std::string ToString() const;
};

// Reads the budget. Never fails: a missing file, a cgroup without a CPU
// controller, "max" or a v1 quota of -1 mean no quota; a file that does not
// parse counts as no quota and is named in CpuBudget::unread. Thread-safe.
CpuBudget ReadCpuBudget(const CpuBudgetSources& sources = {});

// Returns sorted CPU numbers as the kernel writes a list: "0-3,8,10-11".
std::string CpuListText(const std::vector<int>& sorted);

// Returns the CPUs of a list such as "0-3,8,10-11" (cpuset(7)'s list
// format; surrounding whitespace allowed), sorted, without repeats; empty
// for an empty list; nullopt when it does not parse.
std::optional<std::vector<int>> ParseCpuList(absl::string_view text);

// Returns `budget` divided among the `local_ranks` ranks of this node
// (LaunchEnvironment::local_world_size; 0 or 1: none) when they draw on the
// same CPUs: when the budget is the whole machine or a cgroup quota (a
// container's quota binds all its ranks). A budget set by the affinity mask
// is this rank's own (a launcher's binding gives each rank its own cores).
// torchrun binds nothing: 8 ranks of 14 workers on a 32-CPU node would
// otherwise each think they had 32.
CpuBudget ShareAmongRanks(CpuBudget budget, int local_ranks);

// Returns the worker count LoaderOptions::kNumWorkersFromCpus stands for:
// one CPU left to the consumer's thread (the training loop), the rest
// reading; 1..256.
int WorkersFromCpus(const CpuBudget& budget);

// Returns the one line Build() says when `workers` reading threads cannot
// run in parallel (workers > budget.cpus): the CPUs, what limits them, and
// the fix for the launcher of `env` ("openmpi", "slurm", "torchrun", "pmi",
// "none"), asking for workers + 1 CPUs a rank (the workers and the
// consumer's thread), at most the node's online CPUs over its ranks
// (env.local_world_size, when known); empty when they can.
std::string CpuOversubscription(const CpuBudget& budget, int workers,
                                const LaunchEnvironment& env);

}  // namespace pinwheel

#endif  // PINWHEEL_LOADER_CPU_BUDGET_H_
