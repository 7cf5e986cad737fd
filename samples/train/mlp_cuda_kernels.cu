#include <cstdint>

#include "samples/train/mlp_cuda_kernels.h"

namespace pinwheel::train {
namespace {

constexpr int kThreads = 256;

int BlocksFor(int64_t count) {
  const int64_t blocks = (count + kThreads - 1) / kThreads;
  return static_cast<int>(blocks < 65535 ? (blocks > 0 ? blocks : 1) : 65535);
}

__global__ void BiasReluKernel(float* z, const float* bias, int64_t rows,
                               int64_t cols) {
  const int64_t count = rows * cols;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count;
       i += int64_t{gridDim.x} * blockDim.x) {
    // As the host's std::max(v, 0.0f): a NaN stays NaN (fmaxf would make it
    // 0 and hide a diverged step from the loss).
    const float v = z[i] + bias[i % cols];
    z[i] = v < 0.0f ? 0.0f : v;
  }
}

__device__ void NoteBadLabel(DeviceCounters* counters, int64_t label) {
  if (atomicAdd(&counters->bad_labels, 1ull) == 0ull) {
    counters->first_bad_label = static_cast<long long>(label);
  }
}

// One block: thread t takes samples t, t + kThreads, ...; the block then
// sums the per-thread losses in a fixed tree order.
__global__ void SoftmaxCrossEntropyKernel(const float* logits,
                                          const float* bias,
                                          const int64_t* labels, int64_t n,
                                          int64_t classes, float* grad_logits,
                                          int64_t step,
                                          DeviceCounters* counters) {
  __shared__ double partial[kThreads];
  const float inv_n = 1.0f / static_cast<float>(n);
  double loss = 0.0;
  for (int64_t s = threadIdx.x; s < n; s += blockDim.x) {
    const float* z = logits + s * classes;
    float* dz = grad_logits + s * classes;
    const int64_t label = labels[s];
    if (label < 0 || label >= classes) {
      NoteBadLabel(counters, label);
      for (int64_t c = 0; c < classes; ++c) dz[c] = 0.0f;
      continue;
    }
    float max_z = z[0] + bias[0];
    for (int64_t c = 1; c < classes; ++c) {
      const float v = z[c] + bias[c];
      max_z = max_z < v ? v : max_z;  // as the host's std::max: NaN stays
    }
    float sum = 0.0f;
    for (int64_t c = 0; c < classes; ++c) {
      dz[c] = expf(z[c] + bias[c] - max_z);
      sum += dz[c];
    }
    loss += static_cast<double>(logf(sum) - (z[label] + bias[label] - max_z));
    for (int64_t c = 0; c < classes; ++c) {
      dz[c] = (dz[c] / sum - (c == label ? 1.0f : 0.0f)) * inv_n;
    }
  }
  partial[threadIdx.x] = loss;
  __syncthreads();
  for (int stride = kThreads / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride)
      partial[threadIdx.x] += partial[threadIdx.x + stride];
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    counters->train_loss_sum += partial[0];
    // One block, and the steps run in stream order: no race.
    if (!isfinite(partial[0]) && counters->first_nonfinite_step == 0) {
      counters->first_nonfinite_step = static_cast<long long>(step);
    }
  }
}

__global__ void CountCorrectKernel(const float* logits, const float* bias,
                                   const int64_t* labels, int64_t n,
                                   int64_t classes, DeviceCounters* counters) {
  __shared__ unsigned long long partial[kThreads];
  unsigned long long correct = 0;
  for (int64_t s = threadIdx.x; s < n; s += blockDim.x) {
    const float* z = logits + s * classes;
    int64_t best = 0;
    float best_z = z[0] + bias[0];
    for (int64_t c = 1; c < classes; ++c) {
      if (z[c] + bias[c] > best_z) {
        best_z = z[c] + bias[c];
        best = c;
      }
    }
    const int64_t label = labels[s];
    if (label < 0 || label >= classes) {
      NoteBadLabel(counters, label);
    } else if (best == label) {
      ++correct;
    }
  }
  partial[threadIdx.x] = correct;
  __syncthreads();
  for (int stride = kThreads / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride)
      partial[threadIdx.x] += partial[threadIdx.x + stride];
    __syncthreads();
  }
  if (threadIdx.x == 0) counters->eval_correct += partial[0];
}

__global__ void ColumnSumsKernel(const float* m, int64_t rows, int64_t cols,
                                 float* out) {
  for (int64_t c = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; c < cols;
       c += int64_t{gridDim.x} * blockDim.x) {
    float sum = 0.0f;
    for (int64_t r = 0; r < rows; ++r) sum += m[r * cols + c];
    out[c] = sum;
  }
}

__global__ void ReluBackwardKernel(const float* activation, float* grad,
                                   int64_t count) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count;
       i += int64_t{gridDim.x} * blockDim.x) {
    if (!(activation[i] > 0.0f)) grad[i] = 0.0f;
  }
}

__global__ void SgdMomentumKernel(float* params, float* velocity,
                                  const float* grad, int64_t count,
                                  float learning_rate, float momentum) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count;
       i += int64_t{gridDim.x} * blockDim.x) {
    // Written as separate multiply and add (no fused multiply-add), as the
    // host computes it.
    const float v = __fadd_rn(__fmul_rn(momentum, velocity[i]), grad[i]);
    velocity[i] = v;
    params[i] = __fsub_rn(params[i], __fmul_rn(learning_rate, v));
  }
}

}  // namespace

cudaError_t LaunchBiasRelu(float* z, const float* bias, int64_t rows,
                           int64_t cols, cudaStream_t stream) {
  BiasReluKernel<<<BlocksFor(rows * cols), kThreads, 0, stream>>>(z, bias, rows,
                                                                  cols);
  return cudaGetLastError();
}

cudaError_t LaunchSoftmaxCrossEntropy(const float* logits, const float* bias,
                                      const int64_t* labels, int64_t n,
                                      int64_t classes, float* grad_logits,
                                      int64_t step, DeviceCounters* counters,
                                      cudaStream_t stream) {
  SoftmaxCrossEntropyKernel<<<1, kThreads, 0, stream>>>(
      logits, bias, labels, n, classes, grad_logits, step, counters);
  return cudaGetLastError();
}

cudaError_t LaunchCountCorrect(const float* logits, const float* bias,
                               const int64_t* labels, int64_t n,
                               int64_t classes, DeviceCounters* counters,
                               cudaStream_t stream) {
  CountCorrectKernel<<<1, kThreads, 0, stream>>>(logits, bias, labels, n,
                                                 classes, counters);
  return cudaGetLastError();
}

cudaError_t LaunchColumnSums(const float* m, int64_t rows, int64_t cols,
                             float* out, cudaStream_t stream) {
  ColumnSumsKernel<<<BlocksFor(cols), kThreads, 0, stream>>>(m, rows, cols,
                                                             out);
  return cudaGetLastError();
}

cudaError_t LaunchReluBackward(const float* activation, float* grad,
                               int64_t count, cudaStream_t stream) {
  ReluBackwardKernel<<<BlocksFor(count), kThreads, 0, stream>>>(activation,
                                                                grad, count);
  return cudaGetLastError();
}

cudaError_t LaunchSgdMomentum(float* params, float* velocity, const float* grad,
                              int64_t count, float learning_rate,
                              float momentum, cudaStream_t stream) {
  SgdMomentumKernel<<<BlocksFor(count), kThreads, 0, stream>>>(
      params, velocity, grad, count, learning_rate, momentum);
  return cudaGetLastError();
}

}  // namespace pinwheel::train
