// DeviceBufferPool: a fixed set of device buffers, allocated up front
// (buffers × buffer_bytes), each reused only after the `consumed` event the
// consumer recorded when releasing it has completed.
//
// Example:
//   PINWHEEL_ASSIGN_OR_RETURN(std::shared_ptr<DeviceBufferPool> pool,
//       DeviceBufferPool::Create(device, 2, layout.slot_bytes()));
//   PINWHEEL_ASSIGN_OR_RETURN(DeviceBufferPool::Buffer b, pool->Acquire());
//   ...
//   pool->Release(b.index, consumed_event);
//
// Borrow() makes the same pool over buffers the caller owns (see
// transfer/static_device_buffer.h): same rotation, same fences, nothing
// allocated or freed.
#ifndef PINWHEEL_TRANSFER_DEVICE_BUFFER_POOL_H_
#define PINWHEEL_TRANSFER_DEVICE_BUFFER_POOL_H_

#include <cstddef>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"

#include "pinning/fence.h"
#include "pinning/fenced_free_list.h"
#include "transfer/device.h"
#include "transfer/static_device_buffer.h"

namespace pinwheel {

// Thread-safe. Destroy it only when no buffer is held (DeviceBatch keeps a
// shared_ptr to its pool, so shared ownership does this).
class DeviceBufferPool {
 public:
  struct Buffer {
    int index = -1;
    std::byte* data =
        nullptr;  // device memory (host memory on the host backend)
    size_t size = 0;
  };

  // Returns a pool of `buffers` (1..64) buffers of `buffer_bytes` (> 0)
  // each, or ResourceExhausted naming the bytes that could not be had.
  [[nodiscard]] static absl::StatusOr<std::shared_ptr<DeviceBufferPool>> Create(
      const Device& device, int buffers, size_t buffer_bytes);

  // Returns a pool over `buffers` (1..64), which the caller owns, each used
  // for `buffer_bytes` (> 0) bytes. InvalidArgument naming the buffer (its
  // position, address and size) when one is null, not aligned to
  // BatchLayout::kFieldAlignment, smaller than `buffer_bytes`, overlaps
  // another, or (cuda backend) is not device memory of `device`;
  // FailedPrecondition naming it when another live pool borrowed it (Note
  // [one pool per static buffer] in the .cc). The pool frees nothing; its
  // destructor still waits for the fences of buffers released behind one.
  // REQUIRES: the memory outlives the pool.
  [[nodiscard]] static absl::StatusOr<std::shared_ptr<DeviceBufferPool>> Borrow(
      const Device& device, const std::vector<StaticDeviceBuffer>& buffers,
      size_t buffer_bytes);

  DeviceBufferPool(const DeviceBufferPool&) = delete;
  DeviceBufferPool& operator=(const DeviceBufferPool&) = delete;
  ~DeviceBufferPool();

  // Returns a free buffer, blocking while none is free and waiting on the
  // oldest `consumed` event when all have been released behind one.
  // Cancelled after Cancel(). Sets `*waited` (when given) to whether it had
  // to wait.
  [[nodiscard]] absl::StatusOr<Buffer> Acquire(bool* waited = nullptr);
  // Returns a free buffer without blocking, or nullopt.
  [[nodiscard]] std::optional<Buffer> TryAcquire();
  // Gives buffer `index` back, reusable once `consumed` has completed.
  void Release(int index, std::shared_ptr<const Fence> consumed);
  // Wakes every blocked Acquire() with Cancelled. Idempotent.
  void Cancel();

  // Returns buffer `index`'s memory. REQUIRES: 0 <= index < buffers().
  std::byte* buffer_data(int index) const { return buffers_[index]; }
  const Device& device() const { return device_; }
  int buffers() const { return static_cast<int>(buffers_.size()); }
  size_t buffer_bytes() const { return buffer_bytes_; }
  // Returns the bytes this pool allocated (0 when Borrow() made it).
  size_t bytes_allocated() const {
    return owns_buffers_ ? buffer_bytes_ * buffers_.size() : 0;
  }
  // Returns whether the buffers are the pool's own (Create()) rather than
  // the caller's (Borrow()).
  bool owns_buffers() const { return owns_buffers_; }
  FreeListStats stats() const { return free_list_.stats(); }

 private:
  DeviceBufferPool(const Device& device, std::vector<std::byte*> buffers,
                   size_t buffer_bytes, bool owns_buffers = true);

  const Device device_;
  const std::vector<std::byte*> buffers_;
  const size_t buffer_bytes_;
  const bool owns_buffers_;
  FencedFreeList free_list_;
};

}  // namespace pinwheel

#endif  // PINWHEEL_TRANSFER_DEVICE_BUFFER_POOL_H_
