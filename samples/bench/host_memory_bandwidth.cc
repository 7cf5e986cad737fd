#include "samples/bench/host_memory_bandwidth.h"

#include <algorithm>
#include <atomic>
#include <barrier>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <sched.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

#include "samples/bench/process_usage.h"

namespace pinwheel::bench {

absl::StatusOr<CpuAllowance> AllowedCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) {
    return absl::ErrnoToStatus(errno, "sched_getaffinity(0)");
  }
  CpuAllowance allowance;
  allowance.count = CPU_COUNT(&set);
  allowance.online = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  // Ranges: "0-3,8,10-11".
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (!CPU_ISSET(cpu, &set)) continue;
    int last = cpu;
    while (last + 1 < CPU_SETSIZE && CPU_ISSET(last + 1, &set)) ++last;
    absl::StrAppend(&allowance.list, allowance.list.empty() ? "" : ",", cpu);
    if (last > cpu) absl::StrAppend(&allowance.list, "-", last);
    cpu = last;
  }
  return allowance;
}

absl::StatusOr<MemoryBandwidth> MeasureMemcpyBandwidth(
    const MemcpyBandwidthOptions& options) {
  if (options.threads < 1) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "memcpy bandwidth: threads = %d: must be >= 1", options.threads));
  }
  if (options.bytes_per_thread < (size_t{1} << 20)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "memcpy bandwidth: bytes_per_thread = %d: must be >= 1 MiB",
        options.bytes_per_thread));
  }
  if (!(options.seconds > 0)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "memcpy bandwidth: seconds = %g: must be > 0", options.seconds));
  }
  const int n = options.threads;
  const size_t bytes = options.bytes_per_thread;
  constexpr size_t kChunk = size_t{4} << 20;
  struct PerThread {
    bool allocated = false;
    double bytes = 0;
    double end = 0;
  };
  std::vector<PerThread> per_thread(n);
  std::atomic<bool> stop{false};
  std::atomic<bool> abandon{false};
  absl::Status ready_status;
  std::atomic<double> start{0};  // set once, by the barrier's completion
  // Every thread allocates and touches its own buffers (on its own NUMA
  // node, first touch), then all wait here; the completion runs `ready`.
  std::barrier allocated(n, [&]() noexcept {
    for (const PerThread& t : per_thread) {
      if (!t.allocated) abandon = true;
    }
    if (!abandon && options.ready) ready_status = options.ready();
    if (!ready_status.ok()) abandon = true;
    start = MonotonicSeconds();
  });
  std::vector<std::thread> threads;
  threads.reserve(n);
  for (int i = 0; i < n; ++i) {
    threads.emplace_back([&, i] {
      std::unique_ptr<char[]> source(new (std::nothrow) char[bytes]);
      std::unique_ptr<char[]> destination(new (std::nothrow) char[bytes]);
      PerThread& me = per_thread[i];
      me.allocated = source != nullptr && destination != nullptr;
      if (me.allocated) {
        std::memset(source.get(), i + 1, bytes);
        std::memset(destination.get(), 0, bytes);
      }
      allocated.arrive_and_wait();
      if (abandon) return;
      size_t offset = 0;
      while (!stop.load(std::memory_order_relaxed)) {
        const size_t chunk = std::min(kChunk, bytes - offset);
        std::memcpy(destination.get() + offset, source.get() + offset, chunk);
        me.bytes += static_cast<double>(chunk);
        offset = offset + chunk == bytes ? 0 : offset + chunk;
      }
      me.end = MonotonicSeconds();
    });
  }
  // The copies run for `seconds` from the release (the barrier's
  // completion sets `start` before any thread passes it).
  while (!abandon && start == 0) std::this_thread::yield();
  if (!abandon) {
    std::this_thread::sleep_for(std::chrono::duration<double>(options.seconds));
  }
  stop = true;
  for (std::thread& t : threads) t.join();
  if (!ready_status.ok()) return ready_status;
  if (abandon) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "memcpy bandwidth: cannot allocate 2 x %d bytes for each of %d "
        "threads",
        bytes, n));
  }
  MemoryBandwidth result{.threads = n};
  for (const PerThread& t : per_thread) {
    result.bytes_copied += t.bytes;
    result.seconds = std::max(result.seconds, t.end - start.load());
  }
  return result;
}

}  // namespace pinwheel::bench
