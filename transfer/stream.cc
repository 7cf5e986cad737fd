// Stream and Event: RAII owners of backend handles.
#include "transfer/stream.h"

#include <utility>

#include "absl/status/status.h"
#include "pinning/base/status_macros.h"
#include "transfer/event.h"
#include "transfer/internal/backend.h"

namespace pinwheel {
namespace internal {

struct StreamImpl {
  Device device;
  Backend* backend;
  void* handle;
  bool owned;
  ~StreamImpl() {
    if (owned && handle != nullptr) backend->DestroyStream(device.ordinal(), handle);
  }
};

struct EventImpl {
  Device device;
  Backend* backend;
  void* handle;
  ~EventImpl() {
    if (handle != nullptr) backend->DestroyEvent(device.ordinal(), handle);
  }
};

}  // namespace internal

absl::StatusOr<Stream> Stream::Create(const Device& device) {
  internal::Backend& backend = internal::BackendFor(device);
  PINWHEEL_ASSIGN_OR_RETURN(void* handle, backend.CreateStream(device.ordinal()));
  // Built in place: a temporary StreamImpl would destroy the handle.
  return Stream(std::unique_ptr<internal::StreamImpl>(
      new internal::StreamImpl{device, &backend, handle, /*owned=*/true}));
}

Stream Stream::Borrow(const Device& device, void* native) {
  return Stream(std::unique_ptr<internal::StreamImpl>(new internal::StreamImpl{
      device, &internal::BackendFor(device), native, /*owned=*/false}));
}

Stream::Stream(std::unique_ptr<internal::StreamImpl> impl)
    : impl_(std::move(impl)) {}
Stream::Stream(Stream&&) noexcept = default;
Stream& Stream::operator=(Stream&&) noexcept = default;
Stream::~Stream() = default;

absl::Status Stream::CopyToDeviceAsync(void* dst, const void* src,
                                       size_t bytes) const {
  return impl_->backend->CopyAsync(impl_->device.ordinal(), impl_->handle, dst,
                                   src, bytes,
                                   internal::CopyDirection::kHostToDevice);
}

absl::Status Stream::CopyToHostAsync(void* dst, const void* src,
                                     size_t bytes) const {
  return impl_->backend->CopyAsync(impl_->device.ordinal(), impl_->handle, dst,
                                   src, bytes,
                                   internal::CopyDirection::kDeviceToHost);
}

absl::Status Stream::WaitFor(const Event& event) const {
  return impl_->backend->StreamWaitEvent(impl_->device.ordinal(), impl_->handle, event.impl()->handle);
}

absl::Status Stream::Synchronize() const {
  return impl_->backend->SynchronizeStream(impl_->device.ordinal(), impl_->handle);
}

const Device& Stream::device() const { return impl_->device; }
void* Stream::native_handle() const { return impl_->handle; }

absl::StatusOr<std::shared_ptr<Event>> Event::Create(const Device& device) {
  internal::Backend& backend = internal::BackendFor(device);
  PINWHEEL_ASSIGN_OR_RETURN(void* handle, backend.CreateEvent(device.ordinal()));
  return std::make_shared<Event>(std::unique_ptr<internal::EventImpl>(
      new internal::EventImpl{device, &backend, handle}));
}

Event::Event(std::unique_ptr<internal::EventImpl> impl) : impl_(std::move(impl)) {}
Event::~Event() = default;

absl::Status Event::Record(const Stream& stream) {
  return impl_->backend->RecordEvent(impl_->device.ordinal(), impl_->handle, stream.impl()->handle);
}

absl::StatusOr<bool> Event::Query() const {
  return impl_->backend->QueryEvent(impl_->device.ordinal(), impl_->handle);
}

absl::Status Event::Wait() const {
  return impl_->backend->SynchronizeEvent(impl_->device.ordinal(), impl_->handle);
}

const Device& Event::device() const { return impl_->device; }
void* Event::native_handle() const {
  return impl_->device.is_cuda() ? impl_->handle : nullptr;
}

}  // namespace pinwheel
