// ManualFence: a Fence the test completes (or fails) by hand, for checking
// that pinned slots and device buffers are reused only after their fence.
//
// Example:
//   auto fence = std::make_shared<ManualFence>();
//   ring->Recycle(slot.index, fence);   // not reusable yet
//   fence->Complete();                  // now it is
#ifndef PINWHEEL_TESTS_SUPPORT_MANUAL_FENCE_H_
#define PINWHEEL_TESTS_SUPPORT_MANUAL_FENCE_H_

#include <atomic>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

#include "pinning/base/mutex.h"
#include "pinning/fence.h"

namespace pinwheel::testing_support {

// Thread-safe.
class ManualFence final : public Fence {
 public:
  // Completes the fence: Query() turns true and every Wait() returns OK.
  void Complete() { Finish(absl::OkStatus()); }
  // Fails the fence: Wait() returns `error`, Query() returns it too.
  void Fail(absl::Status error) { Finish(std::move(error)); }

  absl::StatusOr<bool> Query() const override {
    internal::MutexLock lock(&mu_);
    queries_.fetch_add(1, std::memory_order_relaxed);
    if (!done_) return false;
    if (!status_.ok()) return status_;
    return true;
  }

  absl::Status Wait() const override {
    waits_.fetch_add(1, std::memory_order_relaxed);
    internal::MutexLock lock(&mu_);
    internal::Await(mu_,
                    [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return done_; });
    return status_;
  }

  // Returns how many times Wait() was entered (finished or not).
  int waits() const { return waits_.load(std::memory_order_relaxed); }
  int queries() const { return queries_.load(std::memory_order_relaxed); }

 private:
  void Finish(absl::Status status) {
    internal::MutexLock lock(&mu_);
    status_ = std::move(status);
    done_ = true;
  }

  mutable absl::Mutex mu_;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status status_ ABSL_GUARDED_BY(mu_);
  mutable std::atomic<int> waits_{0};
  mutable std::atomic<int> queries_{0};
};

}  // namespace pinwheel::testing_support

#endif  // PINWHEEL_TESTS_SUPPORT_MANUAL_FENCE_H_
