#include "pinning/host_registration.h"

#include "absl/strings/str_cat.h"

#include "pinning/base/mutex.h"

#ifdef PINWHEEL_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "pinning/base/cuda_device_guard.h"
#include "pinning/base/cuda_status.h"
#endif

namespace pinwheel {

HostRegistrar CudaHostRegistrar() {
  HostRegistrar registrar;
#ifdef PINWHEEL_HAVE_CUDA
  registrar.register_memory = [](absl::Span<const std::byte> region,
                                 int device) -> absl::Status {
    if (device < 0) return absl::OkStatus();  // the host backend
    // Not cudaHostRegisterReadOnly, although the gather only reads: see
    // Note [registered pages stay writable] in host_registration.h.
    void* data = const_cast<std::byte*>(region.data());
    constexpr unsigned kFlags =
        cudaHostRegisterMapped | cudaHostRegisterPortable;
    cudaError_t error = cudaHostRegister(data, region.size(), kFlags);
    if (error != cudaSuccess) {
      cudaGetLastError();  // not sticky: clear it
      return CudaStatus(error, "cudaHostRegister");
    }
    return absl::OkStatus();
  };
  registrar.unregister_memory = [](const std::byte* data, bool cuda) {
    if (!cuda) return;
    if (cudaHostUnregister(const_cast<std::byte*>(data)) != cudaSuccess) {
      cudaGetLastError();
    }
  };
  registrar.device_pointer =
      [](const std::byte* data,
         int device) -> absl::StatusOr<const std::byte*> {
    if (device < 0) return data;
    internal::ScopedCudaDevice on_device(device);
    if (!on_device.status().ok()) return on_device.status();
    void* device_data = nullptr;
    const cudaError_t error =
        cudaHostGetDevicePointer(&device_data, const_cast<std::byte*>(data), 0);
    if (error != cudaSuccess) {
      cudaGetLastError();
      return CudaStatus(error, "cudaHostGetDevicePointer");
    }
    return static_cast<const std::byte*>(device_data);
  };
#else
  registrar.register_memory = [](absl::Span<const std::byte>,
                                 int device) -> absl::Status {
    if (device < 0) return absl::OkStatus();  // the host backend
    return absl::UnimplementedError(
        "host memory registration: built without CUDA");
  };
  registrar.unregister_memory = [](const std::byte*, bool) {};
  registrar.device_pointer =
      [](const std::byte* data,
         int device) -> absl::StatusOr<const std::byte*> {
    if (device < 0) return data;
    return absl::UnimplementedError("device pointers: built without CUDA");
  };
#endif
  return registrar;
}

HostRegistry& HostRegistry::Global() {
  static HostRegistry* const registry = new HostRegistry(CudaHostRegistrar());
  return *registry;
}

HostRegistration::~HostRegistration() { registry_->Release(*this); }

absl::StatusOr<std::shared_ptr<const HostRegistration>> HostRegistry::Register(
    absl::Span<const std::byte> region, int cuda_device) {
  if (region.empty()) {
    return absl::FailedPreconditionError(
        "host memory registration of an empty region");
  }
  const bool cuda = cuda_device >= 0;
  const Key key = KeyOf(region, cuda);
  HostRegistrar registrar;
  bool registers = false;
  {
    internal::MutexLock lock(&mu_);
    // Wait while another thread registers or unregisters the same bytes.
    internal::Await(mu_, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      auto it = entries_.find(key);
      return it == entries_.end() ||
             it->second.state == Entry::State::kRegistered;
    });
    auto [it, inserted] = entries_.try_emplace(key);
    ++it->second.refs;
    registers = inserted;
    registrar = registrar_;
  }
  absl::Status registered = absl::OkStatus();
  if (registers) registered = registrar.register_memory(region, cuda_device);
  const std::byte* device_data = region.data();
  if (registered.ok()) {
    absl::StatusOr<const std::byte*> pointer =
        registrar.device_pointer(region.data(), cuda_device);
    if (pointer.ok()) {
      device_data = *pointer;
    } else {
      registered = pointer.status();
      if (registers) registrar.unregister_memory(region.data(), cuda);
    }
  }
  {
    internal::MutexLock lock(&mu_);
    auto it = entries_.find(key);
    if (registered.ok()) {
      it->second.state = Entry::State::kRegistered;
    } else if (registers) {
      // No one joined a registration under way (they wait for kRegistered):
      // a refused one leaves no entry, and a later call tries again.
      entries_.erase(it);
    } else {
      --it->second.refs;  // others still hold it
    }
  }
  if (!registered.ok()) {
    return absl::Status(
        registered.code(),
        absl::StrCat("registering ", region.size(), " bytes of host memory at ",
                     absl::Hex(reinterpret_cast<uintptr_t>(region.data())),
                     cuda ? absl::StrCat(" for cuda:", cuda_device) : "", ": ",
                     registered.message()));
  }
  return std::shared_ptr<const HostRegistration>(
      new HostRegistration(this, region, cuda, device_data));
}

void HostRegistry::Release(const HostRegistration& registration) {
  const Key key = KeyOf(registration.region_, registration.cuda_);
  HostRegistrar registrar;
  {
    internal::MutexLock lock(&mu_);
    auto it = entries_.find(key);
    if (it == entries_.end() || --it->second.refs > 0) return;
    it->second.state = Entry::State::kUnregistering;
    registrar = registrar_;
  }
  registrar.unregister_memory(registration.region_.data(), registration.cuda_);
  internal::MutexLock lock(&mu_);
  entries_.erase(key);
}

int64_t HostRegistry::references(absl::Span<const std::byte> region,
                                 bool cuda) const {
  internal::MutexLock lock(&mu_);
  auto it = entries_.find(KeyOf(region, cuda));
  return it == entries_.end() || it->second.state != Entry::State::kRegistered
             ? 0
             : it->second.refs;
}

void HostRegistry::SetRegistrarForTesting(HostRegistrar registrar) {
  internal::MutexLock lock(&mu_);
  registrar_ = std::move(registrar);
}

}  // namespace pinwheel
