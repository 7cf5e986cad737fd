// CUDA's hardware work queues: the environment variable
// CUDA_DEVICE_MAX_CONNECTIONS (1..32, CUDA's default 8), which CUDA reads
// once, at the process's first CUDA call. With 8, a stream of pinwheel's
// (the GPU decode's) can share a queue with the training step's stream and
// wait for every kernel queued on it; see Note [hardware queues] in
// transfer/jpeg/nvjpeg_decoder.h for what was measured.
//
// Usage, first thing in main(), before any CUDA call (the Python package
// does the same when it is imported):
//   pinwheel::PreferCudaQueues();
//
// Thread-compatible: PreferCudaQueues() changes the process's environment
// (setenv), so call it before other threads start.
#ifndef PINWHEEL_PINNING_BASE_CUDA_QUEUES_H_
#define PINWHEEL_PINNING_BASE_CUDA_QUEUES_H_

#include <string>

namespace pinwheel {

// The number of queues pinwheel asks for: CUDA's most.
inline constexpr int kPreferredCudaConnections = 32;

// Sets CUDA_DEVICE_MAX_CONNECTIONS to kPreferredCudaConnections unless the
// variable is set (the user's choice stays). Returns whether it set it. It
// has an effect only before the process's first CUDA call.
bool PreferCudaQueues();

// Returns one line on the queues for `value`, the variable's value
// (nullptr: unset): the number, and when it is below
// kPreferredCudaConnections or not a number, what that costs and the fix.
std::string CudaQueuesReport(const char* value);

}  // namespace pinwheel

#endif  // PINWHEEL_PINNING_BASE_CUDA_QUEUES_H_
