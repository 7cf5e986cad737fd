// Where this process's cgroups live: /proc/self/cgroup names the cgroup of
// each hierarchy, /proc/self/mountinfo where each hierarchy is mounted. The
// CPU budget reads its quota there (loader/cpu_budget.h) and the worker
// placement the CPUs a cpuset allows (loader/worker_cpus.h).
//
// Example:
//   const std::optional<CgroupMembership> in = ReadCgroupMembership("/proc");
//   // in->v2 == "/user.slice/session-3.scope", in->v1["cpu"] == ...
#ifndef PINWHEEL_LOADER_INTERNAL_CGROUP_MOUNTS_H_
#define PINWHEEL_LOADER_INTERNAL_CGROUP_MOUNTS_H_

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace pinwheel::internal {

// One line of /proc/self/mountinfo, the fields the cgroup readers need
// (proc_pid_mountinfo(5)). A value; thread-compatible.
struct Mount {
  std::string root;   // the part of the filesystem mounted, "/" for all
  std::string point;  // where it is mounted
  std::string type;   // "cgroup2", "cgroup", ...
  std::vector<std::string> super_options;  // "rw", "cpu", "cpuacct", ...
};

// Returns the mounts of a mountinfo text; lines that do not parse are
// left out. mountinfo's \ooo escapes (space, tab, newline, backslash) are
// undone.
std::vector<Mount> ParseMountInfo(absl::string_view text);

// Returns the directory of cgroup `path` under `mount` (without any
// fs_root). A cgroup outside the mounted part (a cgroup namespace shows "/"
// but mounts a subtree, or the reverse) reads the mount point itself.
std::string CgroupDirectory(const Mount& mount, absl::string_view path);

// Returns whether `mount` is a cgroup v1 hierarchy holding `controller`
// ("cpu", "cpuset", ...).
bool HoldsV1Controller(const Mount& mount, absl::string_view controller);

// Returns the cgroup directory `dir` and each of its ancestors up to the
// mount point's `top` (both as CgroupDirectory() gives them), `dir` first:
// the cgroups whose limits bind a process in `dir`.
std::vector<std::string> CgroupAndAncestors(std::string dir,
                                            const std::string& top);

// The cgroups of a process, from a /proc/<pid>/cgroup text (cgroups(7):
// lines "hierarchy-ID:controller-list:cgroup-path"). A value.
struct CgroupMembership {
  std::optional<std::string> v2;          // the "0::" line's path
  std::map<std::string, std::string> v1;  // controller -> path
};

// Returns the membership in <proc_root>/self/cgroup; nullopt when the file
// is missing (not Linux, or no cgroups).
std::optional<CgroupMembership> ReadCgroupMembership(
    const std::string& proc_root);

}  // namespace pinwheel::internal

#endif  // PINWHEEL_LOADER_INTERNAL_CGROUP_MOUNTS_H_
