// DeferredFree: frees host allocations on a thread of its own, so that the
// thread that gives a block up never waits for the free (Note [slots freed
// off the caller's thread]).
//
// Example (PinnedRing, on a lowered depth):
//   internal::DeferredFree freer;
//   freer.Free(std::move(slot_block));  // returns at once
//   ...
//   freer.Drain();  // every block handed over so far is freed
#ifndef PINWHEEL_PINNING_DEFERRED_FREE_H_
#define PINWHEEL_PINNING_DEFERRED_FREE_H_

#include <cstdint>
#include <deque>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

#include "pinning/host_allocation.h"

namespace pinwheel::internal {

// Note [slots freed off the caller's thread]
// cudaFreeHost waits until the device has finished the work already queued
// (measured on an H200 host, session 19: 16 frees of 512 KB slots took
// 56.8 ms behind 50 queued 64 MB copies, against 4.9-7.5 ms for the 16
// allocations). The auto-tuner lowers a ring's depth on the consumer's
// thread, between two of its steps, so a free there would stall the
// training loop until its own GPU queue drained, losing the lead its
// launches had on the device. The blocks go to one thread that frees them
// in the order given; it starts with the first block, and the destructor
// frees what is left before it returns. Measured (session 20, one H200, a
// ring of 16 slots of 512 KB lowered to 2 behind 50 queued 64 MB copies):
// FreeIdleAboveDepth() held its caller 61.5-61.9 ms before, 0.05-0.10 ms
// after.

// Thread-safe.
class DeferredFree {
 public:
  DeferredFree() = default;
  DeferredFree(const DeferredFree&) = delete;
  DeferredFree& operator=(const DeferredFree&) = delete;
  // Frees every block handed over, then joins the thread.
  ~DeferredFree();

  // Hands `block` over to be freed; returns without waiting for the free.
  void Free(HostAllocation block);

  // Returns once every block handed over before the call is freed.
  void Drain();

  // Blocks handed over and freed since construction.
  int64_t freed() const;

 private:
  void Run();

  mutable absl::Mutex mu_;
  std::deque<HostAllocation> queued_ ABSL_GUARDED_BY(mu_);
  int64_t handed_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t freed_ ABSL_GUARDED_BY(mu_) = 0;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_ ABSL_GUARDED_BY(mu_);  // started by the first Free()
};

}  // namespace pinwheel::internal

#endif  // PINWHEEL_PINNING_DEFERRED_FREE_H_
