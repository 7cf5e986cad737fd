// The host's memory bandwidth as a loader's workers meet it: threads copying
// (memcpy) between buffers far larger than the caches, all at once, for a
// fixed time; and the CPUs this process may run on (its affinity mask).
// pinwheel_multi_bench prints the copy rate beside the loaders' rates: the
// worker path moves every byte through host memory once more than the
// gather path (read the sample, write the pinned slot, then the DMA reads
// it), so with several GPUs pulling at once this rate, not PCIe, is the
// worker path's ceiling (Note [the worker path's ceiling] in
// multi_loader_main.cc).
//
// Example:
//   PINWHEEL_ASSIGN_OR_RETURN(
//       MemoryBandwidth b,
//       MeasureMemcpyBandwidth({.threads = AllowedCpus().count}));
//   absl::PrintF("memcpy %.1f GB/s on %d threads\n", b.gbps(), b.threads);
#ifndef PINWHEEL_SAMPLES_BENCH_HOST_MEMORY_BANDWIDTH_H_
#define PINWHEEL_SAMPLES_BENCH_HOST_MEMORY_BANDWIDTH_H_

#include <cstddef>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace pinwheel::bench {

// The CPUs this process may run on (sched_getaffinity): what a launcher's
// binding (mpirun's --bind-to, taskset, Slurm's --cpus-per-task) leaves it.
struct CpuAllowance {
  int count = 0;     // CPUs in the mask; >= 1
  std::string list;  // "0-15", "0,2,4-7"
  int online = 0;    // CPUs online on the machine (sysconf)
};
// Returns this process's allowance, or Internal naming the failed call.
[[nodiscard]] absl::StatusOr<CpuAllowance> AllowedCpus();

struct MemcpyBandwidthOptions {
  int threads = 1;  // copying threads, >= 1 (typically the allowed CPUs)
  // Each thread copies from a source buffer of this size to a destination
  // of the same size (so 2x this per thread is allocated and touched first);
  // >= 1 MiB. Make threads x 2 x this far larger than the last-level cache.
  size_t bytes_per_thread = size_t{64} << 20;
  double seconds = 0.5;  // how long the threads copy, > 0
  // Called once the buffers are allocated and touched, just before the
  // timed copies (a barrier with other processes); an error stops the
  // probe and is returned. Null: none.
  std::function<absl::Status()> ready;
};

struct MemoryBandwidth {
  int threads = 0;
  double bytes_copied = 0;  // memcpy'd bytes (each read once, written once)
  double seconds = 0;       // from the start to the last thread's end
  // Returns bytes copied per second in 1e9 bytes/s (the memory traffic is
  // about twice that: every byte is read and written).
  double gbps() const { return seconds > 0 ? bytes_copied / seconds / 1e9 : 0; }
};

// Runs the copy loop: `threads` threads, each memcpy'ing its source buffer
// to its destination 4 MiB at a time until `seconds` have passed.
// InvalidArgument naming the option for a value out of range;
// ResourceExhausted when the buffers cannot be allocated.
[[nodiscard]] absl::StatusOr<MemoryBandwidth> MeasureMemcpyBandwidth(
    const MemcpyBandwidthOptions& options);

}  // namespace pinwheel::bench

#endif  // PINWHEEL_SAMPLES_BENCH_HOST_MEMORY_BANDWIDTH_H_
