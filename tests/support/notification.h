// A one-shot event for tests, on std::mutex so that ThreadSanitizer sees
// its happens-before edge (the system Abseil is not built with TSan: see
// Note [ThreadSanitizer and the system libraries] in pinning/base/mutex.h).
// Same interface as absl::Notification.
#ifndef PINWHEEL_TESTS_SUPPORT_NOTIFICATION_H_
#define PINWHEEL_TESTS_SUPPORT_NOTIFICATION_H_

#include <chrono>
#include <condition_variable>
#include <mutex>

#include "absl/time/time.h"

namespace pinwheel::testing_support {

// Thread-safe.
class Notification {
 public:
  void Notify() {
    std::lock_guard<std::mutex> lock(mu_);
    notified_ = true;
    cv_.notify_all();
  }
  bool HasBeenNotified() const {
    std::lock_guard<std::mutex> lock(mu_);
    return notified_;
  }
  void WaitForNotification() const {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return notified_; });
  }
  // Returns whether it was notified within `timeout`.
  bool WaitForNotificationWithTimeout(absl::Duration timeout) const {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, absl::ToChronoNanoseconds(timeout),
                        [this] { return notified_; });
  }

 private:
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  bool notified_ = false;
};

}  // namespace pinwheel::testing_support

#endif  // PINWHEEL_TESTS_SUPPORT_NOTIFICATION_H_
