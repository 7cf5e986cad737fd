#include "loader/worker_cpus.h"

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <string>
#include <unistd.h>
#include <vector>

#include "absl/strings/str_cat.h"

#include "loader/internal/cgroup_mounts.h"
#include "pinning/base/small_file.h"

namespace pinwheel {
namespace {

using internal::ReadSmallFile;

std::optional<std::vector<int>> ReadCpuListFile(const std::string& file) {
  const std::optional<std::string> text = ReadSmallFile(file);
  if (!text) return std::nullopt;
  std::optional<std::vector<int>> cpus = ParseCpuList(*text);
  if (!cpus || cpus->empty()) return std::nullopt;
  return cpus;
}

// The cpuset of this process's cgroup; nullopt when there is none to read.
std::optional<std::vector<int>> ReadCgroupCpuset(
    const CpuBudgetSources& sources) {
  const std::optional<internal::CgroupMembership> membership =
      internal::ReadCgroupMembership(sources.proc_root);
  if (!membership) return std::nullopt;
  const std::optional<std::string> mountinfo =
      ReadSmallFile(absl::StrCat(sources.proc_root, "/self/mountinfo"));
  if (!mountinfo) return std::nullopt;
  const std::vector<internal::Mount> mounts =
      internal::ParseMountInfo(*mountinfo);
  if (auto v1 = membership->v1.find("cpuset"); v1 != membership->v1.end()) {
    for (const internal::Mount& mount : mounts) {
      if (!internal::HoldsV1Controller(mount, "cpuset")) continue;
      const std::string dir = absl::StrCat(
          sources.fs_root, internal::CgroupDirectory(mount, v1->second));
      for (const char* name : {"/cpuset.effective_cpus", "/cpuset.cpus"}) {
        if (auto cpus = ReadCpuListFile(absl::StrCat(dir, name))) return cpus;
      }
    }
  }
  if (!membership->v2) return std::nullopt;
  for (const internal::Mount& mount : mounts) {
    if (mount.type != "cgroup2") continue;
    // A cgroup without the cpuset controller runs on its parent's CPUs.
    for (const std::string& cgroup : internal::CgroupAndAncestors(
             internal::CgroupDirectory(mount, *membership->v2),
             internal::CgroupDirectory(mount, mount.root))) {
      if (auto cpus = ReadCpuListFile(absl::StrCat(sources.fs_root, cgroup,
                                                   "/cpuset.cpus.effective"))) {
        return cpus;
      }
    }
  }
  return std::nullopt;
}

// Returns `allowed` less its first `ranks` cores (each core's hardware
// threads): Open MPI's default maps local rank r onto the r-th core, where
// the rank's own threads (its training loop) stay, so the shares are dealt
// from the cores after them. All of `allowed` when that leaves nothing.
std::vector<int> AfterTheRanksCores(const std::vector<int>& allowed, int ranks,
                                    const CpuBudgetSources& sources) {
  std::vector<int> reserved;
  for (size_t i = 0, cores = 0;
       i < allowed.size() && cores < static_cast<size_t>(ranks); ++i) {
    if (std::find(reserved.begin(), reserved.end(), allowed[i]) !=
        reserved.end()) {
      continue;
    }
    for (int cpu : CoreSiblings(allowed[i], sources)) reserved.push_back(cpu);
    ++cores;
  }
  std::vector<int> rest;
  for (int cpu : allowed) {
    if (std::find(reserved.begin(), reserved.end(), cpu) == reserved.end()) {
      rest.push_back(cpu);
    }
  }
  return rest.empty() ? allowed : rest;
}

std::string Cpus(size_t n) {
  return absl::StrCat(n, n == 1 ? " CPU" : " CPUs");
}

}  // namespace

std::vector<int> AllowedCpus(const CpuBudgetSources& sources) {
  if (auto cpus = ReadCgroupCpuset(sources)) return *cpus;
  if (auto cpus = ReadCpuListFile(
          absl::StrCat(sources.fs_root, "/sys/devices/system/cpu/online"))) {
    return *cpus;
  }
  const int online = std::max(1, sources.online_cpus.value_or(static_cast<int>(
                                     ::sysconf(_SC_NPROCESSORS_ONLN))));
  std::vector<int> cpus(static_cast<size_t>(online));
  for (int cpu = 0; cpu < online; ++cpu) cpus[static_cast<size_t>(cpu)] = cpu;
  return cpus;
}

std::vector<int> CoreSiblings(int cpu, const CpuBudgetSources& sources) {
  std::optional<std::vector<int>> siblings = ReadCpuListFile(
      absl::StrCat(sources.fs_root, "/sys/devices/system/cpu/cpu", cpu,
                   "/topology/thread_siblings_list"));
  if (!siblings ||
      std::find(siblings->begin(), siblings->end(), cpu) == siblings->end()) {
    return {cpu};
  }
  return *siblings;
}

CpuBudget WidenDefaultBinding(CpuBudget budget, const LaunchEnvironment& env,
                              const CpuBudgetSources& sources) {
  if (env.launcher != "openmpi" || env.world_size > 2 ||
      budget.limited_by == kCpuLimitMachine ||
      !budget.worker_cpu_list.empty()) {
    return budget;
  }
  const char* policy_variable =
      std::getenv("OMPI_MCA_hwloc_base_binding_policy");
  const std::string policy = sources.openmpi_binding_policy.value_or(
      policy_variable != nullptr ? policy_variable : "");
  if (!policy.empty()) return budget;  // a binding the user asked for
  const std::optional<std::vector<int>> mask =
      ParseCpuList(budget.affinity_list);
  if (!mask || mask->empty()) return budget;
  const std::vector<int> core = CoreSiblings(mask->front(), sources);
  if (!std::includes(core.begin(), core.end(), mask->begin(), mask->end())) {
    return budget;  // wider than one core: the user's choice
  }
  const std::vector<int> allowed = AllowedCpus(sources);
  const int ranks = std::max(1, env.local_world_size);
  if (env.local_rank >= ranks) return budget;
  const std::vector<int> dealt =
      ranks > 1 ? AfterTheRanksCores(allowed, ranks, sources) : allowed;
  const size_t n = dealt.size();
  const size_t begin =
      n * static_cast<size_t>(env.local_rank) / static_cast<size_t>(ranks);
  const size_t end =
      n * static_cast<size_t>(env.local_rank + 1) / static_cast<size_t>(ranks);
  const std::vector<int> share(dealt.begin() + static_cast<long>(begin),
                               dealt.begin() + static_cast<long>(end));
  if (share.size() <= mask->size()) return budget;
  budget.worker_cpu_list = CpuListText(share);
  budget.worker_cpus_why = absl::StrCat(
      ranks > 1 ? "this rank's share of " : "", "the ", Cpus(allowed.size()),
      " its cgroup allows",
      ranks > 1 ? absl::StrCat(" among ", ranks, " ranks") : "",
      n < allowed.size() ? " (less the cores Open MPI binds the ranks to)"
                         : "");
  // The process keeps its own core busy too (the training loop).
  std::vector<int> busy = share;
  for (int cpu : *mask) {
    if (std::find(busy.begin(), busy.end(), cpu) == busy.end()) {
      busy.push_back(cpu);
    }
  }
  const int share_cpus = static_cast<int>(busy.size());
  if (budget.limited_by == kCpuLimitQuota && budget.cpus < share_cpus) {
    return budget;  // the quota still limits them
  }
  budget.cpus = share_cpus;
  budget.limited_by = std::string(kCpuLimitRankShare);
  return budget;
}

std::string WidenedBindingLine(const CpuBudget& budget,
                               const LaunchEnvironment& env) {
  if (budget.worker_cpu_list.empty()) return "";
  return absl::StrCat(
      "pinwheel: Open MPI bound ", env.ToString(), " to ",
      budget.affinity_cpus == 1 ? "CPU " : "CPUs ", budget.affinity_list,
      " (its default at two ranks or fewer); the loader's threads run on "
      "CPUs ",
      budget.worker_cpu_list, ", ", budget.worker_cpus_why,
      ". To choose the CPUs yourself: `mpirun --map-by slot:PE=", budget.cpus,
      " --bind-to core` (kept as given) or `--bind-to none`; to keep this "
      "binding: LoaderOptions::keep_launcher_binding = true. "
      "(warn_cpu_oversubscription = false silences this line.)");
}

}  // namespace pinwheel
