// Happens-before annotations for ThreadSanitizer, and the lock and wait
// helpers that carry them.
//
// Note [ThreadSanitizer and the system libraries]
// Debian's Abseil and oneTBB are not built with -fsanitize=thread, so TSan
// cannot see the happens-before edges made inside absl::Mutex or oneTBB's
// task queues, and reports races on data they do protect. pinwheel marks
// those edges itself:
//   - every absl::Mutex critical section in the libraries goes through
//     internal::MutexLock / internal::Await below, which release the mutex's
//     address before unlocking and acquire it after locking (a condition is
//     evaluated with the mutex held, possibly by another thread, inside
//     Abseil's code: it acquires before and releases after);
//   - data handed between oneTBB tasks is released by the task that wrote it
//     and acquired by the task that reads it (TsanRelease / TsanAcquire on
//     the object handed over).
// In builds without TSan all of it compiles to the plain calls.
#ifndef PINWHEEL_PINNING_BASE_MUTEX_H_
#define PINWHEEL_PINNING_BASE_MUTEX_H_

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

#if defined(__SANITIZE_THREAD__)
#define PINWHEEL_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define PINWHEEL_TSAN 1
#endif
#endif

#ifdef PINWHEEL_TSAN
extern "C" void __tsan_acquire(void* addr);
extern "C" void __tsan_release(void* addr);
#endif

namespace pinwheel::internal {

// Marks everything this thread did so far as happening before a later
// TsanAcquire(p) on any thread.
inline void TsanRelease([[maybe_unused]] const void* p) {
#ifdef PINWHEEL_TSAN
  __tsan_release(const_cast<void*>(p));
#endif
}

// See TsanRelease().
inline void TsanAcquire([[maybe_unused]] const void* p) {
#ifdef PINWHEEL_TSAN
  __tsan_acquire(const_cast<void*>(p));
#endif
}

// absl::MutexLock that TSan can see through. Not thread-safe (a scope).
class ABSL_SCOPED_LOCKABLE MutexLock {
 public:
  explicit MutexLock(absl::Mutex* mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu)
      : mu_(mu) {
    mu_->Lock();
    TsanAcquire(mu_);
  }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;
  ~MutexLock() ABSL_UNLOCK_FUNCTION() {
    TsanRelease(mu_);
    mu_->Unlock();
  }

 private:
  absl::Mutex* const mu_;
};

// Returns `condition` wrapped to acquire the mutex's address before it is
// evaluated and release it after: Abseil evaluates conditions with the mutex
// held, on whichever thread holds it.
template <typename Condition>
auto Annotated(absl::Mutex& mu, const Condition& condition) {
  return [&mu, &condition]() {
    TsanAcquire(&mu);
    const bool met = condition();
    TsanRelease(&mu);
    return met;
  };
}

// mu.Await(condition) that TSan can see through.
// REQUIRES: mu held; `condition` a callable returning bool.
template <typename Condition>
void Await(absl::Mutex& mu, const Condition& condition) {
  const auto annotated = Annotated(mu, condition);
  const absl::Condition wait_for(&annotated);
  TsanRelease(&mu);  // after building the Condition other threads evaluate
  mu.Await(wait_for);
  TsanAcquire(&mu);
}

// mu.AwaitWithDeadline(condition, deadline) that TSan can see through.
// Returns whether the condition holds.
template <typename Condition>
bool AwaitWithDeadline(absl::Mutex& mu, const Condition& condition,
                       absl::Time deadline) {
  const auto annotated = Annotated(mu, condition);
  const absl::Condition wait_for(&annotated);
  TsanRelease(&mu);
  const bool met = mu.AwaitWithDeadline(wait_for, deadline);
  TsanAcquire(&mu);
  return met;
}

}  // namespace pinwheel::internal

#endif  // PINWHEEL_PINNING_BASE_MUTEX_H_
