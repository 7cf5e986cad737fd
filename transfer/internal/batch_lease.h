// BatchLease: what a delivered batch holds. Shared by the DeviceBatch and
// its DLPack views; the device buffer goes back to the pool, behind the
// `consumed` event, when the last of them lets go.
#ifndef PINWHEEL_TRANSFER_INTERNAL_BATCH_LEASE_H_
#define PINWHEEL_TRANSFER_INTERNAL_BATCH_LEASE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "transfer/device.h"
#include "transfer/device_batch.h"
#include "transfer/device_buffer_pool.h"
#include "transfer/event.h"

namespace pinwheel::internal {

struct BatchLease {
  std::shared_ptr<DeviceBufferPool> pool;
  int buffer = -1;
  std::shared_ptr<Event> ready;     // the copy's copy_done
  std::shared_ptr<Event> consumed;  // recorded on the consumer's stream
  // Never recorded, so always complete: DeviceBatch::ready() once released.
  std::shared_ptr<const Event> completed;
  bool consumed_recorded = false;
  Device device;
  int64_t epoch = 0;
  int64_t index = 0;
  int64_t samples = 0;
  std::vector<int64_t> sample_indices;
  // The fields; shared by every full batch in this buffer (built once).
  std::shared_ptr<const std::vector<FieldView>> fields;
  // The stream the consumer last waited on (its native handle).
  bool waited = false;
  void* wait_stream = nullptr;
  // Batches the consumer holds (delivered by Next(), not yet let go), for
  // the stage that made this one; `delivered` says whether this one counts.
  std::shared_ptr<std::atomic<int>> held;
  std::atomic<bool> delivered{false};

  ~BatchLease() {
    pool->Release(buffer, consumed_recorded ? consumed : ready);
    if (delivered.load(std::memory_order_acquire)) {
      held->fetch_sub(1, std::memory_order_acq_rel);
    }
  }
};

}  // namespace pinwheel::internal

#endif  // PINWHEEL_TRANSFER_INTERNAL_BATCH_LEASE_H_
