// Host-memory admission: one check, before anything is allocated, that the
// host memory a loader will hold fits the machine and the process's cgroup.
//
// A loader holds host memory in two places: the pinned ring (prefetch slots
// of one batch each, page-locked on the cuda backend) and, on the host
// backend, the "device" buffer pool (ordinary host memory there). Each
// allocation also checks itself against physical RAM, but two allocations
// that each fit can still add up past it, and a container's cgroup limit is
// usually far below it: the kernel then kills the process while the pages
// are touched. AdmitHostMemory() checks their sum against the smallest of
// physical RAM and the cgroup memory limit (pinning/host_memory_limits.h,
// which also says why RLIMIT_MEMLOCK is not one) and returns
// ResourceExhausted naming every part, the sum and the limit that was hit.
//
// Example:
//   PINWHEEL_RETURN_IF_ERROR(AdmitHostMemory(
//       {.ring_slots = 4, .slot_bytes = 64 << 20,
//        .pool_buffers = 2, .pool_buffer_bytes = 64 << 20}));
#ifndef PINWHEEL_LOADER_PIPELINE_MEMORY_ADMISSION_H_
#define PINWHEEL_LOADER_PIPELINE_MEMORY_ADMISSION_H_

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"

#include "pinning/host_memory_limits.h"

namespace pinwheel::internal {

// The host memory one loader will allocate; messages use the loader's
// option names (prefetch, batch_size, device_buffers). A value;
// thread-compatible.
struct HostMemoryPlan {
  // The pinned ring: `prefetch` slots of slot_bytes, each rounded up to 4096
  // as PinnedRing does.
  int ring_slots = 0;
  size_t slot_bytes = 0;
  // What a slot holds, for the message only (0: not said).
  int64_t batch_size = 0;
  size_t sample_bytes = 0;
  // The device buffer pool when it lives in host memory (the host backend);
  // 0 buffers on a GPU, whose pool is device memory.
  int pool_buffers = 0;
  size_t pool_buffer_bytes = 0;
  // The gather path: dataset memory this loader registers (page-locks)
  // that no other registration in the process holds yet (a file copy
  // included). 0 on the worker path.
  uint64_t registered_bytes = 0;
};

// OK when the plan's bytes fit min(physical RAM, cgroup limit) of `limits`;
// ResourceExhausted otherwise, naming each part (count × bytes = total), the
// sum and the limit hit (with the cgroup file), e.g.
//   "host memory: pinned ring of prefetch = 4 slots × 1073741824 bytes
//    (batch_size 64 × 16777216 bytes per sample) = 4294967296 bytes + device
//    buffer pool in host memory (host backend) of device_buffers = 2 ×
//    1073741824 bytes = 2147483648 bytes = 6442450944 bytes (6144 MiB) in
//    all, more than the cgroup memory limit 4294967296 bytes (4096 MiB) of
//    /sys/fs/cgroup/memory.max; lower prefetch, batch_size or device_buffers"
// ResourceExhausted too when the sum overflows 64 bits. Allocates nothing.
// Thread-safe.
[[nodiscard]] absl::Status AdmitHostMemory(
    const HostMemoryPlan& plan,
    const MemoryLimits& limits = ReadMemoryLimits());

// Returns the bytes left under min(physical RAM, cgroup limit) of `limits`
// once the plan is allocated: 0 when it does not fit, UINT64_MAX when no
// limit is known. Thread-safe.
uint64_t HostMemoryHeadroom(const HostMemoryPlan& plan,
                            const MemoryLimits& limits = ReadMemoryLimits());

}  // namespace pinwheel::internal

#endif  // PINWHEEL_LOADER_PIPELINE_MEMORY_ADMISSION_H_
