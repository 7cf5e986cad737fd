// Turns a cudaError_t into an absl::Status naming the call and CUDA's
// message. Only for translation units built with the CUDA runtime.
#ifndef PINWHEEL_PINNING_INTERNAL_CUDA_STATUS_H_
#define PINWHEEL_PINNING_INTERNAL_CUDA_STATUS_H_

#include <cuda_runtime_api.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace pinwheel::internal {

// Returns OK for cudaSuccess, else a Status whose code follows the error
// (ResourceExhausted for allocation failures, InvalidArgument for bad
// values or devices, Internal otherwise) and whose message is
// "<call>: <cudaGetErrorName>: <cudaGetErrorString>".
inline absl::Status CudaStatus(cudaError_t error, const char* call) {
  if (error == cudaSuccess) return absl::OkStatus();
  const std::string message = absl::StrCat(call, ": ", cudaGetErrorName(error),
                                           ": ", cudaGetErrorString(error));
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

}  // namespace pinwheel::internal

// Evaluates a CUDA runtime call; returns its error as a Status.
#define PINWHEEL_CUDA_RETURN_IF_ERROR(call)                                 \
  do {                                                                      \
    ::absl::Status pinwheel_cuda_status_ =                                  \
        ::pinwheel::internal::CudaStatus((call), #call);                    \
    if (!pinwheel_cuda_status_.ok()) return pinwheel_cuda_status_;          \
  } while (0)

#endif  // PINWHEEL_PINNING_INTERNAL_CUDA_STATUS_H_
