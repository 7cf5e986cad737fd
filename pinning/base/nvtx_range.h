// NvtxRange: a scoped NVTX range, so that an Nsight Systems timeline shows
// the library's host-side stages (a worker's read of a batch, its wait for
// a slot, the consumer's wait in Next(), the device stage issuing a copy,
// gather, transform, decode or crop) beside the copies and kernels it
// traces on its own. On when the library is built with CUDA and the
// toolkit's header-only NVTX3 (CUDA::nvtx3: PINWHEEL_NVTX defined for
// pinwheel_loader and pinwheel_transfer); compiles to nothing otherwise.
// With no profiler attached a range costs two calls through NVTX's no-op
// function pointers. Private to the library (loader/telemetry/README.md
// lists the ranges).
//
// Example:
//   { NvtxRange range("pinwheel read"); source_->Fill(filler_, batch); }
#ifndef PINWHEEL_PINNING_BASE_NVTX_RANGE_H_
#define PINWHEEL_PINNING_BASE_NVTX_RANGE_H_

#if defined(PINWHEEL_NVTX)
#include <nvtx3/nvToolsExt.h>
#endif

namespace pinwheel::internal {

// Not thread-safe: pushed and popped on the constructing thread.
class NvtxRange {
 public:
  // `name` must be a string literal (or outlive the range).
  explicit NvtxRange(const char* name) {
#if defined(PINWHEEL_NVTX)
    nvtxRangePushA(name);
#else
    (void)name;
#endif
  }
  NvtxRange(const NvtxRange&) = delete;
  NvtxRange& operator=(const NvtxRange&) = delete;
  ~NvtxRange() {
#if defined(PINWHEEL_NVTX)
    nvtxRangePop();
#endif
  }
};

}  // namespace pinwheel::internal

#endif  // PINWHEEL_PINNING_BASE_NVTX_RANGE_H_
