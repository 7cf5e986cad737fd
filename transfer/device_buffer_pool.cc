#include "transfer/device_buffer_pool.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

#include "transfer/internal/backend.h"

namespace pinwheel {

absl::StatusOr<std::shared_ptr<DeviceBufferPool>> DeviceBufferPool::Create(
    const Device& device, int buffers, size_t buffer_bytes) {
  if (buffers < 1 || buffers > 64) {
    return absl::InvalidArgumentError(absl::StrCat(
        "device buffer pool: buffers = ", buffers, ": must be in 1..64"));
  }
  if (buffer_bytes == 0) {
    return absl::InvalidArgumentError(
        "device buffer pool: buffer_bytes = 0: must be > 0");
  }
  internal::Backend& backend = internal::BackendFor(device);
  std::vector<std::byte*> allocated;
  for (int i = 0; i < buffers; ++i) {
    absl::StatusOr<void*> ptr =
        backend.AllocateDevice(device.ordinal(), buffer_bytes);
    if (!ptr.ok()) {
      for (std::byte* p : allocated) backend.FreeDevice(device.ordinal(), p);
      return absl::Status(
          ptr.status().code(),
          absl::StrCat("device buffer pool of ", buffers, " × ", buffer_bytes,
                       " bytes on ", device.ToString(), ": buffer ", i, ": ",
                       ptr.status().message()));
    }
    allocated.push_back(static_cast<std::byte*>(*ptr));
  }
  return std::shared_ptr<DeviceBufferPool>(
      new DeviceBufferPool(device, std::move(allocated), buffer_bytes));
}

DeviceBufferPool::DeviceBufferPool(const Device& device,
                                   std::vector<std::byte*> buffers,
                                   size_t buffer_bytes)
    : device_(device),
      buffers_(std::move(buffers)),
      buffer_bytes_(buffer_bytes),
      free_list_(static_cast<int>(buffers_.size())) {}

DeviceBufferPool::~DeviceBufferPool() {
  // Copies into, and kernels reading, a buffer are fenced by the events the
  // free list still holds: wait for them before freeing the memory.
  free_list_.Cancel();
  free_list_.WaitForFences().IgnoreError();  // teardown: free regardless
  internal::Backend& backend = internal::BackendFor(device_);
  for (std::byte* p : buffers_) backend.FreeDevice(device_.ordinal(), p);
}

absl::StatusOr<DeviceBufferPool::Buffer> DeviceBufferPool::Acquire(
    bool* waited) {
  absl::StatusOr<int> index = free_list_.Acquire(waited);
  if (!index.ok()) return index.status();
  return Buffer{*index, buffers_[*index], buffer_bytes_};
}

std::optional<DeviceBufferPool::Buffer> DeviceBufferPool::TryAcquire() {
  std::optional<int> index = free_list_.TryAcquire();
  if (!index) return std::nullopt;
  return Buffer{*index, buffers_[*index], buffer_bytes_};
}

void DeviceBufferPool::Release(int index,
                               std::shared_ptr<const Fence> consumed) {
  free_list_.Release(index, std::move(consumed));
}

void DeviceBufferPool::Cancel() { free_list_.Cancel(); }

}  // namespace pinwheel
