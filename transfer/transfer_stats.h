// TransferStats: the counters of a TransferStage, in a header of their own
// so that code reporting them (LoaderStats) need not include the stage.
#ifndef PINWHEEL_TRANSFER_TRANSFER_STATS_H_
#define PINWHEEL_TRANSFER_TRANSFER_STATS_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/time/time.h"

namespace pinwheel {

// Counters of a TransferStage; a consistent snapshot.
struct TransferStats {
  int64_t batches_copied = 0;
  int64_t bytes_copied = 0;
  int device_buffers = 0;
  size_t device_bytes = 0;   // allocated up front, constant (0 with
                             // caller-owned static device buffers)
  int64_t buffer_waits = 0;  // copies that waited for a free buffer
  absl::Duration buffer_wait_time = absl::ZeroDuration();
  // The copy thread waiting for a filled slot to be submitted: when high,
  // the producers (workers) are the limit, not the copy.
  absl::Duration idle_time = absl::ZeroDuration();
  // The copy thread inside the copy and copy_done record calls.
  absl::Duration issue_time = absl::ZeroDuration();
  // Batches copied by the submitting thread instead of the copy thread (see
  // Note [copy issued by the submitter] in transfer_stage.cc).
  int64_t inline_copies = 0;
  // Samples the device transform could not produce and the stage left out
  // (SampleFaultPolicy::skip, ErrorPolicy::kSkipSample), and the last
  // one's cause, naming it (empty when none).
  int64_t samples_skipped = 0;
  std::string last_skipped;
};

}  // namespace pinwheel

#endif  // PINWHEEL_TRANSFER_TRANSFER_STATS_H_
