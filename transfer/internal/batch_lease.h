// BatchLease: what a delivered batch holds. Shared by the DeviceBatch and
// its DLPack views; the device buffer goes back to the pool, behind the
// `consumed` event, when the last of them lets go.
#ifndef PINWHEEL_TRANSFER_INTERNAL_BATCH_LEASE_H_
#define PINWHEEL_TRANSFER_INTERNAL_BATCH_LEASE_H_

#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

#include "pinning/base/mutex.h"
#include "transfer/batch_info.h"
#include "transfer/device.h"
#include "transfer/device_batch.h"
#include "transfer/device_buffer_pool.h"
#include "transfer/event.h"

namespace pinwheel::internal {

// What a TransferStage shares with the batches it delivered, which may
// outlive it: its lock, and the count of batches the consumer holds
// (delivered by Next() and not yet let go, DLPack views included). When
// that count equals the device buffers and nothing is queued, no copy can
// land until the consumer lets one go. Thread-safe.
struct StageShared {
  absl::Mutex mu;
  int held ABSL_GUARDED_BY(mu) = 0;
};

// Not thread-safe on its own: the DeviceBatch that holds it is used by one
// consumer thread; the destructor may run on any thread (a DLPack deleter).
struct BatchLease {
  std::shared_ptr<DeviceBufferPool> pool;
  int buffer = -1;
  std::shared_ptr<Event> ready;     // the copy's copy_done
  std::shared_ptr<Event> consumed;  // recorded on the consumer's stream
  // Never recorded, so always complete: DeviceBatch::ready() once released.
  std::shared_ptr<const Event> completed;
  bool consumed_recorded = false;
  Device device;
  BatchInfo info;  // moved here from the FilledBatch, never copied
  // The fields; shared by every full batch in this buffer (built once).
  std::shared_ptr<const std::vector<FieldView>> fields;
  // The stream the consumer last waited on (its native handle).
  bool waited = false;
  void* wait_stream = nullptr;
  // The stage that made this batch; `delivered` (set under shared->mu by
  // TransferStage::Next()) says whether this batch counts in shared->held.
  std::shared_ptr<StageShared> shared;
  bool delivered = false;

  ~BatchLease() {
    pool->Release(buffer, consumed_recorded ? consumed : ready);
    if (delivered) {                // written before the consumer got the batch
      MutexLock lock(&shared->mu);  // wakes the stage's waits on `held`
      --shared->held;
    }
  }
};

}  // namespace pinwheel::internal

#endif  // PINWHEEL_TRANSFER_INTERNAL_BATCH_LEASE_H_
