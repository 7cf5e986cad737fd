#include "pinning/fenced_free_list.h"

#include <algorithm>
#include <utility>

#include "absl/status/status.h"

#include "pinning/base/mutex.h"

namespace pinwheel {

FencedFreeList::FencedFreeList(int entries)
    : entries_(entries), held_(entries, false) {
  free_.reserve(entries);
  // Hand out entry 0 first: fill the free list in reverse, pop from the back.
  for (int i = entries - 1; i >= 0; --i) free_.push_back(i);
}

absl::StatusOr<int> FencedFreeList::Acquire(bool* waited) {
  std::shared_ptr<const Fence> fence;
  int entry = -1;
  bool counted_wait = false;
  {
    internal::MutexLock lock(&mu_);
    if (!Available()) {
      ++acquire_waits_;
      counted_wait = true;
      const absl::Time start = absl::Now();
      internal::Await(
          mu_, [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return Available(); });
      time_waited_ += absl::Now() - start;
    }
    if (cancelled_) return absl::CancelledError("buffer list shut down");
    ++acquires_;
    if (!free_.empty()) {
      entry = free_.back();
      free_.pop_back();
      held_[entry] = true;
      if (waited != nullptr) *waited = counted_wait;
      return entry;
    }
    Fenced oldest = std::move(fenced_.front());
    fenced_.pop_front();
    entry = oldest.entry;
    fence = std::move(oldest.fence);
    held_[entry] = true;
    if (!counted_wait) ++acquire_waits_;  // it has to go through a fence
    counted_wait = true;
  }
  if (waited != nullptr) *waited = counted_wait;
  // See Note [waiting outside the lock]. No Query() first: on the cuda
  // backend every runtime call costs microseconds in the hot path, and
  // waiting on a completed event returns at once.
  const absl::Time start = absl::Now();
  absl::Status status = fence->Wait();
  const absl::Duration fence_wait = absl::Now() - start;
  {
    internal::MutexLock lock(&mu_);
    time_waited_ += fence_wait;
    if (cancelled_ && status.ok()) {
      // Cancelled while waiting: the entry is free now, the caller gets none.
      held_[entry] = false;
      free_.push_back(entry);
      return absl::CancelledError("buffer list shut down");
    }
  }
  if (!status.ok()) return status;
  return entry;
}

std::optional<int> FencedFreeList::TryAcquire() {
  std::shared_ptr<const Fence> fence;
  int entry = -1;
  {
    internal::MutexLock lock(&mu_);
    if (cancelled_) return std::nullopt;
    if (!free_.empty()) {
      entry = free_.back();
      free_.pop_back();
      held_[entry] = true;
      ++acquires_;
      return entry;
    }
    if (fenced_.empty()) return std::nullopt;
    Fenced oldest = std::move(fenced_.front());
    fenced_.pop_front();
    entry = oldest.entry;
    fence = std::move(oldest.fence);
    held_[entry] = true;
  }
  absl::StatusOr<bool> done = fence->Query();
  internal::MutexLock lock(&mu_);
  if (done.ok() && *done) {
    ++acquires_;
    return entry;
  }
  // Not yet: put it back at the front, where it was.
  held_[entry] = false;
  fenced_.push_front({entry, std::move(fence)});
  return std::nullopt;
}

void FencedFreeList::Release(int entry, std::shared_ptr<const Fence> fence) {
  internal::MutexLock lock(&mu_);
  held_[entry] = false;
  if (fence == nullptr) {
    free_.push_back(entry);
  } else {
    fenced_.push_back({entry, std::move(fence)});
  }
}

absl::Status FencedFreeList::WaitForFences() {
  std::deque<Fenced> fenced;
  {
    internal::MutexLock lock(&mu_);
    fenced.swap(fenced_);
  }
  absl::Status first;
  for (const Fenced& f : fenced) first.Update(f.fence->Wait());
  internal::MutexLock lock(&mu_);
  for (const Fenced& f : fenced) free_.push_back(f.entry);
  return first;
}

void FencedFreeList::Cancel() {
  internal::MutexLock lock(&mu_);
  cancelled_ = true;
}

void FencedFreeList::Resume() {
  internal::MutexLock lock(&mu_);
  cancelled_ = false;
}

int FencedFreeList::InUse() const {
  internal::MutexLock lock(&mu_);
  return entries_ - static_cast<int>(free_.size());
}

FreeListStats FencedFreeList::stats() const {
  internal::MutexLock lock(&mu_);
  FreeListStats stats;
  stats.entries = entries_;
  stats.held = static_cast<int>(std::count(held_.begin(), held_.end(), true));
  stats.fenced = static_cast<int>(fenced_.size());
  stats.acquires = acquires_;
  stats.acquire_waits = acquire_waits_;
  stats.time_waited = time_waited_;
  return stats;
}

}  // namespace pinwheel
