#include "loader/internal/arena_cpus.h"

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

#include "pinning/base/mutex.h"
#include "pinning/base/thread_cpus.h"

namespace pinwheel::internal {
namespace {

// Each ArenaCpus's number, and the one whose CPUs the calling thread was
// last moved onto (0: none), so a thread that enters the same arena again
// costs no system call.
std::atomic<uint64_t> next_id{1};
thread_local uint64_t moved_for = 0;

}  // namespace

// Note [ArenaCpus and ThreadSanitizer]
// oneTBB calls an observer only after observe(true) and no longer once
// observe(false) has returned (it waits for the callbacks running); both
// edges are made inside libtbb, where ThreadSanitizer cannot see them (Note
// [ThreadSanitizer and the system libraries], pinning/base/mutex.h). So the
// constructor releases `this` before observing and each callback acquires
// it; each callback releases it when done and the destructor acquires it
// after observe(false).
ArenaCpus::ArenaCpus(tbb::task_arena& arena, const std::vector<int>& cpus)
    : tbb::task_scheduler_observer(arena),
      id_(next_id.fetch_add(1, std::memory_order_relaxed)),
      wanted_(cpus) {
  TsanRelease(this);
  observe(true);
}

ArenaCpus::~ArenaCpus() {
  observe(false);
  TsanAcquire(this);
}

void ArenaCpus::on_scheduler_entry(bool /*is_worker*/) {
  TsanAcquire(this);
  if (moved_for != id_) {
    wanted_.ApplyToCallingThread();
    moved_for = id_;
  }
  TsanRelease(this);
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
