// HostRegistry: host memory registered with the GPU once per process,
// shared by every loader that gathers from it (loader/gather_source.h).
//
// Registering host memory (cudaHostRegister with Mapped | Portable)
// page-locks it and lets kernels read it over PCIe; it is slow
// (it pins every page) and a second registration of the same pages fails,
// so several loaders in one process (one per GPU) over one dataset share a
// registration: the first Register() of a region registers it, later ones
// take a reference, and the region is unregistered when the last
// HostRegistration is destroyed. The host backend registers nothing (its
// "device" reads host memory as it is: CudaHostRegistrar() does nothing
// for device -1), but goes through the same registry and registrar, so the
// counting and a refused registration are tested without a GPU.
//
// Note [registered pages stay writable]
// Registration works on whole pages, and the gather registers the pages
// around a dataset's arrays (loader/gather/gather_memory.h:
// RegisteredRanges; small arrays are first copied onto pages of their own,
// Note [small arrays are copied onto pages of their own] there, but a large
// array's first and last pages may still be shared), which on the heap hold
// other allocations too: the
// user's (or a test's) std::vector that a device-to-host copy fills. The
// runtime treats every registered address as pinned, so with
// cudaHostRegisterReadOnly (which the gather's reads alone would allow) a
// device-to-host cudaMemcpyAsync into such a neighbour failed with
// cudaErrorInvalidValue and wrote nothing (H100, driver 580: HostRegistry's
// _CUDA neighbour test), and the gather tests' host copies of small
// datasets' batches came back empty (15 of 200 fields with 20 small
// fields; almost all with two loaders sharing a registration). So the pages are
// registered writable (Mapped | Portable): the gather still only reads them. It
// costs nothing we could measure: pinwheel_bench's W1 and W2 gather rows,
// ReadOnly and writable alternated on the H100 (2 rounds of 3), were
// 0.937/0.878 vs 0.867/0.875 (W1) and 0.609/0.691 vs 0.637/0.736 (W2) of the
// raw copy: within noise.
//
// Example:
//   PINWHEEL_ASSIGN_OR_RETURN(std::shared_ptr<const HostRegistration> reg,
//       HostRegistry::Global().Register(rows, /*cuda_device=*/0));
//   const std::byte* device_rows = reg->device_data();  // for a kernel
#ifndef PINWHEEL_PINNING_HOST_REGISTRATION_H_
#define PINWHEEL_PINNING_HOST_REGISTRATION_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"

namespace pinwheel {

class HostRegistry;

// How regions are registered: the CUDA runtime's calls by default, a fake
// in tests (to count calls or refuse one). Each function is called without
// the registry's lock held and must be thread-safe.
struct HostRegistrar {
  // Registers `region` (never empty) for every device, asked for cuda
  // device `device` (-1: the host backend); OK or why not.
  std::function<absl::Status(absl::Span<const std::byte> region, int device)>
      register_memory;
  // Undoes a successful register_memory of the region starting at `data`
  // (`cuda`: it was asked for a cuda device).
  std::function<void(const std::byte* data, bool cuda)> unregister_memory;
  // Returns where cuda device `device` (-1: the host) reads registered
  // `data`.
  std::function<absl::StatusOr<const std::byte*>(const std::byte* data,
                                                 int device)>
      device_pointer;
};

// Returns the registrar of the CUDA runtime (cudaHostRegister with
// Mapped | Portable, cudaHostUnregister,
// cudaHostGetDevicePointer; nothing for device -1, the host backend);
// without CUDA, registering for a cuda device returns Unimplemented.
HostRegistrar CudaHostRegistrar();

// One region held registered. Immutable; thread-safe. The region stays
// registered (and must stay allocated) while this object lives; destroying
// the last one of a region unregisters it.
class HostRegistration {
 public:
  HostRegistration(const HostRegistration&) = delete;
  HostRegistration& operator=(const HostRegistration&) = delete;
  ~HostRegistration();

  // Returns the registered host bytes.
  absl::Span<const std::byte> host() const { return region_; }
  // Returns where the device reads the region (the host address on the host
  // backend).
  const std::byte* device_data() const { return device_data_; }

 private:
  friend class HostRegistry;
  HostRegistration(HostRegistry* registry, absl::Span<const std::byte> region,
                   bool cuda, const std::byte* device_data)
      : registry_(registry),
        region_(region),
        cuda_(cuda),
        device_data_(device_data) {}
  HostRegistry* const registry_;
  const absl::Span<const std::byte> region_;
  const bool cuda_;
  const std::byte* const device_data_;
};

// Thread-safe. Never calls the registrar with its lock held: a region being
// registered or unregistered by one thread makes the others wait for it.
class HostRegistry {
 public:
  // Returns the process's registry (CudaHostRegistrar()); never destroyed.
  static HostRegistry& Global();

  explicit HostRegistry(HostRegistrar registrar)
      : registrar_(std::move(registrar)) {}
  HostRegistry(const HostRegistry&) = delete;
  HostRegistry& operator=(const HostRegistry&) = delete;
  // REQUIRES: no HostRegistration of this registry is alive.
  ~HostRegistry() = default;

  // Returns a registration of `region` for cuda device `cuda_device` (-1:
  // the host backend, which registers nothing), registering it when no
  // registration of the same bytes is alive. FailedPrecondition for an empty
  // region; the registrar's error, naming the region's address and size,
  // when registration is refused (a later call tries again).
  [[nodiscard]] absl::StatusOr<std::shared_ptr<const HostRegistration>>
  Register(absl::Span<const std::byte> region, int cuda_device)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Returns how many registrations of exactly `region` (for the cuda
  // backend, or the host backend) are alive: 0 when it is not registered.
  int64_t references(absl::Span<const std::byte> region, bool cuda) const
      ABSL_LOCKS_EXCLUDED(mu_);

  // Replaces the registrar (tests: count the calls, refuse one).
  // REQUIRES: no registration is alive or under way.
  void SetRegistrarForTesting(HostRegistrar registrar) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  friend class HostRegistration;
  // A region's state: registering (others wait), registered with `refs`
  // holders, or unregistering (a new Register waits until it is gone).
  struct Entry {
    enum class State { kRegistering, kRegistered, kUnregistering };
    State state = State::kRegistering;
    int64_t refs = 0;
  };
  using Key = std::pair<std::pair<const std::byte*, size_t>, bool>;
  static Key KeyOf(absl::Span<const std::byte> region, bool cuda) {
    return {{region.data(), region.size()}, cuda};
  }
  void Release(const HostRegistration& registration) ABSL_LOCKS_EXCLUDED(mu_);

  mutable absl::Mutex mu_;
  HostRegistrar registrar_ ABSL_GUARDED_BY(mu_);
  std::map<Key, Entry> entries_ ABSL_GUARDED_BY(mu_);
};

}  // namespace pinwheel

#endif  // PINWHEEL_PINNING_HOST_REGISTRATION_H_
