#include "transfer/device_buffer_pool.h"

#include <cstdint>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

#include "pinning/base/mutex.h"
#include "transfer/internal/backend.h"
#include "transfer/sample_layout.h"

namespace pinwheel {
namespace {

// Note [one pool per static buffer]
// Two pools over the same caller memory would each hand it out behind its
// own fences: a second loader could copy into a buffer whose batch the first
// one's consumer still reads. So the byte ranges of every live borrowing
// pool are kept here, and Borrow() refuses memory another live pool holds.
// A pool lives until its loader is gone and every batch (and DLPack view)
// of it released, and lets go of its ranges after waiting for its fences.
struct BorrowedRanges {
  absl::Mutex mu;
  // [begin, end) of each buffer of each live borrowing pool.
  std::vector<std::pair<uintptr_t, uintptr_t>> ranges ABSL_GUARDED_BY(mu);
};

BorrowedRanges& Borrowed() {
  static auto* borrowed = new BorrowedRanges();  // never destroyed
  return *borrowed;
}

}  // namespace

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

absl::StatusOr<std::shared_ptr<DeviceBufferPool>> DeviceBufferPool::Borrow(
    const Device& device, const std::vector<StaticDeviceBuffer>& buffers,
    size_t buffer_bytes) {
  const int count = static_cast<int>(buffers.size());
  if (count < 1 || count > 64) {
    return absl::InvalidArgumentError(absl::StrCat(
        "static device buffers: ", count, " given: must be 1..64"));
  }
  if (buffer_bytes == 0) {
    return absl::InvalidArgumentError(
        "static device buffers: buffer_bytes = 0: must be > 0");
  }
  auto name = [&](int i) {
    return absl::StrCat("static device buffer ", i, " of ", count, " (0x",
                        absl::Hex(reinterpret_cast<uintptr_t>(buffers[i].data)),
                        ", ", buffers[i].bytes, " bytes)");
  };
  auto refuse = [&](int i, absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat(name(i), ": ", why));
  };
  internal::Backend& backend = internal::BackendFor(device);
  std::vector<std::byte*> borrowed;
  for (int i = 0; i < count; ++i) {
    const StaticDeviceBuffer& buffer = buffers[i];
    const auto address = reinterpret_cast<uintptr_t>(buffer.data);
    if (buffer.data == nullptr) return refuse(i, "is a null pointer");
    if (address % BatchLayout::kFieldAlignment != 0) {
      return refuse(
          i, absl::StrCat("is not aligned to ", BatchLayout::kFieldAlignment,
                          " bytes (cudaMalloc's alignment; the "
                          "fields' offsets assume it)"));
    }
    if (buffer.bytes < buffer_bytes) {
      return refuse(i, absl::StrCat("is too small: each batch needs ",
                                    buffer_bytes, " bytes"));
    }
    for (int j = 0; j < i; ++j) {
      const auto other = reinterpret_cast<uintptr_t>(buffers[j].data);
      if (address < other + buffer_bytes && other < address + buffer_bytes) {
        return refuse(
            i, absl::StrCat("overlaps static device buffer ", j, " (the first ",
                            buffer_bytes, " bytes of each are written)"));
      }
    }
    absl::Status memory =
        backend.CheckDeviceMemory(device.ordinal(), buffer.data);
    if (!memory.ok()) {
      return refuse(i, absl::StrCat("is not device memory of ",
                                    device.ToString(), ": ", memory.message()));
    }
    borrowed.push_back(static_cast<std::byte*>(buffer.data));
  }
  {  // See Note [one pool per static buffer].
    BorrowedRanges& live = Borrowed();
    internal::MutexLock lock(&live.mu);
    for (int i = 0; i < count; ++i) {
      const auto begin = reinterpret_cast<uintptr_t>(buffers[i].data);
      for (const auto& [other_begin, other_end] : live.ranges) {
        if (begin < other_end && other_begin < begin + buffer_bytes) {
          return absl::FailedPreconditionError(absl::StrCat(
              name(i),
              ": in use by another loader (its loader, or a batch or DLPack "
              "view of it, is still alive); one loader at a time per "
              "buffer"));
        }
      }
    }
    for (int i = 0; i < count; ++i) {
      const auto begin = reinterpret_cast<uintptr_t>(buffers[i].data);
      live.ranges.emplace_back(begin, begin + buffer_bytes);
    }
  }
  return std::shared_ptr<DeviceBufferPool>(new DeviceBufferPool(
      device, std::move(borrowed), buffer_bytes, /*owns_buffers=*/false));
}

DeviceBufferPool::DeviceBufferPool(const Device& device,
                                   std::vector<std::byte*> buffers,
                                   size_t buffer_bytes, bool owns_buffers)
    : device_(device),
      buffers_(std::move(buffers)),
      buffer_bytes_(buffer_bytes),
      owns_buffers_(owns_buffers),
      free_list_(static_cast<int>(buffers_.size())) {}

DeviceBufferPool::~DeviceBufferPool() {
  // Copies into, and kernels reading, a buffer are fenced by the events the
  // free list still holds: wait for them before freeing the memory.
  free_list_.Cancel();
  free_list_.WaitForFences().IgnoreError();  // teardown: free regardless
  if (!owns_buffers_) {  // the caller's (Borrow()): let go of them
    BorrowedRanges& live = Borrowed();
    internal::MutexLock lock(&live.mu);
    for (std::byte* p : buffers_) {
      const auto begin = reinterpret_cast<uintptr_t>(p);
      std::erase(live.ranges, std::make_pair(begin, begin + buffer_bytes_));
    }
    return;
  }
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
