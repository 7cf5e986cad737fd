// CHECK_CUDA(call): the small CUDA tools' error check (cuda_call_cost,
// copy_limits): on an error, prints the call, where it was and the CUDA
// error, and exits 1. For the benchmark proper, which reports Status, see
// BENCH_CUDA in samples/bench/cuda_rows.cc.
#ifndef PINWHEEL_SAMPLES_BENCH_PROBES_CHECK_CUDA_H_
#define PINWHEEL_SAMPLES_BENCH_PROBES_CHECK_CUDA_H_

#include <cstdio>
#include <cstdlib>
#include <cuda_runtime_api.h>

#define CHECK_CUDA(call)                                                \
  do {                                                                  \
    const cudaError_t check_cuda_error = (call);                        \
    if (check_cuda_error != cudaSuccess) {                              \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #call, \
                   cudaGetErrorString(check_cuda_error));               \
      std::exit(1);                                                     \
    }                                                                   \
  } while (0)

#endif  // PINWHEEL_SAMPLES_BENCH_PROBES_CHECK_CUDA_H_
