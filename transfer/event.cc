// Event: the RAII owner of a backend event handle.
#include "transfer/event.h"

#include <memory>
#include <utility>

#include "absl/status/status.h"

#include "pinning/base/status_macros.h"
#include "transfer/internal/backend.h"
#include "transfer/internal/handles.h"
#include "transfer/stream.h"

namespace pinwheel {

absl::StatusOr<std::shared_ptr<Event>> Event::Create(const Device& device) {
  internal::Backend& backend = internal::BackendFor(device);
  PINWHEEL_ASSIGN_OR_RETURN(void* handle,
                            backend.CreateEvent(device.ordinal()));
  // Built in place: a temporary EventImpl would destroy the handle.
  return std::shared_ptr<Event>(new Event(std::unique_ptr<internal::EventImpl>(
      new internal::EventImpl{device, &backend, handle})));
}

Event::Event(std::unique_ptr<internal::EventImpl> impl)
    : impl_(std::move(impl)) {}
Event::~Event() = default;

absl::Status Event::Record(const Stream& stream) {
  return impl_->backend->RecordEvent(impl_->device.ordinal(), impl_->handle,
                                     stream.impl()->handle);
}

absl::StatusOr<bool> Event::Query() const {
  return impl_->backend->QueryEvent(impl_->device.ordinal(), impl_->handle);
}

absl::Status Event::Wait() const {
  return impl_->backend->SynchronizeEvent(impl_->device.ordinal(),
                                          impl_->handle);
}

const Device& Event::device() const { return impl_->device; }
void* Event::native_handle() const {
  return impl_->device.is_cuda() ? impl_->handle : nullptr;
}

}  // namespace pinwheel
