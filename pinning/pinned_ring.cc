#include "pinning/pinned_ring.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace pinwheel {
namespace {
constexpr size_t kSlotAlignment = 4096;
}  // namespace

absl::StatusOr<std::unique_ptr<PinnedRing>> PinnedRing::Create(
    const PinnedRingOptions& options) {
  if (options.slots < 1 || options.slots > 1024) {
    return absl::InvalidArgumentError(absl::StrCat(
        "pinned ring: slots = ", options.slots, ": must be in 1..1024"));
  }
  if (options.slot_bytes == 0) {
    return absl::InvalidArgumentError(
        "pinned ring: slot_bytes = 0: must be > 0");
  }
  const size_t stride = (options.slot_bytes + kSlotAlignment - 1) /
                        kSlotAlignment * kSlotAlignment;
  const size_t total = stride * static_cast<size_t>(options.slots);
  if (total / static_cast<size_t>(options.slots) != stride) {
    return absl::InvalidArgumentError(
        absl::StrCat("pinned ring: ", options.slots, " slots of ",
                     options.slot_bytes, " bytes overflow"));
  }
  absl::StatusOr<HostAllocation> block =
      HostAllocation::Allocate(total, options.memory, options.cuda_device);
  if (!block.ok()) {
    return absl::Status(
        block.status().code(),
        absl::StrCat("pinned ring of ", options.slots, " slots × ",
                     options.slot_bytes, " bytes: ", block.status().message()));
  }
  return std::unique_ptr<PinnedRing>(new PinnedRing(
      *std::move(block), options.slots, options.slot_bytes, stride));
}

PinnedRing::PinnedRing(HostAllocation block, int slots, size_t slot_bytes,
                       size_t slot_stride)
    : block_(std::move(block)),
      slots_(slots),
      slot_bytes_(slot_bytes),
      slot_stride_(slot_stride),
      free_list_(slots) {}

PinnedRing::~PinnedRing() {
  free_list_.Cancel();
  free_list_.WaitForFences().IgnoreError();  // teardown: free regardless
}

absl::StatusOr<PinnedRing::Slot> PinnedRing::Acquire() {
  absl::StatusOr<int> index = free_list_.Acquire();
  if (!index.ok()) return index.status();
  return slot(*index);
}

std::optional<PinnedRing::Slot> PinnedRing::TryAcquire() {
  std::optional<int> index = free_list_.TryAcquire();
  if (!index) return std::nullopt;
  return slot(*index);
}

void PinnedRing::Recycle(int index, std::shared_ptr<const Fence> copy_done) {
  free_list_.Release(index, std::move(copy_done));
}

void PinnedRing::Cancel() { free_list_.Cancel(); }
void PinnedRing::Resume() { free_list_.Resume(); }

PinnedRing::Slot PinnedRing::slot(int index) const {
  return Slot{index, block_.data() + slot_stride_ * static_cast<size_t>(index),
              slot_bytes_};
}

PinnedRingStats PinnedRing::stats() const {
  const FreeListStats list = free_list_.stats();
  PinnedRingStats stats;
  stats.slots = slots_;
  stats.slots_in_flight = list.held + list.fenced;
  stats.acquires = list.acquires;
  stats.acquire_waits = list.acquire_waits;
  stats.time_waited = list.time_waited;
  stats.bytes_pinned = slot_stride_ * static_cast<size_t>(slots_);
  return stats;
}

}  // namespace pinwheel
