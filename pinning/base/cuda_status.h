// Turns a cudaError_t into an absl::Status naming the call and CUDA's
// message: the one conversion the library and the samples share
// (LaunchStatus() for a kernel launch's). Only for
// translation units built with the CUDA runtime (it includes
// <cuda_runtime_api.h>).
//
// Example:
//   absl::Status CopyIn(void* dst, const void* src, size_t bytes) {
//     PINWHEEL_CUDA_RETURN_IF_ERROR(
//         cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
//     return absl::OkStatus();
//   }
//
// Thread-safe: CudaStatus reads CUDA's static error strings and, for a
// missing kernel image, the current device's attributes.
#ifndef PINWHEEL_PINNING_BASE_CUDA_STATUS_H_
#define PINWHEEL_PINNING_BASE_CUDA_STATUS_H_

#include <cuda_runtime_api.h>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace pinwheel {

// Returns OK for cudaSuccess, else a Status whose code follows the error
// (ResourceExhausted for allocation failures, InvalidArgument for bad
// values or devices, Internal otherwise) and whose message is
// "<call>: <cudaGetErrorName>: <cudaGetErrorString>".
// A kernel without an image for the current GPU (cudaErrorNoKernelImage-
// ForDevice; cudaErrorInvalidDeviceFunction too, which some drivers return
// for it) is FailedPrecondition, and the message goes on with the GPU's
// compute capability, the architectures pinwheel was built for and the
// CMake option that adds the GPU's.
inline absl::Status CudaStatus(cudaError_t error, const char* call) {
  if (error == cudaSuccess) return absl::OkStatus();
  std::string message = absl::StrCat(call, ": ", cudaGetErrorName(error), ": ",
                                     cudaGetErrorString(error));
  if (error == cudaErrorNoKernelImageForDevice ||
      error == cudaErrorInvalidDeviceFunction) {
#ifdef PINWHEEL_CUDA_ARCHITECTURES_BUILT
    const char* built = PINWHEEL_CUDA_ARCHITECTURES_BUILT;
#else
    const char* built =
        "(not recorded: PINWHEEL_CUDA_ARCHITECTURES_BUILT unset)";
#endif
    int device = -1, major = 0, minor = 0;
    std::string gpu = "the current GPU (its compute capability unknown)";
    if (cudaGetDevice(&device) == cudaSuccess &&
        cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor,
                               device) == cudaSuccess &&
        cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor,
                               device) == cudaSuccess) {
      gpu = absl::StrCat("GPU ", device, " (compute capability ", major, ".",
                         minor, ", sm_", major, minor, ")");
    }
    const std::string arch =
        major > 0 ? absl::StrCat(major, minor) : std::string("native");
    absl::StrAppend(
        &message, error == cudaErrorInvalidDeviceFunction ? " (likely: " : " (",
        gpu, " has no kernel image in this build of pinwheel, built for ",
        built, "; rebuild with -DCMAKE_CUDA_ARCHITECTURES=", arch,
        " or CUDAARCHS=", arch,
        " in the environment; the default covers every GPU from Turing up)");
    return absl::FailedPreconditionError(message);
  }
  switch (error) {
    case cudaErrorMemoryAllocation:
      return absl::ResourceExhaustedError(message);
    case cudaErrorInvalidValue:
    case cudaErrorInvalidDevice:
    case cudaErrorInvalidDevicePointer:
      return absl::InvalidArgumentError(message);
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
      return absl::FailedPreconditionError(message);
    default:
      return absl::InternalError(message);
  }
}

// Returns OK when a kernel launch was queued (`error` 0, cudaSuccess), else
// a Status naming `kernel`: InvalidArgument when the launcher refused its
// arguments (a negative `error`, e.g. kBadKernelArguments), otherwise
// CudaStatus() of the launch's cudaError_t. The one conversion for every
// kernel launcher (the device transforms', the gather's, the order's, the
// crop-resize's), which return a cudaError_t as an int.
inline absl::Status LaunchStatus(int error, const char* kernel) {
  if (error == 0) return absl::OkStatus();
  const std::string call = absl::StrCat("launching the ", kernel, " kernel");
  if (error < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(call, ": the launcher refused its arguments"));
  }
  return CudaStatus(static_cast<cudaError_t>(error), call.c_str());
}

}  // namespace pinwheel

// Evaluates a CUDA runtime call; returns its error as a Status.
#define PINWHEEL_CUDA_RETURN_IF_ERROR(call)                        \
  do {                                                             \
    ::absl::Status pinwheel_cuda_status_ =                         \
        ::pinwheel::CudaStatus((call), #call);                     \
    if (!pinwheel_cuda_status_.ok()) return pinwheel_cuda_status_; \
  } while (0)

#endif  // PINWHEEL_PINNING_BASE_CUDA_STATUS_H_
