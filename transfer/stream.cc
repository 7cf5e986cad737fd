// Stream: the RAII owner (or borrower) of a backend stream handle.
#include "transfer/stream.h"

#include <utility>

#include "absl/status/status.h"

#include "pinning/base/status_macros.h"
#include "transfer/event.h"
#include "transfer/internal/backend.h"
#include "transfer/internal/handles.h"

namespace pinwheel {

absl::StatusOr<Stream> Stream::Create(const Device& device) {
  internal::Backend& backend = internal::BackendFor(device);
  PINWHEEL_ASSIGN_OR_RETURN(void* handle,
                            backend.CreateStream(device.ordinal()));
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

absl::Status Stream::CopyOnDeviceAsync(void* dst, const void* src,
                                       size_t bytes) const {
  return impl_->backend->CopyAsync(impl_->device.ordinal(), impl_->handle, dst,
                                   src, bytes,
                                   internal::CopyDirection::kDeviceToDevice);
}

absl::Status Stream::ZeroAsync(void* dst, size_t bytes) const {
  return impl_->backend->ZeroAsync(impl_->device.ordinal(), impl_->handle, dst,
                                   bytes);
}

absl::Status Stream::WaitFor(const Event& event) const {
  return impl_->backend->StreamWaitEvent(impl_->device.ordinal(), impl_->handle,
                                         event.impl()->handle);
}

absl::Status Stream::EnqueueHostTask(std::function<void()> task) const {
  return impl_->backend->LaunchHostTask(impl_->device.ordinal(), impl_->handle,
                                        std::move(task));
}

absl::Status Stream::Synchronize() const {
  return impl_->backend->SynchronizeStream(impl_->device.ordinal(),
                                           impl_->handle);
}

const Device& Stream::device() const { return impl_->device; }
void* Stream::native_handle() const { return impl_->handle; }

}  // namespace pinwheel
