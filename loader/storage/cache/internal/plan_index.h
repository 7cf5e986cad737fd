// PlanIndex: a ReadPlan seen as the sequence of cache blocks it touches,
// with the consumers' position in it. Answers the two questions of a
// clairvoyant cache: when is a block next needed, and which planned touch
// did a read just make.
//
// Note [matching reads to the plan]
// A plan position is one (block, stream) touch; consecutive touches of one
// block by one stream are one position, unless exact (a record, read by
// one call: PlannedRead::exact). A read of block b is matched, in this
// order, to: (0) the first unconsumed position of b when it is exact and
// within `window` as in (2) — batches read side by side share blocks, and
// a read of a block another batch reads now is still its own; (1) the
// block a stream is reading now (its last matched position) — readers
// read a block in many small pieces; (2) the first
// unconsumed position of b, if it lies within `window` of its stream's
// first unconsumed position (counted in that stream's own positions: the
// streams of a process drift apart freely, each reads its own list in
// order), which it consumes and which becomes its stream's current block;
// else (3) nothing: an unplanned read. Positions of a stream more than
// `window` behind one it consumed are taken as skipped (the reader
// evidently passed them), so one missed match never stalls the cursor,
// the first unconsumed position of all.
#ifndef PINWHEEL_LOADER_STORAGE_CACHE_INTERNAL_PLAN_INDEX_H_
#define PINWHEEL_LOADER_STORAGE_CACHE_INTERNAL_PLAN_INDEX_H_

#include <cstdint>
#include <limits>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/hash/hash.h"

namespace pinwheel::internal {

// A block of an object: the url's id (the cache's own numbering) and the
// block's index (offset / block bytes).
struct BlockKey {
  int32_t url = 0;
  int64_t block = 0;
  friend bool operator==(const BlockKey&, const BlockKey&) = default;
  template <typename H>
  friend H AbslHashValue(H h, const BlockKey& key) {
    return H::combine(std::move(h), key.url, key.block);
  }
};

inline constexpr int64_t kNever = std::numeric_limits<int64_t>::max();

// Not thread-safe (the cache calls it under its mutex).
class PlanIndex {
 public:
  explicit PlanIndex(int64_t window) : window_(window) {}

  // Appends one touch; merged with the stream's previous position when it
  // is the same block and neither is exact.
  void Append(BlockKey key, int32_t stream, int64_t epoch, bool exact = false);

  enum class Match { kCurrent, kPlanned, kUnplanned };
  // Matches a read of `key` (Note [matching reads to the plan]); kPlanned
  // sets *position to the consumed one.
  Match Touch(BlockKey key, int64_t* position);

  // Takes every unconsumed position of an epoch before `epoch` as skipped
  // (the loader left those epochs: ended early, or restarted elsewhere);
  // a stream reading a block of such an epoch reads nothing now.
  void SkipEpochsBefore(int64_t epoch);

  // Returns the first unconsumed position of `key` at or after `from`, or
  // kNever.
  int64_t NextUse(BlockKey key, int64_t from) const;
  // Returns whether `key` is the block some stream reads now.
  bool IsCurrent(BlockKey key) const;

  int64_t cursor() const { return cursor_; }
  int64_t size() const { return static_cast<int64_t>(entries_.size()); }
  BlockKey key(int64_t position) const {
    return entries_[static_cast<size_t>(position)].key;
  }
  int64_t epoch(int64_t position) const {
    return entries_[static_cast<size_t>(position)].epoch;
  }
  bool consumed(int64_t position) const {
    return entries_[static_cast<size_t>(position)].consumed;
  }
  // The epoch the cursor is in (the last planned epoch past the end; -1
  // for an empty plan).
  int64_t cursor_epoch() const;
  // Positions passed over without a read (see the Note).
  int64_t skipped() const { return skipped_; }

 private:
  struct Entry {
    BlockKey key;
    int32_t stream = 0;
    int64_t epoch = 0;
    int64_t local = 0;  // index among its stream's positions
    bool consumed = false;
    bool exact = false;
  };
  struct Stream {
    std::vector<int64_t> positions;  // ascending
    size_t next = 0;                 // its first unconsumed position's index
    int64_t current = -1;            // the position it reads now
  };
  struct Uses {
    std::vector<int64_t> positions;  // ascending
    size_t first = 0;  // every position before this one is consumed
  };
  void Consume(int64_t position);
  // Consumes `found` (a position of `key`'s uses) for its stream: steps 2's
  // end of the Note. Returns kPlanned.
  Match ConsumeFor(int64_t found, int64_t* position);
  void AdvanceCursor();

  int64_t window_;
  std::vector<Entry> entries_;
  absl::flat_hash_map<BlockKey, Uses> uses_;
  absl::flat_hash_map<int32_t, Stream> streams_;
  int64_t cursor_ = 0;
  int64_t skipped_ = 0;
};

}  // namespace pinwheel::internal

#endif  // PINWHEEL_LOADER_STORAGE_CACHE_INTERNAL_PLAN_INDEX_H_
