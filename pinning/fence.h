// Fence: the completion of work issued elsewhere (a CUDA event, or a host
// completion flag). Pinned slots and device buffers are reused only once the
// fence of their last use has completed.
//
// Example:
//   std::shared_ptr<const Fence> copy_done = ...;  // recorded after the copy
//   ring->Recycle(slot.index, copy_done);          // reusable once it fires
#ifndef PINWHEEL_PINNING_FENCE_H_
#define PINWHEEL_PINNING_FENCE_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace pinwheel {

// Thread-safe: implementations must allow Query() and Wait() from any thread.
class Fence {
 public:
  virtual ~Fence() = default;

  // Returns true when the fenced work has completed, without blocking.
  [[nodiscard]] virtual absl::StatusOr<bool> Query() const = 0;

  // Returns once the fenced work has completed (or failed: then its error).
  [[nodiscard]] virtual absl::Status Wait() const = 0;
};

}  // namespace pinwheel

#endif  // PINWHEEL_PINNING_FENCE_H_
