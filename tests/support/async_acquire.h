// Helpers for tests of blocking calls: run Acquire() on a thread of its own
// and look at it from the test's thread, and wait (bounded) for a condition.
// The bounds only turn hangs into failures; no pass depends on timing.
#ifndef PINWHEEL_TESTS_SUPPORT_ASYNC_ACQUIRE_H_
#define PINWHEEL_TESTS_SUPPORT_ASYNC_ACQUIRE_H_

#include <gtest/gtest.h>
#include <thread>
#include <utility>

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

#include "tests/support/notification.h"

namespace pinwheel::testing_support {

// Longest a test waits for a call that should return.
inline constexpr absl::Duration kHangLimit = absl::Seconds(30);

// Runs owner->Acquire() on its own thread (a FencedFreeList, PinnedRing or
// DeviceBufferPool). Not thread-safe; joins the thread when destroyed.
template <typename Owner>
class AsyncAcquire {
 public:
  using ResultType = decltype(std::declval<Owner&>().Acquire());

  explicit AsyncAcquire(Owner* owner)
      : thread_([this, owner] {
          result_ = owner->Acquire();
          returned_.Notify();
        }) {}
  AsyncAcquire(const AsyncAcquire&) = delete;
  AsyncAcquire& operator=(const AsyncAcquire&) = delete;
  ~AsyncAcquire() { thread_.join(); }

  // Returns whether Acquire() has returned.
  bool returned() const { return returned_.HasBeenNotified(); }
  // Returns what Acquire() returned (fails the test and returns
  // DeadlineExceeded if it is still blocked after kHangLimit).
  ResultType Result() {
    if (!returned_.WaitForNotificationWithTimeout(kHangLimit)) {
      ADD_FAILURE() << "Acquire() still blocked after " << kHangLimit;
      return absl::DeadlineExceededError("hang");
    }
    return result_;
  }

 private:
  Notification returned_;
  ResultType result_ = absl::UnknownError("not run");
  std::thread thread_;
};

// Returns once `done()` holds, or false after kHangLimit.
template <typename F>
bool Eventually(F done) {
  const absl::Time deadline = absl::Now() + kHangLimit;
  while (!done()) {
    if (absl::Now() > deadline) return false;
    absl::SleepFor(absl::Microseconds(200));
  }
  return true;
}

}  // namespace pinwheel::testing_support

#endif  // PINWHEEL_TESTS_SUPPORT_ASYNC_ACQUIRE_H_
