#include "pinning/fenced_free_list.h"

#include <algorithm>
#include <utility>

#include "absl/status/status.h"

#include "pinning/base/mutex.h"

namespace pinwheel {

FencedFreeList::FencedFreeList(int entries)
    : entries_(entries), held_(entries, false), limit_(entries) {
  free_.reserve(entries);
  // Hand out entry 0 first: fill the free list in reverse, pop from the back.
  for (int i = entries - 1; i >= 0; --i) free_.push_back(i);
}

bool FencedFreeList::Available() const {
  if (cancelled_) return true;
  if (limit_ == entries_) return !free_.empty() || !fenced_.empty();
  for (const int entry : free_) {
    if (entry < limit_) return true;
  }
  return OldestFencedUnderLimit() >= 0;
}

int FencedFreeList::TakeFree() {
  if (limit_ == entries_) {
    if (free_.empty()) return -1;
    const int entry = free_.back();
    free_.pop_back();
    return entry;
  }
  // The lowest free entry under the limit: Note [a limit on the entries].
  auto lowest = free_.end();
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    if (*it < limit_ && (lowest == free_.end() || *it < *lowest)) lowest = it;
  }
  if (lowest == free_.end()) return -1;
  const int entry = *lowest;
  free_.erase(lowest);
  return entry;
}

int FencedFreeList::OldestFencedUnderLimit() const {
  for (size_t i = 0; i < fenced_.size(); ++i) {
    if (fenced_[i].entry < limit_) return static_cast<int>(i);
  }
  return -1;
}

void FencedFreeList::SetLimit(int limit) {
  internal::MutexLock lock(&mu_);
  limit_ = std::clamp(limit, 1, entries_);
}

int FencedFreeList::limit() const {
  internal::MutexLock lock(&mu_);
  return limit_;
}

std::vector<int> FencedFreeList::IdleAboveLimit() {
  std::vector<int> idle;
  std::vector<Fenced> pending;
  {
    internal::MutexLock lock(&mu_);
    for (const int entry : free_) {
      if (entry >= limit_) idle.push_back(entry);
    }
    for (auto it = fenced_.begin(); it != fenced_.end();) {
      if (it->entry >= limit_) {
        pending.push_back(std::move(*it));
        it = fenced_.erase(it);
      } else {
        ++it;
      }
    }
  }
  // Outside the lock: a query may be a CUDA call (Note [waiting outside the
  // lock]). Taken out of fenced_, these are held by no one meanwhile.
  std::vector<bool> done(pending.size(), false);
  for (size_t i = 0; i < pending.size(); ++i) {
    const absl::StatusOr<bool> query = pending[i].fence->Query();
    done[i] = query.ok() && *query;
  }
  internal::MutexLock lock(&mu_);
  for (size_t i = 0; i < pending.size(); ++i) {
    if (done[i]) {
      free_.push_back(pending[i].entry);
      idle.push_back(pending[i].entry);
    } else {
      fenced_.push_back(std::move(pending[i]));
    }
  }
  return idle;
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
    entry = TakeFree();
    if (entry >= 0) {
      held_[entry] = true;
      if (waited != nullptr) *waited = counted_wait;
      return entry;
    }
    const auto at = fenced_.begin() + OldestFencedUnderLimit();
    Fenced oldest = std::move(*at);
    fenced_.erase(at);
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
    fence_time_waited_ += fence_wait;
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
    entry = TakeFree();
    if (entry >= 0) {
      held_[entry] = true;
      ++acquires_;
      return entry;
    }
    const int oldest_at = OldestFencedUnderLimit();
    if (oldest_at < 0) return std::nullopt;
    const auto at = fenced_.begin() + oldest_at;
    Fenced oldest = std::move(*at);
    fenced_.erase(at);
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
  stats.fence_time_waited = fence_time_waited_;
  return stats;
}

}  // namespace pinwheel
