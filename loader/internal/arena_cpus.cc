#include "loader/internal/arena_cpus.h"

#include <algorithm>
#include <cerrno>
#include <memory>
#include <sched.h>
#include <thread>
#include <utility>
#include <vector>

namespace pinwheel::internal {
namespace {

// A mask sized for the machine's largest CPU number.
class CpuMask {
 public:
  explicit CpuMask(int max_cpus)
      : max_cpus_(std::max(max_cpus, CPU_SETSIZE)),
        set_(CPU_ALLOC(max_cpus_)),
        bytes_(CPU_ALLOC_SIZE(max_cpus_)) {
    if (set_ != nullptr) CPU_ZERO_S(bytes_, set_);
  }
  ~CpuMask() {
    if (set_ != nullptr) CPU_FREE(set_);
  }
  CpuMask(const CpuMask&) = delete;
  CpuMask& operator=(const CpuMask&) = delete;

  void Add(int cpu) {
    if (set_ != nullptr && cpu >= 0 && cpu < max_cpus_) {
      CPU_SET_S(cpu, bytes_, set_);
    }
  }
  // The calling thread's mask; false when it cannot be read.
  bool ReadCallingThread() {
    return set_ != nullptr && ::sched_getaffinity(0, bytes_, set_) == 0;
  }
  // Sets the calling thread's mask; the errno when refused, else 0.
  int ApplyToCallingThread() const {
    if (set_ == nullptr) return ENOMEM;
    return ::sched_setaffinity(0, bytes_, set_) == 0 ? 0 : errno;
  }

 private:
  const int max_cpus_;
  cpu_set_t* const set_;
  const size_t bytes_;
};

// The mask a thread had before it entered an observed arena; null outside.
// One per thread: a oneTBB thread works in one arena at a time, and an
// arena entered from inside another (execute() nested) keeps the first
// mask to restore.
thread_local std::unique_ptr<CpuMask> saved_mask;
thread_local int entries = 0;

int MaxCpuOf(const std::vector<int>& cpus) {
  return cpus.empty() ? 1 : *std::max_element(cpus.begin(), cpus.end()) + 1;
}

}  // namespace

ArenaCpus::ArenaCpus(tbb::task_arena& arena, std::vector<int> cpus)
    : tbb::task_scheduler_observer(arena), cpus_(std::move(cpus)) {
  observe(true);
}

ArenaCpus::~ArenaCpus() { observe(false); }

void ArenaCpus::on_scheduler_entry(bool /*is_worker*/) {
  if (entries++ > 0) return;
  auto saved = std::make_unique<CpuMask>(MaxCpuOf(cpus_) + 1024);
  if (!saved->ReadCallingThread()) saved.reset();
  CpuMask wanted(MaxCpuOf(cpus_));
  for (int cpu : cpus_) wanted.Add(cpu);
  const int error = wanted.ApplyToCallingThread();
  if (error != 0) {
    int none = 0;
    first_errno_.compare_exchange_strong(none, error,
                                         std::memory_order_relaxed);
    refused_.fetch_add(1, std::memory_order_relaxed);
    saved.reset();  // nothing to restore
  }
  saved_mask = std::move(saved);
}

void ArenaCpus::on_scheduler_exit(bool /*is_worker*/) {
  if (entries == 0 || --entries > 0) return;
  if (saved_mask != nullptr) {
    saved_mask->ApplyToCallingThread();
    saved_mask.reset();
  }
}

bool ThreadCanRunOn(const std::vector<int>& cpus) {
  if (cpus.empty()) return false;
  bool accepted = false;
  std::thread trial([&] {
    CpuMask wanted(MaxCpuOf(cpus));
    for (int cpu : cpus) wanted.Add(cpu);
    accepted = wanted.ApplyToCallingThread() == 0;
  });
  trial.join();
  return accepted;
}

}  // namespace pinwheel::internal
