// Process usage figures the benchmark reports: CPU time of the whole process
// (every worker thread included) and its resident set size.
//
// Example:
//   double cpu0 = ProcessCpuSeconds();
//   ... timed loop ...
//   double cpu_per_batch = (ProcessCpuSeconds() - cpu0) / batches;
#ifndef PINWHEEL_SAMPLES_BENCH_PROCESS_USAGE_H_
#define PINWHEEL_SAMPLES_BENCH_PROCESS_USAGE_H_

#include <chrono>
#include <cstddef>
#include <cstdio>
#include <sys/resource.h>
#include <unistd.h>

namespace pinwheel::bench {

// Returns user + system CPU seconds of this process so far
// (getrusage(RUSAGE_SELF)), or 0 if the call fails.
inline double ProcessCpuSeconds() {
  rusage usage{};
  if (getrusage(RUSAGE_SELF, &usage) != 0) return 0;
  auto seconds = [](const timeval& t) {
    return static_cast<double>(t.tv_sec) +
           static_cast<double>(t.tv_usec) * 1e-6;
  };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

// Returns the resident set size in bytes (/proc/self/statm, second field),
// or 0 where it cannot be read.
inline size_t ResidentBytes() {
  std::FILE* statm = std::fopen("/proc/self/statm", "r");
  if (statm == nullptr) return 0;
  unsigned long size_pages = 0, resident_pages = 0;
  const int read = std::fscanf(statm, "%lu %lu", &size_pages, &resident_pages);
  std::fclose(statm);
  if (read != 2) return 0;
  return static_cast<size_t>(resident_pages) *
         static_cast<size_t>(sysconf(_SC_PAGESIZE));
}

// Returns seconds on a monotonic clock.
inline double MonotonicSeconds() {
  return std::chrono::duration<double>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace pinwheel::bench

#endif  // PINWHEEL_SAMPLES_BENCH_PROCESS_USAGE_H_
