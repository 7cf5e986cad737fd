// The small CUDA kernels of MlpCuda (the GEMMs are cuBLAS). Plain C++
// declarations so that host code compiled by the C++ compiler can call
// them; each queues its kernel on `stream` and returns the launch error.
// Row-major matrices throughout, as in MlpCpu, whose loops they mirror.
#ifndef PINWHEEL_SAMPLES_TRAIN_MLP_CUDA_KERNELS_H_
#define PINWHEEL_SAMPLES_TRAIN_MLP_CUDA_KERNELS_H_

#include <cstdint>
#include <cuda_runtime_api.h>

namespace pinwheel::train {

// Per-epoch sums kept on the device; read by the host only after
// synchronising the stream they were updated on.
struct DeviceCounters {
  double train_loss_sum;
  unsigned long long eval_correct;
  unsigned long long bad_labels;
  long long first_bad_label;
  // The first step (1-based) whose batch loss was not finite; 0: none.
  long long first_nonfinite_step;
};

// z[r, c] = max(z[r, c] + bias[c], 0).
cudaError_t LaunchBiasRelu(float* z, const float* bias, int64_t rows,
                           int64_t cols, cudaStream_t stream);

// For each of the n samples: p = softmax(logits + bias); adds the
// cross-entropy -log p[label] to counters->train_loss_sum (one block, a
// fixed reduction order) and writes grad_logits = (p - onehot(label)) / n.
// A label outside 0..classes-1 is counted in counters->bad_labels and gives
// a zero gradient row. A batch loss that is not finite records `step` in
// counters->first_nonfinite_step unless an earlier step is there.
cudaError_t LaunchSoftmaxCrossEntropy(const float* logits, const float* bias,
                                      const int64_t* labels, int64_t n,
                                      int64_t classes, float* grad_logits,
                                      int64_t step, DeviceCounters* counters,
                                      cudaStream_t stream);

// Adds to counters->eval_correct the samples whose argmax(logits + bias)
// (the first maximum) equals their label.
cudaError_t LaunchCountCorrect(const float* logits, const float* bias,
                               const int64_t* labels, int64_t n,
                               int64_t classes, DeviceCounters* counters,
                               cudaStream_t stream);

// out[c] = sum over r (in order) of m[r, c].
cudaError_t LaunchColumnSums(const float* m, int64_t rows, int64_t cols,
                             float* out, cudaStream_t stream);

// grad[i] = 0 where activation[i] <= 0 (the relu's derivative).
cudaError_t LaunchReluBackward(const float* activation, float* grad,
                               int64_t count, cudaStream_t stream);

// velocity = momentum · velocity + grad; params -= learning_rate · velocity.
cudaError_t LaunchSgdMomentum(float* params, float* velocity, const float* grad,
                              int64_t count, float learning_rate,
                              float momentum, cudaStream_t stream);

}  // namespace pinwheel::train

#endif  // PINWHEEL_SAMPLES_TRAIN_MLP_CUDA_KERNELS_H_
