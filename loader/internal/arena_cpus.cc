#include "loader/internal/arena_cpus.h"

#include <algorithm>
#include <cerrno>
#include <memory>
#include <sched.h>
#include <thread>
#include <utility>
#include <vector>

#include "pinning/base/thread_cpus.h"

namespace pinwheel::internal {
namespace {

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
    : tbb::task_scheduler_observer(arena),
      cpus_(std::move(cpus)),
      wanted_(cpus_) {
  observe(true);
}

ArenaCpus::~ArenaCpus() { observe(false); }

void ArenaCpus::on_scheduler_entry(bool /*is_worker*/) {
  if (entries++ > 0) return;
  // At least CPU_SETSIZE (1024) CPUs: a wider machine's mask is not read,
  // and the thread then keeps the share when it leaves.
  auto saved = std::make_unique<CpuMask>(MaxCpuOf(cpus_));
  if (!saved->ReadCallingThread()) saved.reset();
  const int error = wanted_.ApplyToCallingThread();
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
  std::thread trial(
      [&] { accepted = CpuMask(cpus).ApplyToCallingThread() == 0; });
  trial.join();
  return accepted;
}

}  // namespace pinwheel::internal
