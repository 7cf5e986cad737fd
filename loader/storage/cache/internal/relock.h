// Leaving and re-entering, for a while, a critical section that an
// internal::MutexLock holds (pinning/base/mutex.h), visibly to TSan.
#ifndef PINWHEEL_LOADER_STORAGE_CACHE_INTERNAL_RELOCK_H_
#define PINWHEEL_LOADER_STORAGE_CACHE_INTERNAL_RELOCK_H_

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

#include "pinning/base/mutex.h"

namespace pinwheel::internal {

inline void Unlock(absl::Mutex& mu) ABSL_UNLOCK_FUNCTION(mu) {
  TsanRelease(&mu);
  mu.Unlock();
}
inline void Relock(absl::Mutex& mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) {
  mu.Lock();
  TsanAcquire(&mu);
}

}  // namespace pinwheel::internal

#endif  // PINWHEEL_LOADER_STORAGE_CACHE_INTERNAL_RELOCK_H_
