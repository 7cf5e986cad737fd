#include "pinning/pinned_ring.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

#include "pinning/deferred_free.h"

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
  if (options.allocate_on_first_use &&
      (options.depth < 0 || options.depth > options.slots)) {
    return absl::InvalidArgumentError(
        absl::StrCat("pinned ring: depth = ", options.depth,
                     ": must be in 0..slots = ", options.slots));
  }
  if (options.allocate_on_first_use) {
    return std::unique_ptr<PinnedRing>(
        new PinnedRing(HostAllocation(), options, stride));
  }
  absl::StatusOr<HostAllocation> block =
      HostAllocation::Allocate(total, options.memory, options.cuda_device);
  if (!block.ok()) {
    return absl::Status(
        block.status().code(),
        absl::StrCat("pinned ring of ", options.slots, " slots × ",
                     options.slot_bytes, " bytes: ", block.status().message()));
  }
  return std::unique_ptr<PinnedRing>(
      new PinnedRing(*std::move(block), options, stride));
}

PinnedRing::PinnedRing(HostAllocation block, const PinnedRingOptions& options,
                       size_t slot_stride)
    : block_(std::move(block)),
      memory_(options.memory),
      cuda_device_(options.cuda_device),
      slots_(options.slots),
      slot_bytes_(options.slot_bytes),
      slot_stride_(slot_stride),
      free_list_(options.slots) {
  if (options.allocate_on_first_use) {
    slot_blocks_.resize(static_cast<size_t>(slots_));
    // A block allocated with no device named is freed where the context it
    // was made in is current: on the thread that gives it up. Pageable
    // rings defer too, so the host backend runs the same path in CI.
    if (memory_ == HostMemoryKind::kPageable || cuda_device_ >= 0) {
      freer_ = std::make_unique<internal::DeferredFree>();
    }
    if (options.depth > 0) free_list_.SetLimit(options.depth);
  } else {
    bytes_pinned_ = slot_stride_ * static_cast<size_t>(slots_);
    bytes_pinned_peak_ = bytes_pinned_.load();
  }
}

absl::Status PinnedRing::EnsureAllocated(int index) {
  HostAllocation& block = slot_blocks_[static_cast<size_t>(index)];
  if (block.data() != nullptr) return absl::OkStatus();
  absl::StatusOr<HostAllocation> made =
      HostAllocation::Allocate(slot_stride_, memory_, cuda_device_);
  if (!made.ok()) {
    return absl::Status(
        made.status().code(),
        absl::StrCat("pinned ring: slot ", index, " of ", slot_bytes_,
                     " bytes, allocated as the prefetch depth grew to ",
                     depth(), ": ", made.status().message()));
  }
  block = *std::move(made);
  const size_t now = bytes_pinned_.fetch_add(slot_stride_) + slot_stride_;
  size_t peak = bytes_pinned_peak_.load();
  while (now > peak && !bytes_pinned_peak_.compare_exchange_weak(peak, now)) {
  }
  return absl::OkStatus();
}

void PinnedRing::SetDepth(int depth) { free_list_.SetLimit(depth); }

int PinnedRing::slots_pinned() const {
  if (slot_blocks_.empty()) return slots_;
  return static_cast<int>(bytes_pinned_.load() / slot_stride_);
}

size_t PinnedRing::FreeIdleAboveDepth() {
  if (slot_blocks_.empty()) return 0;
  size_t freed = 0;
  for (const int index : free_list_.IdleAboveLimit()) {
    HostAllocation& block = slot_blocks_[static_cast<size_t>(index)];
    if (block.data() == nullptr) continue;
    if (freer_ != nullptr) {
      freer_->Free(std::move(block));  // leaves `block` empty
    } else {
      block = HostAllocation();
    }
    freed += slot_stride_;
  }
  bytes_pinned_.fetch_sub(freed);
  return freed;
}

PinnedRing::~PinnedRing() {
  free_list_.Cancel();
  free_list_.WaitForFences().IgnoreError();  // teardown: free regardless
  freer_.reset();  // the slots given up are freed before the ring is gone
}

absl::StatusOr<PinnedRing::Slot> PinnedRing::Acquire() {
  absl::StatusOr<int> index = free_list_.Acquire();
  if (!index.ok()) return index.status();
  if (!slot_blocks_.empty()) {
    absl::Status allocated = EnsureAllocated(*index);
    if (!allocated.ok()) {
      free_list_.Release(*index, nullptr);
      return allocated;
    }
  }
  return slot(*index);
}

std::optional<PinnedRing::Slot> PinnedRing::TryAcquire() {
  std::optional<int> index = free_list_.TryAcquire();
  if (!index) return std::nullopt;
  if (!slot_blocks_.empty() && !EnsureAllocated(*index).ok()) {
    free_list_.Release(*index, nullptr);
    return std::nullopt;
  }
  return slot(*index);
}

void PinnedRing::Recycle(int index, std::shared_ptr<const Fence> copy_done) {
  free_list_.Release(index, std::move(copy_done));
}

void PinnedRing::Cancel() { free_list_.Cancel(); }
void PinnedRing::Resume() { free_list_.Resume(); }

PinnedRing::Slot PinnedRing::slot(int index) const {
  if (!slot_blocks_.empty()) {
    return Slot{index, slot_blocks_[static_cast<size_t>(index)].data(),
                slot_bytes_};
  }
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
  stats.time_waited_on_copy = list.fence_time_waited;
  stats.bytes_pinned = bytes_pinned_.load();
  stats.bytes_pinned_peak = bytes_pinned_peak_.load();
  stats.depth = free_list_.limit();
  return stats;
}

}  // namespace pinwheel
