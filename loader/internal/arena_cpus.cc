#include "loader/internal/arena_cpus.h"

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

#include "pinning/base/thread_cpus.h"

namespace pinwheel::internal {
namespace {

// Each ArenaCpus's number, and the one whose CPUs the calling thread was
// last moved onto (0: none), so a thread that enters the same arena again
// costs no system call.
std::atomic<uint64_t> next_id{1};
thread_local uint64_t moved_for = 0;

}  // namespace

ArenaCpus::ArenaCpus(tbb::task_arena& arena, const std::vector<int>& cpus)
    : tbb::task_scheduler_observer(arena),
      id_(next_id.fetch_add(1, std::memory_order_relaxed)),
      wanted_(cpus) {
  observe(true);
}

ArenaCpus::~ArenaCpus() { observe(false); }

void ArenaCpus::on_scheduler_entry(bool /*is_worker*/) {
  if (moved_for == id_) return;
  wanted_.ApplyToCallingThread();
  moved_for = id_;
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
