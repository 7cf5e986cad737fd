// Thread CPU masks sized for the machine: set the calling thread's or
// another thread's to a list of CPUs. The loader moves its own threads
// off a launcher's one-core binding with these (loader/worker_cpus.h).
//
// Example:
//   const CpuMask mask(std::vector<int>{16, 17, 18, 19});
//   if (const int error = mask.ApplyTo(thread.native_handle()); error != 0) {
//     // the kernel refused (errno): the thread keeps its mask
//   }
#ifndef PINWHEEL_PINNING_BASE_THREAD_CPUS_H_
#define PINWHEEL_PINNING_BASE_THREAD_CPUS_H_

#include <cstddef>
#include <pthread.h>
#include <sched.h>
#include <vector>

namespace pinwheel::internal {

// Owns a cpu_set_t of at least `max_cpus` CPUs (CPU_ALLOC). Not
// thread-safe; the threads it reads or sets may be any.
class CpuMask {
 public:
  // An empty mask of CPUs 0 .. max(max_cpus, CPU_SETSIZE) - 1.
  explicit CpuMask(int max_cpus);
  // The mask of `cpus`.
  explicit CpuMask(const std::vector<int>& cpus);
  ~CpuMask();
  CpuMask(const CpuMask&) = delete;
  CpuMask& operator=(const CpuMask&) = delete;

  void Add(int cpu);
  // Sets the calling thread's mask; returns 0, or the errno when refused.
  int ApplyToCallingThread() const;
  // Sets `thread`'s mask; returns 0, or the error number when refused.
  int ApplyTo(pthread_t thread) const;

 private:
  const int max_cpus_;
  cpu_set_t* const set_;
  const size_t bytes_;
};

}  // namespace pinwheel::internal

#endif  // PINWHEEL_PINNING_BASE_THREAD_CPUS_H_
