#include "loader/cpu_budget.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <optional>
#include <sched.h>
#include <string>
#include <unistd.h>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"

#include "loader/internal/cgroup_mounts.h"
#include "pinning/base/small_file.h"

namespace pinwheel {
namespace {

using internal::CgroupDirectory;
using internal::Mount;
using internal::ParseMountInfo;
using internal::ReadSmallFile;

// A v2 cpu.max without a period, or the kernel's default period.
constexpr int64_t kDefaultPeriodUs = 100000;

// The quota found so far along a cgroup's ancestors.
struct Quota {
  double cpus = 0;  // 0: none
  std::string file;
  std::string text;
  std::vector<std::string> unread;

  void Offer(double offered, const std::string& offered_file,
             absl::string_view offered_text) {
    if (cpus == 0 || offered < cpus) {
      cpus = offered;
      file = offered_file;
      text = std::string(absl::StripAsciiWhitespace(offered_text));
    }
  }
};

bool ParsePositive(absl::string_view text, int64_t* value) {
  return absl::SimpleAtoi(text, value) && *value > 0;
}

// cgroup v2 cpu.max: "max [period]" or "quota [period]", microseconds.
void ReadCpuMax(const std::string& dir, Quota& quota) {
  const std::string file = absl::StrCat(dir, "/cpu.max");
  const std::optional<std::string> text = ReadSmallFile(file);
  if (!text) return;  // no cpu controller here: no limit at this level
  const std::vector<absl::string_view> parts =
      absl::StrSplit(*text, absl::ByAnyChar(" \t\n"), absl::SkipEmpty());
  int64_t limit = 0;
  int64_t period = kDefaultPeriodUs;
  if (parts.empty() || parts.size() > 2 ||
      (parts[0] != "max" && !ParsePositive(parts[0], &limit)) ||
      (parts.size() == 2 && !ParsePositive(parts[1], &period))) {
    quota.unread.push_back(
        absl::StrCat(file, " '", absl::StripAsciiWhitespace(*text),
                     "' is not 'max' or '<quota> <period>' in microseconds"));
    return;
  }
  if (parts[0] == "max") return;
  quota.Offer(static_cast<double>(limit) / static_cast<double>(period), file,
              *text);
}

// cgroup v1: cpu.cfs_quota_us (-1: none) over cpu.cfs_period_us.
void ReadCfsQuota(const std::string& dir, Quota& quota) {
  const std::string quota_file = absl::StrCat(dir, "/cpu.cfs_quota_us");
  const std::optional<std::string> quota_text = ReadSmallFile(quota_file);
  if (!quota_text) return;
  const absl::string_view stripped = absl::StripAsciiWhitespace(*quota_text);
  if (stripped == "-1") return;
  int64_t limit = 0;
  if (!ParsePositive(stripped, &limit)) {
    quota.unread.push_back(absl::StrCat(quota_file, " '", stripped,
                                        "' is not -1 or a positive number"));
    return;
  }
  const std::string period_file = absl::StrCat(dir, "/cpu.cfs_period_us");
  const std::optional<std::string> period_text = ReadSmallFile(period_file);
  int64_t period = 0;
  if (!period_text ||
      !ParsePositive(absl::StripAsciiWhitespace(*period_text), &period)) {
    quota.unread.push_back(absl::StrCat(
        period_file,
        period_text
            ? absl::StrCat(" '", absl::StripAsciiWhitespace(*period_text),
                           "' is not a positive number")
            : " is missing",
        " beside ", quota_file, " '", stripped, "'"));
    return;
  }
  quota.Offer(static_cast<double>(limit) / static_cast<double>(period),
              quota_file, absl::StrCat(stripped, " / ", period));
}

// Reads the quota of the cgroup at `dir` and of every ancestor up to the
// mount point `top`.
void ReadHierarchy(const std::string& fs_root, const std::string& dir,
                   const std::string& top, bool v2, Quota& quota) {
  for (const std::string& cgroup : internal::CgroupAndAncestors(dir, top)) {
    const std::string path = absl::StrCat(fs_root, cgroup);
    if (v2) {
      ReadCpuMax(path, quota);
    } else {
      ReadCfsQuota(path, quota);
    }
  }
}

Quota ReadQuota(const CpuBudgetSources& sources) {
  Quota quota;
  const std::string cgroup_file =
      absl::StrCat(sources.proc_root, "/self/cgroup");
  const std::optional<internal::CgroupMembership> membership =
      internal::ReadCgroupMembership(sources.proc_root);
  if (!membership) return quota;  // not Linux, or no cgroups: no quota
  const std::optional<std::string>& v2_path = membership->v2;
  std::optional<std::string> v1_path;
  if (auto cpu = membership->v1.find("cpu"); cpu != membership->v1.end()) {
    v1_path = cpu->second;
  }
  if (!v1_path && !v2_path) return quota;
  const std::string mountinfo_file =
      absl::StrCat(sources.proc_root, "/self/mountinfo");
  const std::optional<std::string> mountinfo = ReadSmallFile(mountinfo_file);
  if (!mountinfo) {
    quota.unread.push_back(
        absl::StrCat(mountinfo_file, " is missing beside ", cgroup_file));
    return quota;
  }
  const std::vector<Mount> mounts = ParseMountInfo(*mountinfo);
  // A v1 cpu hierarchy, where there is one, holds the quota (a hybrid
  // machine shows a "0::" line too, without the cpu controller).
  if (v1_path) {
    for (const Mount& mount : mounts) {
      if (internal::HoldsV1Controller(mount, "cpu")) {
        ReadHierarchy(sources.fs_root, CgroupDirectory(mount, *v1_path),
                      CgroupDirectory(mount, mount.root), /*v2=*/false, quota);
        return quota;
      }
    }
  }
  if (v2_path) {
    for (const Mount& mount : mounts) {
      if (mount.type == "cgroup2") {
        ReadHierarchy(sources.fs_root, CgroupDirectory(mount, *v2_path),
                      CgroupDirectory(mount, mount.root), /*v2=*/true, quota);
        return quota;
      }
    }
  }
  return quota;  // no cgroup filesystem mounted for the cpu controller
}

// The calling thread's affinity mask; nullopt (and `error`) when it cannot
// be read.
std::optional<std::vector<int>> ReadAffinity(std::string& error) {
  for (int max_cpus = 1024; max_cpus <= (1 << 20); max_cpus *= 4) {
    cpu_set_t* set = CPU_ALLOC(max_cpus);
    if (set == nullptr) break;
    const size_t bytes = CPU_ALLOC_SIZE(max_cpus);
    CPU_ZERO_S(bytes, set);
    if (::sched_getaffinity(0, bytes, set) == 0) {
      std::vector<int> cpus;
      for (int cpu = 0; cpu < max_cpus; ++cpu) {
        if (CPU_ISSET_S(cpu, bytes, set)) cpus.push_back(cpu);
      }
      CPU_FREE(set);
      return cpus;
    }
    const int err = errno;
    CPU_FREE(set);
    if (err != EINVAL) {
      error = absl::StrCat("sched_getaffinity failed (errno ", err, ")");
      return std::nullopt;
    }
  }
  error = "sched_getaffinity: no mask size was accepted";
  return std::nullopt;
}

std::string Cpus(int n) { return absl::StrCat(n, n == 1 ? " CPU" : " CPUs"); }

}  // namespace

std::string CpuListText(const std::vector<int>& sorted) {
  std::vector<std::string> ranges;
  for (size_t i = 0; i < sorted.size();) {
    size_t j = i;
    while (j + 1 < sorted.size() && sorted[j + 1] == sorted[j] + 1) ++j;
    ranges.push_back(j == i ? absl::StrCat(sorted[i])
                            : absl::StrCat(sorted[i], "-", sorted[j]));
    i = j + 1;
  }
  return absl::StrJoin(ranges, ",");
}

std::optional<std::vector<int>> ParseCpuList(absl::string_view text) {
  std::vector<int> cpus;
  text = absl::StripAsciiWhitespace(text);
  if (text.empty()) return cpus;
  for (absl::string_view range : absl::StrSplit(text, ',')) {
    const std::vector<absl::string_view> ends =
        absl::StrSplit(range, absl::MaxSplits('-', 1));
    int first = 0;
    int last = 0;
    if (!absl::SimpleAtoi(ends[0], &first) ||
        (ends.size() == 2 && !absl::SimpleAtoi(ends[1], &last))) {
      return std::nullopt;
    }
    if (ends.size() == 1) last = first;
    if (first < 0 || last < first || last >= (1 << 20)) return std::nullopt;
    for (int cpu = first; cpu <= last; ++cpu) cpus.push_back(cpu);
  }
  std::sort(cpus.begin(), cpus.end());
  cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
  return cpus;
}

CpuBudget ReadCpuBudget(const CpuBudgetSources& sources) {
  CpuBudget budget;
  std::vector<std::string> unread;
  budget.online_cpus = sources.online_cpus.value_or(
      static_cast<int>(::sysconf(_SC_NPROCESSORS_ONLN)));
  budget.online_cpus = std::max(budget.online_cpus, 1);

  std::string affinity_error;
  std::optional<std::vector<int>> affinity =
      sources.affinity ? sources.affinity : ReadAffinity(affinity_error);
  if (affinity && !affinity->empty()) {
    std::sort(affinity->begin(), affinity->end());
    affinity->erase(std::unique(affinity->begin(), affinity->end()),
                    affinity->end());
    budget.affinity_cpus = static_cast<int>(affinity->size());
    budget.affinity_list = CpuListText(*affinity);
  } else {
    unread.push_back(affinity_error.empty() ? "the affinity mask is empty"
                                            : affinity_error);
    budget.affinity_cpus = budget.online_cpus;
    budget.affinity_list = absl::StrCat("0-", budget.online_cpus - 1);
  }

  Quota quota = ReadQuota(sources);
  unread.insert(unread.end(), quota.unread.begin(), quota.unread.end());
  budget.quota_cpus = quota.cpus;
  budget.quota_file = quota.file;
  budget.quota_text = quota.text;
  budget.unread = absl::StrJoin(unread, "; ");

  budget.cpus = budget.affinity_cpus;
  budget.limited_by = budget.affinity_cpus < budget.online_cpus
                          ? std::string(kCpuLimitAffinity)
                          : std::string(kCpuLimitMachine);
  if (quota.cpus > 0) {
    // A hair below a whole number is that number (1e-9 guards 3 x 1/3).
    const int whole =
        std::max(1, static_cast<int>(std::ceil(quota.cpus - 1e-9)));
    if (whole < budget.cpus) {
      budget.cpus = whole;
      budget.limited_by = std::string(kCpuLimitQuota);
    }
  }
  return budget;
}

CpuBudget ShareAmongRanks(CpuBudget budget, int local_ranks) {
  if (local_ranks <= 1 || budget.limited_by == kCpuLimitAffinity) {
    return budget;
  }
  budget.shared_by = local_ranks;
  budget.cpus = std::max(1, budget.cpus / local_ranks);
  return budget;
}

std::string CpuBudget::ToString() const {
  const std::string mask = absl::StrCat("affinity mask ", affinity_list, " of ",
                                        online_cpus, " online");
  const std::string quota =
      quota_cpus > 0 ? absl::StrFormat("cgroup quota %g CPUs: %s '%s'",
                                       quota_cpus, quota_file, quota_text)
                     : std::string("no cgroup CPU quota");
  std::string out;
  if (shared_by > 1) {
    const int whole = limited_by == kCpuLimitQuota
                          ? static_cast<int>(std::ceil(quota_cpus - 1e-9))
                          : affinity_cpus;
    out = absl::StrCat(Cpus(cpus), ", a share of ", Cpus(whole), " among the ",
                       shared_by, " ranks on this node (",
                       limited_by == kCpuLimitQuota
                           ? absl::StrCat(quota, "; ", mask)
                           : absl::StrCat(mask, "; ", quota),
                       ")");
  } else if (!worker_cpu_list.empty()) {
    out = absl::StrCat(Cpus(cpus), " for the loader's threads on CPUs ",
                       worker_cpu_list, ", ", worker_cpus_why, " (", mask, "; ",
                       quota, ")");
  } else if (limited_by == kCpuLimitQuota) {
    out = absl::StrCat(Cpus(cpus), ", set by the ", quota, " (", mask, ")");
  } else if (limited_by == kCpuLimitAffinity) {
    out = absl::StrCat(Cpus(cpus), ", set by the ", mask, " (", quota, ")");
  } else {
    out = absl::StrCat(Cpus(cpus), ", the whole machine (", mask, "; ", quota,
                       ")");
  }
  if (!unread.empty()) absl::StrAppend(&out, " [unread: ", unread, "]");
  return out;
}

int WorkersFromCpus(const CpuBudget& budget) {
  return std::clamp(budget.cpus - 1, 1, 256);
}

std::string CpuOversubscription(const CpuBudget& budget, int workers,
                                const LaunchEnvironment& env) {
  if (workers <= budget.cpus) return "";
  const absl::string_view launcher = env.launcher;
  // The workers and the consumer's thread, within this rank's share of
  // the node.
  const int share =
      std::max(1, budget.online_cpus / std::max(1, env.local_world_size));
  const int n = std::min(workers + 1, share);
  std::string fix;
  if (!budget.worker_cpu_list.empty()) {
    fix = absl::StrCat("its threads already run on ", budget.worker_cpus_why,
                       "; start fewer ranks on this node");
  } else if (budget.shared_by > 1 && budget.limited_by == kCpuLimitMachine) {
    fix = absl::StrCat("this node has ", Cpus(budget.online_cpus), " for ",
                       budget.shared_by, " ranks");
  } else if (budget.limited_by == kCpuLimitQuota) {
    fix = absl::StrCat("raise the container's CPU quota to ", n,
                       " (docker run --cpus=", n,
                       ", Kubernetes resources.limits.cpu: ", n,
                       ", systemd CPUQuota=", n * 100, "%)");
  } else if (budget.limited_by == kCpuLimitMachine) {
    fix = absl::StrCat("this machine has ", Cpus(budget.online_cpus));
  } else if (launcher == "openmpi") {
    // Note [binding for several NUMA nodes] in samples/train/MULTI_GPU.md:
    // slot mapping gives consecutive ranks consecutive cores, so ranks sit
    // on the node of the GPUs they usually drive; numa mapping deals the
    // ranks round-robin over the nodes.
    fix = absl::StrCat(
        "Open MPI binds each rank to one core when it starts two ranks or "
        "fewer; give each rank ",
        n, " cores with `mpirun --map-by slot:PE=", n,
        " --bind-to core` (one NUMA node or several; --report-bindings "
        "shows them) or start it with `mpirun --bind-to none`");
  } else if (launcher == "slurm") {
    fix = absl::StrCat(
        "Slurm gives each task --cpus-per-task CPUs (1 by default): "
        "`srun --cpus-per-task=",
        n, "`");
  } else if (launcher == "torchrun") {
    fix = absl::StrCat(
        "torchrun does not bind its workers, so this mask comes from what "
        "started torchrun (taskset, numactl, srun, mpirun, a container's "
        "cpuset): give it ",
        n, " CPUs per rank");
  } else if (launcher == "pmi") {
    fix = absl::StrCat("MPICH: `mpiexec -bind-to core:", n,
                       "` or `-bind-to none`; Intel MPI: I_MPI_PIN_DOMAIN=", n);
  } else {
    fix = absl::StrCat(
        "the mask was set by what started this process (taskset, numactl, a "
        "job scheduler, a container's cpuset): give it ",
        n, " CPUs");
  }
  return absl::StrCat("pinwheel: num_workers = ", workers,
                      " cannot run in parallel: this process may use ",
                      budget.ToString(), ". Fix: ", fix,
                      "; or num_workers <= ", budget.cpus,
                      ". (LoaderOptions::warn_cpu_oversubscription = false "
                      "silences this line.)");
}

}  // namespace pinwheel
