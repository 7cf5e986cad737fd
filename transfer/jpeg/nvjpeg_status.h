// nvJPEG's status codes as absl::Status: the one conversion the GPU JPEG
// decoder uses, so every nvJPEG failure names the call and nvJPEG's error
// name ("nvjpegJpegStreamParse: NVJPEG_STATUS_BAD_JPEG"). Built only with
// nvJPEG (PINWHEEL_HAVE_NVJPEG); the status is taken as an int so that this
// header needs no nvjpeg.h.
//
// Example:
//   PINWHEEL_RETURN_IF_ERROR(NvJpegStatus(nvjpegCreateSimple(&h),
//   "nvjpegCreateSimple"));
//
// Thread-safe: pure functions over static strings.
#ifndef PINWHEEL_TRANSFER_JPEG_NVJPEG_STATUS_H_
#define PINWHEEL_TRANSFER_JPEG_NVJPEG_STATUS_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace pinwheel::internal {

// Returns nvJPEG's name for `status` (an nvjpegStatus_t), e.g.
// "NVJPEG_STATUS_BAD_JPEG", or "NVJPEG_STATUS_<n> (unknown)" for a value
// this build does not know.
std::string NvJpegErrorName(int status);

// Returns OK for NVJPEG_STATUS_SUCCESS, else "<call>: <error name>" with a
// code that follows the error: InvalidArgument for a bad or incomplete JPEG
// and bad parameters, Unimplemented for a JPEG or feature nvJPEG does not
// support, ResourceExhausted for an allocator failure (the memory budget),
// FailedPrecondition for an unsupported GPU, Internal otherwise.
absl::Status NvJpegStatus(int status, absl::string_view call);

}  // namespace pinwheel::internal

#endif  // PINWHEEL_TRANSFER_JPEG_NVJPEG_STATUS_H_
