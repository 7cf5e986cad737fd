// The sample trainer's model: a classifier with one hidden layer
//   logits = relu(x · W1 + b1) · W2 + b2
// trained with softmax cross-entropy and SGD with momentum. Two backends
// compute the same math in the same order where practical: MlpCpu (plain
// C++, the host backend) and MlpCuda (cuBLAS GEMMs and small kernels on one
// CUDA stream). Both start from InitialParameters(), so the same seed gives
// the same starting point on either.
//
// Example:
//   MlpShape shape{.inputs = 256, .hidden = 512, .classes = 10};
//   std::unique_ptr<Mlp> mlp = ...;  // MlpCpu::Create or MlpCuda::Create
//   for (each batch of n samples) mlp->TrainStep(x, y, n);
//   PINWHEEL_ASSIGN_OR_RETURN(MlpMetrics m, mlp->TakeMetrics());
#ifndef PINWHEEL_SAMPLES_TRAIN_MLP_H_
#define PINWHEEL_SAMPLES_TRAIN_MLP_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace pinwheel::train {

// SplitMix64: a tiny portable generator, so the initial weights and the
// synthetic data are the same on every platform and compiler.
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t Next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Returns a double uniform in [0, 1) with 53 random bits.
  double Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }

 private:
  uint64_t state_;
};

struct MlpShape {
  int64_t inputs = 256;  // features per sample (the "x" field's elements)
  int64_t hidden = 512;  // hidden units
  int64_t classes = 10;  // labels are 0..classes-1
};

// Where each parameter lives in the one flat float array that holds them
// all (so the SGD update is a single loop / kernel).
struct ParameterLayout {
  explicit ParameterLayout(const MlpShape& shape);
  size_t w1 = 0;     // [inputs, hidden], row-major
  size_t b1 = 0;     // [hidden]
  size_t w2 = 0;     // [hidden, classes], row-major
  size_t b2 = 0;     // [classes]
  size_t total = 0;  // floats in all
};

// Returns the starting parameters: weights uniform in ±1/sqrt(fan_in) (the
// PyTorch nn.Linear default) drawn from SplitMix64(seed), biases zero.
std::vector<float> InitialParameters(const MlpShape& shape, uint64_t seed);

struct SgdOptions {
  float learning_rate = 0.05f;
  float momentum = 0.9f;  // v = momentum·v + grad; w -= learning_rate·v
};

// The global batch (samples a step, over all ranks) the trainer's --lr is
// given for.
inline constexpr int64_t kLearningRateBatch = 256;

// Returns the learning rate for a step over `global_batch` samples, `lr`
// being the rate at kLearningRateBatch: `lr` from kLearningRateBatch up,
// lr x global_batch / kLearningRateBatch below (the linear scaling rule).
// The gradient is a mean over the batch: the fewer samples, the noisier it
// is and the larger the curvature of the one batch's loss, so a rate that
// is stable at 256 overshoots at a few samples (with momentum 0.9 each
// gradient moves the weights by about 10 x lr): at --lr=0.05 batch 7 grew
// the loss to 1e3 in one epoch and to NaN after, batch 1 at once.
double ScaledLearningRate(double lr, int64_t global_batch);

// Sums over the steps since the last TakeMetrics().
struct MlpMetrics {
  double train_loss_sum = 0;  // sum of per-sample cross-entropy (nats)
  int64_t train_samples = 0;
  // The first TrainStep (1-based, counted since the last TakeMetrics())
  // whose batch loss was not finite (NaN or infinite: the model diverged);
  // 0: none was.
  int64_t first_nonfinite_step = 0;
  int64_t eval_correct = 0;  // argmax(logits) == label
  int64_t eval_samples = 0;
};

// What a model needs to continue training exactly where it stood: the
// parameters and the SGD momentum buffer, both ParameterLayout order.
struct MlpState {
  std::vector<float> parameters;
  std::vector<float> velocity;
};

// Interface. Not thread-safe: one trainer thread drives it.
class Mlp {
 public:
  virtual ~Mlp() = default;

  // Queues one SGD step on a batch of `n` samples: `x` is [n, inputs] f32,
  // `y` is [n] i64, both row-major and in the backend's memory (device
  // pointers for MlpCuda). REQUIRES: 1 <= n <= the max batch given at
  // creation; the data stays valid until the step has run (on the cuda
  // backend: until work queued on native_stream() now has finished).
  [[nodiscard]] virtual absl::Status TrainStep(const float* x, const int64_t* y,
                                               int64_t n) = 0;
  // Queues a forward pass that counts correct predictions. Same REQUIRES.
  [[nodiscard]] virtual absl::Status EvalStep(const float* x, const int64_t* y,
                                              int64_t n) = 0;
  // Waits for every queued step, then returns and resets the sums. A label
  // outside 0..classes-1 seen by any step since the last call is reported
  // here as InvalidArgument.
  [[nodiscard]] virtual absl::StatusOr<MlpMetrics> TakeMetrics() = 0;
  // Returns a copy of the parameters (waits for queued steps).
  [[nodiscard]] virtual absl::StatusOr<std::vector<float>> Parameters() = 0;
  // Returns a copy of the parameters and the momentum (waits for queued
  // steps: on cuda the copies are read only after a synchronisation of the
  // model's stream).
  [[nodiscard]] virtual absl::StatusOr<MlpState> SaveState() = 0;
  // Replaces the parameters and the momentum (waits for queued steps), so
  // the next TrainStep continues as the model SaveState() came from would.
  // InvalidArgument unless both hold the shape's parameter count.
  [[nodiscard]] virtual absl::Status RestoreState(const MlpState& state) = 0;
  // Returns the cudaStream_t every step is queued on; nullptr on the host.
  virtual void* native_stream() const = 0;

  // Called by every TrainStep between the gradient and the update with the
  // gradient (`count` floats, ParameterLayout order; device memory and the
  // model's stream on cuda, host memory and nullptr on the host), to be
  // changed in place: the place for a data-parallel all-reduce. An error
  // fails the step.
  using GradientHook =
      std::function<absl::Status(float* gradient, int64_t count, void* stream)>;
  void set_gradient_hook(GradientHook hook) {
    gradient_hook_ = std::move(hook);
  }

 protected:
  GradientHook gradient_hook_;
};

}  // namespace pinwheel::train

#endif  // PINWHEEL_SAMPLES_TRAIN_MLP_H_
