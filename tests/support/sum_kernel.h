// Test-only CUDA helper: a one-block reduction that a captured CUDA graph
// replays (static_buffers_graph_test). Each launch sums n int32 values and
// appends the sum to a device array at a device-side counter, so a graph
// captured once records one result per replay.
#ifndef PINWHEEL_TESTS_SUPPORT_SUM_KERNEL_H_
#define PINWHEEL_TESTS_SUPPORT_SUM_KERNEL_H_

#include <cstdint>

namespace pinwheel::testing_support {

// Queues on `stream` (a cudaStream_t) one block that sums x[0..n) (values
// read as unsigned 32-bit), then, in one thread: k = *counter; sums[k] = sum
// when k < capacity; *total += sum; *counter = k + 1. All pointers are
// device memory. Returns the cudaError_t of the launch.
int LaunchSumIntoNext(void* stream, const int32_t* x, int64_t n,
                      unsigned long long* sums, unsigned int capacity,
                      unsigned int* counter, unsigned long long* total);

}  // namespace pinwheel::testing_support

#endif  // PINWHEEL_TESTS_SUPPORT_SUM_KERNEL_H_
