// Test-only CUDA helpers: a kernel that keeps a stream busy, so that work
// queued behind it is visibly delayed (PyTorch's pin_memory/non_blocking
// tutorial uses the same trick to expose the corruption hazard).
#ifndef PINWHEEL_TESTS_SUPPORT_SPIN_KERNEL_H_
#define PINWHEEL_TESTS_SUPPORT_SPIN_KERNEL_H_

#include <cstdint>

namespace pinwheel::testing_support {

// Queues a one-thread kernel on `stream` (a cudaStream_t) that spins for
// about `milliseconds` of GPU time. Returns the cudaError_t of the launch.
int LaunchSpin(void* stream, double milliseconds);

// Queues on `stream` a kernel of 2048 spinning threads per multiprocessor
// (every thread slot of the GPU) for about `milliseconds`: no other
// stream's block can start until it ends, as under a training step's
// kernels. Returns the cudaError_t of the launch.
int LaunchSpinOnEverySm(void* stream, double milliseconds);

}  // namespace pinwheel::testing_support

#endif  // PINWHEEL_TESTS_SUPPORT_SPIN_KERNEL_H_
