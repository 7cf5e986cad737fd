// Kernels that compute an epoch's order on the device
// (loader/epoch_order.h): a rank's dataset indices for a run of its
// positions, and token windows' starts for dataset indices. They evaluate
// the host samplers' own functions (order::DealAt, order::WindowStart), so
// the device's order is the host's, bit for bit, and a batch needs no
// index upload. Only in CUDA builds (order_kernels.cu).
//
// Example (on the transfer stream; indices and starts are device memory):
//   const order::Deal deal = sampler.DealFor(epoch);
//   int error = LaunchDealIndices(deal, first, count, indices, stream);
//   if (error == 0) {
//     error = LaunchWindowStarts(seed, starts, indices, count, keys, stream);
//   }
#ifndef PINWHEEL_LOADER_GATHER_ORDER_KERNELS_H_
#define PINWHEEL_LOADER_GATHER_ORDER_KERNELS_H_

#include <cstdint>

#include "loader/epoch_order.h"

namespace pinwheel::internal {

// Queues on cudaStream_t `stream` a kernel writing
// out_device[i] = order::DealAt(deal, first + i) for i in [0, count).
// Returns the cudaError_t of the launch (0: cudaSuccess); count <= 0
// launches nothing. REQUIRES: 0 <= first, first + count <= the sampler's
// size(); out_device holds `count` int64 values of device memory.
int LaunchDealIndices(const order::Deal& deal, int64_t first, int64_t count,
                      int64_t* out_device, void* stream);

// Queues on cudaStream_t `stream` a kernel writing
// out_device[i] = order::WindowStart(seed, indices_device[i], starts) for
// i in [0, count): TokenWindowDataset::WindowStart for a dataset of
// tokens() - seq_len = `starts` and options().seed = `seed`. Returns the
// cudaError_t of the launch; count <= 0 launches nothing. indices_device
// and out_device may be the same memory. REQUIRES: starts > 0; both hold
// `count` int64 values of device memory.
int LaunchWindowStarts(uint64_t seed, uint64_t starts,
                       const int64_t* indices_device, int64_t count,
                       int64_t* out_device, void* stream);

}  // namespace pinwheel::internal

#endif  // PINWHEEL_LOADER_GATHER_ORDER_KERNELS_H_
