// CachedStore: an ObjectStore over another one that keeps fixed-size blocks
// of objects within a byte budget, in memory or in a local directory, and
// that knows the future: given the ReadPlan of the coming epochs
// (loader/storage/cache/read_plan.h) it fetches ahead in plan order and
// evicts the block whose next use is furthest away (Belady's policy).
//
// Example:
//   PINWHEEL_ASSIGN_OR_RETURN(
//       std::shared_ptr<CachedStore> cache,
//       CachedStore::Open(remote, {.budget_bytes = int64_t{64} << 30,
//                                  .directory = "/local/cache"}));
//   PINWHEEL_RETURN_IF_ERROR(cache->AppendPlan(plan));  // epochs e, e + 1
//   ... read through `cache` as through `remote` ...
//   CacheStats stats = cache->Stats();
//
// Note [conservative prefetch]
// The prefetcher walks the plan from the cursor (the first position no
// reader has touched) and fetches each block that is neither cached nor
// in flight. With room in the budget it just fetches; otherwise it takes
// the victim Belady's MIN would take when that block is needed (the
// cached block whose next use after it is furthest, or never), and only
// if that victim is not needed before it, not being read, and not pinned;
// else it waits. So it makes exactly MIN's replacements, only earlier
// (Cao, Felten, Karlin and Li's "conservative" prefetching): bytes fetched
// equal MIN's when readers follow the plan, and prefetching never evicts a
// block needed sooner than the one it fetches. A reader that finds its
// block missing fetches it itself, evicting the block next used furthest
// from now (LRU among those never used again). Reads outside the plan are
// served and cached only into free room or in place of a block the plan
// never uses again (LRU rules), so they cannot push out planned blocks.
//
// Note [prefetch wake-ups]
// Prefetchers sleep until something they decide on changes: a planned
// read (the cursor, a stream's current block), an eviction, a finished or
// failed fetch, a plan appended, or, while one waits for a victim, an
// unpin. Their scan starts where the last one stopped (every position
// before it is cached or in flight; an eviction moves it back to the
// evicted block's next use), so a wake-up costs the blocks held, not the
// plan's length.
//
// Note [a block a reader waits for]
// One stream may have several reads in flight (a tar reader fetches the
// next chunks while it parses one), so "the block a stream reads now"
// (PlanIndex::IsCurrent) does not cover every block being read. A reader
// that finds its block in flight pins it while it waits: its position is
// consumed already, so by the plan the block is not needed until a later
// epoch, and without the pin a prefetch (or another reader's miss) could
// evict it between the fetch's end and the reader's wake-up, and the
// reader would fetch it again (seen 1 run in 40 of
// planned_tar_shards_test before the pin). A fetch that fails drops its
// block even when pinned; the waiters then find it gone (the serial tells
// a later entry of the same key from theirs) and fetch it themselves.
//
// Note [warm restart]
// With a directory each block is a file (loader/storage/cache/internal/
// block_file.h) published atomically. Open() rebuilds the index from the
// directory: a file that fails its checks (torn: short, checksum; foreign:
// magic, name) is deleted and counted, never served; temporary files of a
// killed writer are deleted and counted torn; other files are left alone
// and counted foreign. A block whose object has since changed size is
// dropped (counted stale) when the object's size is first asked. Blocks
// beyond the budget are dropped at Open. A resumed job with the same
// directory therefore fetches only what its cache did not hold.
//
// Thread-safe: every method may be called from many threads at once.
// Destruction stops the prefetcher and waits for its fetches; REQUIRES: no
// Read() in progress.
#ifndef PINWHEEL_LOADER_STORAGE_CACHE_CACHED_STORE_H_
#define PINWHEEL_LOADER_STORAGE_CACHE_CACHED_STORE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

#include "loader/storage/cache/internal/plan_index.h"
#include "loader/storage/cache/read_plan.h"
#include "loader/storage/object_store.h"

namespace pinwheel {

enum class CachePolicy {
  kBelady,  // evict by next use in the plan; prefetch in plan order
  kLru,     // least recently used; no prefetch (the baseline)
};

struct CacheOptions {
  // Parameters that set the size.
  // The most bytes of blocks held (cached and in flight), >= block_bytes.
  int64_t budget_bytes = int64_t{1} << 30;
  // Objects are cached in blocks of this many bytes (the last block of an
  // object may be shorter), >= 4096.
  int64_t block_bytes = int64_t{8} << 20;
  // Where blocks live: empty for memory; otherwise a directory (created if
  // missing) holding one file per block, kept across restarts.
  std::string directory;

  // Parameters that affect behaviour.
  CachePolicy policy = CachePolicy::kBelady;
  // Fetch ahead in plan order (kBelady only).
  bool prefetch = true;
  // Fetches the prefetcher keeps in flight, 1..256.
  int prefetch_threads = 8;
  // How far a read may run ahead of its stream's first unread plan
  // position (counted in that stream's positions) and still count as
  // planned, >= 1 (Note [matching reads to the plan] in
  // internal/plan_index.h).
  int64_t plan_window_blocks = 64;
};

// Counters since Open(). A value.
struct CacheStats {
  int64_t hits = 0;    // block reads served from the cache at once
  int64_t misses = 0;  // block reads that waited for a fetch
  double hit_rate() const {
    return hits + misses == 0 ? 0.0
                              : static_cast<double>(hits) / (hits + misses);
  }
  int64_t bytes_fetched = 0;  // from the underlying store
  int64_t fetches = 0;        // requests to the underlying store
  int64_t prefetches = 0;     // of those, made ahead by the prefetcher
  // Bytes of blocks fetched again in an epoch that already fetched them.
  int64_t bytes_fetched_again = 0;
  // Bytes fetched per epoch of the plan position they were fetched for
  // (reads outside the plan: the epoch of the cursor).
  std::map<int64_t, int64_t> bytes_fetched_by_epoch;
  absl::Duration reader_wait;     // readers' time waiting on fetches
  int64_t unplanned_reads = 0;    // block reads not in the plan
  int64_t uncached_reads = 0;     // served around the cache (no room)
  int64_t skipped_positions = 0;  // plan positions never read
  int64_t evictions = 0;
  int64_t fetch_errors = 0;  // failed fetches (never cached)
  int64_t peak_bytes = 0;    // most bytes held at once (<= budget)
  // Warm restart (Note [warm restart]).
  int64_t warm_blocks = 0;
  int64_t warm_bytes = 0;
  int64_t dropped_torn = 0;
  int64_t dropped_foreign = 0;
  int64_t dropped_stale = 0;
  int64_t dropped_over_budget = 0;
};

class CachedStore final : public ObjectStore {
 public:
  // Returns the cache over `underlying` (shared: it must stay usable while
  // the cache lives), warmed from options.directory when set. InvalidArgument
  // names a bad option; a directory that cannot be created or listed is an
  // errno status naming it.
  [[nodiscard]] static absl::StatusOr<std::shared_ptr<CachedStore>> Open(
      std::shared_ptr<ObjectStore> underlying, const CacheOptions& options);

  ~CachedStore() override;
  CachedStore(const CachedStore&) = delete;
  CachedStore& operator=(const CachedStore&) = delete;

  absl::StatusOr<int64_t> Size(std::string_view url) override;
  absl::Status Read(absl::Span<const RangeRead> reads) override;

  // Appends `plan`'s reads to the plan (the next epoch's, as the current
  // one goes on). Errors: InvalidArgument for a read with a negative offset
  // or length or a url index out of range.
  [[nodiscard]] absl::Status AppendPlan(const ReadPlan& plan);
  // Drops the plan's reads of epochs before `epoch` that no reader made
  // (counted in skipped_positions): the loader left those epochs (a
  // shortened epoch, a restart from a checkpoint), so their blocks are
  // neither prefetched nor kept for them any more.
  void SkipPlanBefore(int64_t epoch);

  CacheStats Stats() const;
  // Bytes held now (cached and in flight).
  int64_t held_bytes() const;

 private:
  struct Block {
    bool resident = false;  // false: being fetched
    int64_t bytes = 0;
    // Readers copying out of it now or waiting for its fetch (Note [a
    // block a reader waits for]): never evicted while > 0.
    int pins = 0;
    uint64_t serial = 0;  // tells this entry from a later one of its key
    uint64_t last_used = 0;
    // The bytes, in memory; null for a block in the directory.
    std::shared_ptr<std::vector<std::byte>> data;
  };
  CachedStore(std::shared_ptr<ObjectStore> underlying, CacheOptions options);

  absl::Status Warm();
  absl::StatusOr<int64_t> ObjectSize(std::string_view url, int32_t* id);
  int32_t UrlId(std::string_view url) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status ReadBlock(int32_t url, int64_t block, int64_t object_size,
                         int64_t offset, absl::Span<std::byte> out);
  // Makes room for `bytes`; returns false when it may not (see the Notes).
  bool MakeRoom(int64_t bytes, int64_t position, bool planned)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Adds `key`, `bytes` long and not resident yet, to the index and the
  // bytes held; returns it.
  Block& AddBlock(internal::BlockKey key, int64_t bytes)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Drops `key` from the index (Evict also counts and deletes its file).
  void Forget(internal::BlockKey key) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Evict(internal::BlockKey key) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Fetches `key` into a buffer and publishes it (disk); returns the bytes.
  absl::StatusOr<std::shared_ptr<std::vector<std::byte>>> Fetch(
      internal::BlockKey key, const std::string& url, int64_t object_size);
  void Prefetcher();
  // Chooses the next block to prefetch and reserves room for it (kFetch),
  // or names a url whose size is not known yet (kNeedSize), or kNone.
  enum class PrefetchPick { kNone, kFetch, kNeedSize };
  PrefetchPick PickPrefetch(internal::BlockKey* key, int64_t* position,
                            int64_t* object_size)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void CountFetch(internal::BlockKey key, int64_t bytes, int64_t epoch)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  int64_t BlockLength(int64_t object_size, int64_t block) const;
  std::string BlockPath(internal::BlockKey key) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::shared_ptr<ObjectStore> underlying_;
  const CacheOptions options_;

  mutable absl::Mutex mu_;
  // Bumped on every change a waiter may wait for.
  uint64_t version_ ABSL_GUARDED_BY(mu_) = 0;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::string> urls_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, int32_t> url_ids_ ABSL_GUARDED_BY(mu_);
  // Object sizes asked of the underlying store (errors are not kept), and
  // sizes the warm blocks were cached with (checked on first ask).
  absl::flat_hash_map<int32_t, int64_t> sizes_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<int32_t, int64_t> warm_sizes_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<internal::BlockKey, std::unique_ptr<Block>> blocks_
      ABSL_GUARDED_BY(mu_);
  int64_t held_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t clock_ ABSL_GUARDED_BY(mu_) = 0;  // for LRU stamps
  uint64_t last_serial_ ABSL_GUARDED_BY(mu_) = 0;
  internal::PlanIndex plan_ ABSL_GUARDED_BY(mu_);
  // Every plan position in [cursor, scan_from_) is consumed or has its
  // block cached or in flight: the prefetcher's scan starts here.
  int64_t scan_from_ ABSL_GUARDED_BY(mu_) = 0;
  // The prefetcher waits for a victim to come free (an unpin matters).
  bool prefetch_stuck_ ABSL_GUARDED_BY(mu_) = false;
  // (epoch, block) pairs fetched, for bytes_fetched_again.
  absl::flat_hash_set<std::pair<int64_t, internal::BlockKey>> fetched_
      ABSL_GUARDED_BY(mu_);
  CacheStats stats_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> prefetchers_;
};

}  // namespace pinwheel

#endif  // PINWHEEL_LOADER_STORAGE_CACHE_CACHED_STORE_H_
