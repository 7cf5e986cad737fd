#include "loader/pipeline/worker_gate.h"

#include <algorithm>

#include "absl/time/clock.h"

#include "pinning/base/mutex.h"

namespace pinwheel::internal {

WorkerGate::WorkerGate(int active, const StopFlag& stop)
    : stop_(stop), active_(std::max(1, active)) {}

WorkerGate::Ticket WorkerGate::Enter() {
  MutexLock lock(&mu_);
  if (holders_ >= active_ && !stop_.stopping()) {
    const absl::Time start = absl::Now();
    Await(mu_, [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return holders_ < active_ || stop_.stopping();
    });
    window_.parked += absl::Now() - start;
    ++window_.parks;
  }
  ++holders_;
  return {.entered = absl::Now()};
}

void WorkerGate::Exit(const Ticket& ticket) {
  const absl::Time now = absl::Now();
  MutexLock lock(&mu_);
  --holders_;
  window_.busy += now - ticket.entered;
}

void WorkerGate::SetActive(int active) {
  MutexLock lock(&mu_);
  active_ = std::max(1, active);
}

int WorkerGate::active() const {
  MutexLock lock(&mu_);
  return active_;
}

void WorkerGate::Wake() {
  // Taking the lock re-evaluates the waiters' conditions on release.
  MutexLock lock(&mu_);
}

WorkerGate::Window WorkerGate::TakeWindow() {
  MutexLock lock(&mu_);
  Window taken = window_;
  window_ = Window();
  return taken;
}

}  // namespace pinwheel::internal
