// NvtxRange: a scoped NVTX range around a benchmark phase, so a Nsight
// Systems timeline of the benchmark shows which row is running. Compiles to
// nothing without NVTX (PINWHEEL_BENCH_NVTX unset: no CUDA, or no
// CUDA::nvtx3 target).
//
// Example:
//   { NvtxRange range("w1 pinwheel workers=8 prefetch=4"); Measure(); }
#ifndef PINWHEEL_SAMPLES_BENCH_NVTX_RANGE_H_
#define PINWHEEL_SAMPLES_BENCH_NVTX_RANGE_H_

#include <string>

#if defined(PINWHEEL_BENCH_NVTX)
#include <nvtx3/nvToolsExt.h>
#endif

namespace pinwheel::bench {

// Not thread-safe: push and pop happen on the constructing thread.
class NvtxRange {
 public:
  // `name` is copied by NVTX; no allocation here (cheap enough per batch).
  explicit NvtxRange(const char* name) {
#if defined(PINWHEEL_BENCH_NVTX)
    nvtxRangePushA(name);
#else
    (void)name;
#endif
  }
  explicit NvtxRange(const std::string& name) : NvtxRange(name.c_str()) {}
  NvtxRange(const NvtxRange&) = delete;
  NvtxRange& operator=(const NvtxRange&) = delete;
  ~NvtxRange() {
#if defined(PINWHEEL_BENCH_NVTX)
    nvtxRangePop();
#endif
  }
};

}  // namespace pinwheel::bench

#endif  // PINWHEEL_SAMPLES_BENCH_NVTX_RANGE_H_
