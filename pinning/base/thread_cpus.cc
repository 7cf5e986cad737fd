#include "pinning/base/thread_cpus.h"

#include <algorithm>
#include <cerrno>
#include <pthread.h>
#include <sched.h>
#include <vector>

namespace pinwheel::internal {

CpuMask::CpuMask(int max_cpus)
    : max_cpus_(std::max(max_cpus, CPU_SETSIZE)),
      set_(CPU_ALLOC(max_cpus_)),
      bytes_(CPU_ALLOC_SIZE(max_cpus_)) {
  if (set_ != nullptr) CPU_ZERO_S(bytes_, set_);
}

CpuMask::CpuMask(const std::vector<int>& cpus)
    : CpuMask(cpus.empty() ? 1
                           : *std::max_element(cpus.begin(), cpus.end()) + 1) {
  for (int cpu : cpus) Add(cpu);
}

CpuMask::~CpuMask() {
  if (set_ != nullptr) CPU_FREE(set_);
}

void CpuMask::Add(int cpu) {
  if (set_ != nullptr && cpu >= 0 && cpu < max_cpus_) {
    CPU_SET_S(cpu, bytes_, set_);
  }
}

int CpuMask::ApplyToCallingThread() const {
  if (set_ == nullptr) return ENOMEM;
  return ::sched_setaffinity(0, bytes_, set_) == 0 ? 0 : errno;
}

int CpuMask::ApplyTo(pthread_t thread) const {
  if (set_ == nullptr) return ENOMEM;
  return ::pthread_setaffinity_np(thread, bytes_, set_);
}

}  // namespace pinwheel::internal
