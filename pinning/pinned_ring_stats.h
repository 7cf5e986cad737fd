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
  size_t bytes_pinned = 0;  // host bytes held by the ring (constant)
};

}  // namespace pinwheel

#endif  // PINWHEEL_PINNING_PINNED_RING_STATS_H_
