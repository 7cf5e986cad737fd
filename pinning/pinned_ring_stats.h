// PinnedRingStats: the counters of a PinnedRing, in a header of their own so
// that code reporting them (LoaderStats) need not include the ring.
#ifndef PINWHEEL_PINNING_PINNED_RING_STATS_H_
#define PINWHEEL_PINNING_PINNED_RING_STATS_H_

#include <cstddef>
#include <cstdint>

#include "absl/time/time.h"

namespace pinwheel {

// Counters of a PinnedRing; a consistent snapshot.
struct PinnedRingStats {
  int slots = 0;
  int slots_in_flight = 0;  // acquired, or waiting on their copy_done
  int64_t acquires = 0;
  int64_t acquire_waits = 0;  // acquires that had to block
  absl::Duration time_waited = absl::ZeroDuration();
  // The part of time_waited spent waiting for the copy out of a slot to
  // finish (the rest found every slot held by its filler or not yet handed
  // to the copy): when it is most of the wait, the copy is the bound.
  absl::Duration time_waited_on_copy = absl::ZeroDuration();
  // Host bytes held by the ring: constant, but for a ring that grows
  // (PinnedRingOptions::allocate_on_first_use) the slots allocated now.
  size_t bytes_pinned = 0;
  size_t bytes_pinned_peak = 0;  // the most bytes_pinned has been
  int depth = 0;                 // slots handed out at once (SetDepth())
};

}  // namespace pinwheel

#endif  // PINWHEEL_PINNING_PINNED_RING_STATS_H_
