// Host memory limits: how much memory this process may hold, read from the
// machine's physical RAM and the process's cgroup memory limit (v1 or v2,
// the smallest along the cgroup's ancestors).
//
// A loader checks the host memory it will hold against these before it
// allocates anything (loader/pipeline/memory_admission.h): a container's
// cgroup limit is usually far below RAM, and the kernel kills a process
// that passes it while its pages are touched.
//
// RLIMIT_MEMLOCK is not a limit here: cudaHostAlloc memory is pinned by the
// NVIDIA driver, not by mlock(), and is not charged to it (measured with
// driver 580.159.04 on an H100: an unprivileged process with `ulimit -l 64`
// allocated and touched 1 GiB with cudaHostAlloc), and the host backend
// pins nothing.
//
// Example:
//   const MemoryLimits limits = ReadMemoryLimits();
//   if (limits.cgroup_bytes) {
//     std::printf("cgroup limit %llu bytes (%s)\n", *limits.cgroup_bytes,
//                 limits.cgroup_file.c_str());
//   }
#ifndef PINWHEEL_PINNING_HOST_MEMORY_LIMITS_H_
#define PINWHEEL_PINNING_HOST_MEMORY_LIMITS_H_

#include <cstdint>
#include <optional>
#include <string>

namespace pinwheel {

// Where the limits are read from; tests point these at files of their own.
struct MemoryLimitSources {
  // The cgroup filesystem: cgroup v2 is read from <root>/<path>/memory.max
  // (the path from the "0::" line), v1 from
  // <root>/memory/<path>/memory.limit_in_bytes; every ancestor up to the
  // root is read too, and the smallest limit counts.
  std::string cgroup_root = "/sys/fs/cgroup";
  // The process's cgroup membership (cgroups(7)).
  std::string proc_self_cgroup = "/proc/self/cgroup";
  // Physical RAM in bytes; nullopt reads sysconf(_SC_PHYS_PAGES).
  std::optional<uint64_t> physical_bytes;
};

// The limits found. Absent means no limit of that kind was found. A value;
// thread-compatible.
struct MemoryLimits {
  std::optional<uint64_t> physical_bytes;
  std::optional<uint64_t> cgroup_bytes;
  std::string cgroup_file;  // the file that set cgroup_bytes
};

// Reads the limits; never fails (a missing or unreadable file, "max", or a
// v1 "unlimited" value of 2^63 rounded down to a page means no limit).
// Thread-safe.
MemoryLimits ReadMemoryLimits(const MemoryLimitSources& sources = {});

}  // namespace pinwheel

#endif  // PINWHEEL_PINNING_HOST_MEMORY_LIMITS_H_
