// Event: marks a point in a stream's queue; completes when the work queued
// before it has finished. cuda backend: a cudaEvent_t created with timing
// disabled; host backend: a completion flag. An Event is a Fence, so pinned
// slots and device buffers can be recycled behind it.
//
// Example:
//   PINWHEEL_ASSIGN_OR_RETURN(std::shared_ptr<Event> done, Event::Create(d));
//   PINWHEEL_RETURN_IF_ERROR(copy_stream.CopyToDeviceAsync(dst, src, n));
//   PINWHEEL_RETURN_IF_ERROR(done->Record(copy_stream));
//   PINWHEEL_RETURN_IF_ERROR(done->Wait());
#ifndef PINWHEEL_TRANSFER_EVENT_H_
#define PINWHEEL_TRANSFER_EVENT_H_

#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include "pinning/fence.h"
#include "transfer/device.h"

namespace pinwheel {

class Stream;
namespace internal {
struct EventImpl;
}

// Thread-safe. Not copyable; shared through std::shared_ptr.
class Event final : public Fence {
 public:
  [[nodiscard]] static absl::StatusOr<std::shared_ptr<Event>> Create(
      const Device& device);

  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  ~Event() override;

  // Captures the work queued on `stream` so far. An event that was never
  // recorded counts as complete.
  [[nodiscard]] absl::Status Record(const Stream& stream);
  [[nodiscard]] absl::StatusOr<bool> Query() const override;
  [[nodiscard]] absl::Status Wait() const override;

  const Device& device() const;
  // cuda: the cudaEvent_t; host: nullptr.
  void* native_handle() const;
  internal::EventImpl* impl() const { return impl_.get(); }

 private:
  explicit Event(std::unique_ptr<internal::EventImpl> impl);

  std::unique_ptr<internal::EventImpl> impl_;
};

}  // namespace pinwheel

#endif  // PINWHEEL_TRANSFER_EVENT_H_
