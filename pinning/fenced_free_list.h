// FencedFreeList: the accounting behind every reusable buffer in pinwheel.
// N entries, each free, held, or returned-behind-a-fence. An entry returned
// with a fence becomes free only after that fence has completed.
//
// Both the pinned slot ring (fence: the copy's `copy_done`) and the device
// buffer pool (fence: the consumer's `consumed`) are built on it.
//
// Example:
//   FencedFreeList list(4);
//   absl::StatusOr<int> entry = list.Acquire();   // blocks while none free
//   ... use entry ...
//   list.Release(*entry, copy_done_fence);        // reusable once it fires
//
// Note [waiting outside the lock]
// A fence wait may be a CUDA call (cudaEventSynchronize). pinwheel never
// makes a CUDA call while holding a lock, so Acquire() takes the oldest
// fenced entry out of the list under the lock and waits on its fence after
// releasing it. Fenced entries are kept in release order (FIFO): copies on
// one stream complete in issue order, so the oldest is the first to be done.
//
// Note [a limit on the entries]
// A loader whose prefetch depth is tuned at run time (LoaderOptions::kAuto)
// makes its ring with the most slots it may ever use and lets the free list
// hand out only the first `limit` of them, the lowest free one first, so
// that entries above the limit stay untouched (their memory need not even
// exist) and can be given up once idle (IdleAboveLimit()). With the limit at
// `entries` (the default) nothing changes: the order is the one above.
#ifndef PINWHEEL_PINNING_FENCED_FREE_LIST_H_
#define PINWHEEL_PINNING_FENCED_FREE_LIST_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

#include "pinning/fence.h"

namespace pinwheel {

// Counters of a FencedFreeList; a consistent snapshot.
struct FreeListStats {
  int entries = 0;            // total entries
  int held = 0;               // acquired and not yet released
  int fenced = 0;             // released, fence not yet known complete
  int64_t acquires = 0;       // successful acquires
  int64_t acquire_waits = 0;  // acquires that found no free entry: they
                              // blocked, or waited on a fence
  absl::Duration time_waited = absl::ZeroDuration();  // blocked in Acquire
  // The part of time_waited spent on an entry's fence (for the ring: the
  // copy out of the slot still running), the rest having found every entry
  // held (for the ring: slots being filled, or not yet handed to the copy).
  absl::Duration fence_time_waited = absl::ZeroDuration();
};

// Thread-safe.
class FencedFreeList {
 public:
  // REQUIRES: entries > 0.
  explicit FencedFreeList(int entries);
  FencedFreeList(const FencedFreeList&) = delete;
  FencedFreeList& operator=(const FencedFreeList&) = delete;

  // Returns the index of a free entry, blocking while none is free and
  // waiting (outside the lock) on the oldest fence when all are fenced.
  // Cancelled once Cancel() has been called. A fence wait in progress is not
  // interrupted by Cancel(): fences mark queued device work, which always
  // completes; the call then returns Cancelled. The fence's error if its wait
  // failed (the entry is then lost to the list, which is being torn down).
  // Sets `*waited` (when given) to whether it found no free entry (see
  // FreeListStats::acquire_waits).
  [[nodiscard]] absl::StatusOr<int> Acquire(bool* waited = nullptr)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Returns a free entry without blocking, or nullopt. Never waits on a
  // fence; a fenced entry is taken only when its fence has completed.
  [[nodiscard]] std::optional<int> TryAcquire() ABSL_LOCKS_EXCLUDED(mu_);

  // Gives `entry` back. With a fence it is reusable once the fence has
  // completed; with nullptr at once.
  // REQUIRES: `entry` was acquired and not released since.
  void Release(int entry, std::shared_ptr<const Fence> fence)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Wakes every blocked Acquire() with Cancelled; later calls fail at once.
  // Idempotent.
  void Cancel() ABSL_LOCKS_EXCLUDED(mu_);

  // Waits (outside the lock) for the fence of every entry released behind
  // one, making them free; for teardown, before the memory is freed.
  // Returns the first fence error.
  absl::Status WaitForFences() ABSL_LOCKS_EXCLUDED(mu_);

  // Undoes Cancel(): Acquire() blocks again (for restarting a pipeline).
  void Resume() ABSL_LOCKS_EXCLUDED(mu_);

  // Returns the number of entries not free (held or behind a fence).
  int InUse() const ABSL_LOCKS_EXCLUDED(mu_);

  // Lets Acquire() and TryAcquire() hand out only entries 0..limit-1 (see
  // Note [a limit on the entries]); entries at or above it that are held
  // stay held until released. REQUIRES: 1 <= limit <= entries.
  void SetLimit(int limit) ABSL_LOCKS_EXCLUDED(mu_);
  int limit() const ABSL_LOCKS_EXCLUDED(mu_);
  // Returns the entries at or above the limit that are free now: neither
  // held nor behind a fence that has not completed (fences are queried
  // outside the lock, never waited on). Until the limit is raised again no
  // Acquire() hands them out, so the caller may free what they stand for.
  std::vector<int> IdleAboveLimit() ABSL_LOCKS_EXCLUDED(mu_);

  FreeListStats stats() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Fenced {
    int entry;
    std::shared_ptr<const Fence> fence;
  };
  bool Available() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Takes a free entry under the limit out of free_; -1 when none.
  int TakeFree() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Returns the position in fenced_ of the oldest entry under the limit;
  // -1 when none.
  int OldestFencedUnderLimit() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const int entries_;
  mutable absl::Mutex mu_;
  std::vector<int> free_ ABSL_GUARDED_BY(mu_);
  std::deque<Fenced> fenced_ ABSL_GUARDED_BY(mu_);
  std::vector<bool> held_ ABSL_GUARDED_BY(mu_);
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  int limit_ ABSL_GUARDED_BY(mu_);  // entries handed out: 0..limit_-1
  int64_t acquires_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t acquire_waits_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Duration time_waited_ ABSL_GUARDED_BY(mu_) = absl::ZeroDuration();
  absl::Duration fence_time_waited_ ABSL_GUARDED_BY(mu_) = absl::ZeroDuration();
};

}  // namespace pinwheel

#endif  // PINWHEEL_PINNING_FENCED_FREE_LIST_H_
