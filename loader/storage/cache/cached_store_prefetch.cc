// CachedStore's prefetcher: Note [conservative prefetch] and Note
// [prefetch wake-ups] in cached_store.h.
#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "loader/storage/cache/cached_store.h"
#include "loader/storage/cache/internal/relock.h"
#include "pinning/base/mutex.h"

namespace pinwheel {

using internal::BlockKey;

CachedStore::PrefetchPick CachedStore::PickPrefetch(BlockKey* key,
                                                    int64_t* position,
                                                    int64_t* object_size) {
  const int64_t cursor = plan_.cursor();
  prefetch_stuck_ = false;
  for (int64_t p = std::max(cursor, scan_from_); p < plan_.size(); ++p) {
    if (plan_.consumed(p)) continue;
    const BlockKey k = plan_.key(p);
    if (blocks_.contains(k)) continue;
    scan_from_ = p;
    const auto size = sizes_.find(k.url);
    if (size == sizes_.end()) {
      *key = k;
      return PrefetchPick::kNeedSize;
    }
    const int64_t length = BlockLength(size->second, k.block);
    // Note [conservative prefetch]: MIN's victim when p is needed, taken
    // now only if nothing needs it before p.
    while (held_ + length > options_.budget_bytes) {
      const BlockKey* victim = nullptr;
      int64_t victim_use = -1;
      bool victim_free = false;
      uint64_t victim_stamp = 0;
      for (const auto& [candidate, block] : blocks_) {
        const int64_t use = plan_.NextUse(candidate, p);
        const bool free = block->resident && block->pins == 0 &&
                          plan_.NextUse(candidate, cursor) >= p &&
                          !plan_.IsCurrent(candidate);
        if (victim == nullptr || use > victim_use ||
            (use == victim_use && free && !victim_free) ||
            (use == victim_use && free == victim_free &&
             block->last_used < victim_stamp)) {
          victim = &candidate;
          victim_use = use;
          victim_free = free;
          victim_stamp = block->last_used;
        }
      }
      if (victim == nullptr || !victim_free) {
        prefetch_stuck_ = true;
        return PrefetchPick::kNone;
      }
      Evict(*victim);
    }
    AddBlock(k, length);
    *key = k;
    *position = p;
    *object_size = size->second;
    return PrefetchPick::kFetch;
  }
  scan_from_ = plan_.size();
  return PrefetchPick::kNone;
}

void CachedStore::Prefetcher() {
  internal::MutexLock lock(&mu_);
  while (!stop_) {
    BlockKey key;
    int64_t position = 0;
    int64_t object_size = 0;
    const PrefetchPick pick = PickPrefetch(&key, &position, &object_size);
    if (pick == PrefetchPick::kNeedSize) {
      const std::string url = urls_[static_cast<size_t>(key.url)];
      const uint64_t seen = version_;
      internal::Unlock(mu_);
      int32_t id = 0;
      const bool ok = ObjectSize(url, &id).ok();
      internal::Relock(mu_);
      // A failed ask waits for a change (a reader will meet the error).
      if (!ok) {
        internal::Await(mu_, [&] {
          mu_.AssertHeld();
          return stop_ || version_ != seen;
        });
      }
      continue;
    }
    if (pick == PrefetchPick::kNone) {
      const uint64_t seen = version_;
      internal::Await(mu_, [&] {
        mu_.AssertHeld();
        return stop_ || version_ != seen;
      });
      continue;
    }
    const std::string url = urls_[static_cast<size_t>(key.url)];
    internal::Unlock(mu_);
    absl::StatusOr<std::shared_ptr<std::vector<std::byte>>> fetched =
        Fetch(key, url, object_size);
    internal::Relock(mu_);
    ++version_;
    Block& b = *blocks_.at(key);
    if (!fetched.ok()) {
      // Never cached: the reader fetches it again and meets the error.
      Forget(key);
      ++stats_.fetch_errors;
      const uint64_t seen = version_;
      internal::Await(mu_, [&] {
        mu_.AssertHeld();
        return stop_ || version_ != seen;
      });
      continue;
    }
    b.resident = true;
    b.last_used = ++clock_;
    if (options_.directory.empty()) b.data = *std::move(fetched);
    ++stats_.prefetches;
    CountFetch(key, b.bytes, plan_.epoch(position));
  }
}

}  // namespace pinwheel
