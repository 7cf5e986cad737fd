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

#include <cstddef>
#include <memory>
#include <optional>

#include "absl/status/statusor.h"

#include "pinning/fence.h"
#include "pinning/fenced_free_list.h"
#include "pinning/host_allocation.h"
#include "pinning/pinned_ring_stats.h"

namespace pinwheel {

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
};

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

  // Returns slot `index` (any state).
  // REQUIRES: 0 <= index < slots.
  Slot slot(int index) const;

  int slots() const { return slots_; }
  size_t slot_bytes() const { return slot_bytes_; }
  HostMemoryKind memory() const { return block_.kind(); }
  PinnedRingStats stats() const;

 private:
  PinnedRing(HostAllocation block, int slots, size_t slot_bytes,
             size_t slot_stride);

  HostAllocation block_;
  const int slots_;
  const size_t slot_bytes_;
  const size_t slot_stride_;
  FencedFreeList free_list_;
};

}  // namespace pinwheel

#endif  // PINWHEEL_PINNING_PINNED_RING_H_
