// Note [a gate without a lock on its fast path]
// Under kAuto every chunk of a batch's reads passes the gate: W1's 256
// samples of 150 KB are 256 chunks a batch, on up to 15 threads, so a
// mutex taken twice a chunk would be the loader's most contended lock. So
// a place is taken with a compare-and-swap on `holders_` below `active_`,
// and given back with a decrement; only a thread that finds no place takes
// the mutex, counts itself in `waiting_` and waits on a condition reading
// the atomics. Exit() takes the mutex only when someone waits: releasing it
// makes absl::Mutex re-evaluate the waiters' conditions. No wake-up is
// lost: a waiter counts itself (seq_cst) before it first evaluates its
// condition, and Exit() decrements `holders_` (seq_cst) before it reads
// `waiting_`, so either the waiter sees the place free or Exit() sees the
// waiter. The times are summed in relaxed atomics, read once a window.
#include "loader/pipeline/worker_gate.h"

#include <algorithm>

#include "absl/time/clock.h"

#include "pinning/base/mutex.h"

namespace pinwheel::internal {

WorkerGate::WorkerGate(int active, const StopFlag& stop)
    : stop_(stop), active_(std::max(1, active)) {}

bool WorkerGate::TryTake() {
  int held = holders_.load();
  while (held < active_.load()) {
    if (holders_.compare_exchange_weak(held, held + 1)) return true;
  }
  return false;
}

WorkerGate::Ticket WorkerGate::Enter() {
  if (TryTake()) return {.entered = absl::Now()};
  const absl::Time start = absl::Now();
  {
    MutexLock lock(&mu_);
    waiting_.fetch_add(1);
    while (!TryTake()) {
      if (stop_.stopping()) {  // a stopping loader passes every thread
        holders_.fetch_add(1);
        break;
      }
      Await(mu_, [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
        return holders_.load() < active_.load() || stop_.stopping();
      });
    }
    waiting_.fetch_sub(1);
  }
  const absl::Time now = absl::Now();
  parked_ns_.fetch_add(absl::ToInt64Nanoseconds(now - start),
                       std::memory_order_relaxed);
  parks_.fetch_add(1, std::memory_order_relaxed);
  return {.entered = now};
}

void WorkerGate::Exit(const Ticket& ticket) {
  busy_ns_.fetch_add(absl::ToInt64Nanoseconds(absl::Now() - ticket.entered),
                     std::memory_order_relaxed);
  holders_.fetch_sub(1);
  if (waiting_.load() > 0) Wake();
}

void WorkerGate::SetActive(int active) {
  active_.store(std::max(1, active));
  Wake();
}

void WorkerGate::Wake() {
  // Releasing the lock re-evaluates the waiters' conditions.
  MutexLock lock(&mu_);
}

WorkerGate::Window WorkerGate::TakeWindow() {
  Window taken;
  taken.busy = absl::Nanoseconds(busy_ns_.exchange(0));
  taken.parked = absl::Nanoseconds(parked_ns_.exchange(0));
  taken.parks = parks_.exchange(0);
  return taken;
}

}  // namespace pinwheel::internal
