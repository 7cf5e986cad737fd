// PinnedRing: a fixed ring of page-locked slots that workers fill with
// batches, allocated once (slots × slot_bytes) and reused forever.
//
// A slot is refilled only after the fence of its last copy (`copy_done`)
// has completed: the pinned_memory/non_blocking hazard in PyTorch's tutorial
// (overwriting host memory while the DMA still reads it) cannot happen.
// Acquire() blocks while every slot is in flight: that is the loader's
// back-pressure and its prefetch depth.
//
// Example:
//   PINWHEEL_ASSIGN_OR_RETURN(std::unique_ptr<PinnedRing> ring,
//       PinnedRing::Create({.slots = 4, .slot_bytes = 1 << 20}));
//   PINWHEEL_ASSIGN_OR_RETURN(PinnedRing::Slot slot, ring->Acquire());
//   FillBatch(slot.data, slot.size);
//   IssueCopy(slot.data, &copy_done);
//   ring->Recycle(slot.index, copy_done);
#ifndef PINWHEEL_PINNING_PINNED_RING_H_
#define PINWHEEL_PINNING_PINNED_RING_H_

#include <atomic>
#include <cstddef>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"

#include "pinning/fence.h"
#include "pinning/fenced_free_list.h"
#include "pinning/host_allocation.h"
#include "pinning/pinned_ring_stats.h"

namespace pinwheel {
namespace internal {
class DeferredFree;
}  // namespace internal

struct PinnedRingOptions {
  // Number of slots: batches being filled or copied at once. Range 1..1024.
  int slots = 4;
  // Bytes in each slot; every slot start is aligned to 4096. Must be > 0.
  size_t slot_bytes = 0;
  // kPageLocked (cudaHostAlloc) for the cuda backend, kPageable otherwise.
  HostMemoryKind memory = HostMemoryKind::kPageLocked;
  // kPageLocked: the GPU whose context allocates and frees the slots (-1:
  // whichever is current). See HostAllocation::Allocate.
  int cuda_device = -1;
  // false: every slot allocated by Create(), in one block. true: each slot
  // is a block of its own, allocated by the Acquire() that first takes it
  // and freed again by FreeIdleAboveDepth(); only `depth` slots are handed
  // out at once (SetDepth()). See Note [a ring that grows].
  bool allocate_on_first_use = false;
  // With allocate_on_first_use: the slots handed out at first, 1..slots.
  int depth = 0;  // 0: slots
};

// Note [a ring that grows]
// A loader whose prefetch depth is tuned at run time (LoaderOptions::kAuto)
// may use at most `slots` slots but should pin no more than its current
// depth needs. Its ring is made with allocate_on_first_use: the free list
// hands out the lowest free slot under the depth (Note [a limit on the
// entries] in fenced_free_list.h), a slot is allocated when first acquired
// (on the worker that fills it, so first touched where it runs), and
// slots above a lowered depth are freed once idle. Allocations then happen
// while the loader runs, but only when the depth grows: a handful of times
// (the controller changes it at most once per window), never per batch.

// Thread-safe.
class PinnedRing {
 public:
  // A borrowed view of one slot, valid until it is recycled.
  struct Slot {
    int index = -1;
    std::byte* data = nullptr;
    size_t size = 0;
  };

  // Returns a ring with every slot allocated, or InvalidArgument for bad
  // options, or ResourceExhausted naming the bytes that could not be had.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<PinnedRing>> Create(
      const PinnedRingOptions& options);

  PinnedRing(const PinnedRing&) = delete;
  PinnedRing& operator=(const PinnedRing&) = delete;
  // Waits for the copy_done of every slot still behind one, then frees the
  // memory: no DMA ever reads freed host memory.
  ~PinnedRing();

  // Returns a free slot, blocking while all are in flight. Cancelled after
  // Cancel().
  [[nodiscard]] absl::StatusOr<Slot> Acquire();

  // Returns a free slot without blocking, or nullopt.
  [[nodiscard]] std::optional<Slot> TryAcquire();

  // Gives slot `index` back once `copy_done` has completed (at once when
  // `copy_done` is null: nothing reads the slot).
  void Recycle(int index, std::shared_ptr<const Fence> copy_done);

  // Wakes every blocked Acquire() with Cancelled. Idempotent.
  void Cancel();

  // Undoes Cancel(), for restarting the pipeline that fills the ring.
  void Resume();

  // Returns slot `index` (any state; data is null for a slot of an
  // allocate_on_first_use ring not yet allocated).
  // REQUIRES: 0 <= index < slots.
  Slot slot(int index) const;

  // Hands out only slots 0..depth-1 from now on (clamped to 1..slots).
  // Slots above it that are in use stay so until recycled.
  void SetDepth(int depth);
  int depth() const { return free_list_.limit(); }
  // allocate_on_first_use: frees the slots at or above the depth that are
  // idle (not acquired, their copy_done complete). Returns the bytes freed,
  // which leave bytes_pinned at once; a ring made for a given cuda_device
  // (>= 0), or of pageable memory, frees them on a thread of its own, so the
  // caller never waits for the device's queued work (Note [slots freed off
  // the caller's thread] in pinning/deferred_free.h; the destructor waits
  // for those frees). Call from one thread at a time, the one calling
  // SetDepth().
  size_t FreeIdleAboveDepth();

  // The slots that hold memory now: slots() for a ring allocated up front,
  // those allocated so far for one allocated on first use.
  int slots_pinned() const;
  int slots() const { return slots_; }
  size_t slot_bytes() const { return slot_bytes_; }
  HostMemoryKind memory() const { return memory_; }
  PinnedRingStats stats() const;

 private:
  PinnedRing(HostAllocation block, const PinnedRingOptions& options,
             size_t slot_stride);
  // allocate_on_first_use: allocates slot `index` when it has no memory.
  absl::Status EnsureAllocated(int index);

  HostAllocation block_;  // every slot (allocate_on_first_use: empty)
  // allocate_on_first_use: each slot's own block, written only by the
  // thread holding the slot (allocated in Acquire(), freed while idle
  // above the depth), so the free list's lock orders every access.
  std::vector<HostAllocation> slot_blocks_;
  // Frees the slots FreeIdleAboveDepth() gives up (null: freed there).
  std::unique_ptr<internal::DeferredFree> freer_;
  const HostMemoryKind memory_;
  const int cuda_device_;
  std::atomic<size_t> bytes_pinned_{0};
  std::atomic<size_t> bytes_pinned_peak_{0};
  const int slots_;
  const size_t slot_bytes_;
  const size_t slot_stride_;
  FencedFreeList free_list_;
};

}  // namespace pinwheel

#endif  // PINWHEEL_PINNING_PINNED_RING_H_
