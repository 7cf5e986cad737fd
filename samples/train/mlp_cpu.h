// MlpCpu: the Mlp on the host, in plain single-threaded C++ (the trainer's
// path on the host backend). The GPU backend (MlpCuda) mirrors its steps.
#ifndef PINWHEEL_SAMPLES_TRAIN_MLP_CPU_H_
#define PINWHEEL_SAMPLES_TRAIN_MLP_CPU_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"

#include "samples/train/mlp.h"

namespace pinwheel::train {

// Computes C = alpha · op(A) · op(B) + beta · C on row-major matrices, with
// op(A) [m, k], op(B) [k, n] and C [m, n]; op transposes when asked (A is
// then stored [k, m], B [n, k]). The same contract as the cuBLAS wrapper in
// MlpCuda, so the two backends read alike. With beta == 0, C is not read.
void RowMajorGemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                  float alpha, const float* a, const float* b, float beta,
                  float* c);

// Not thread-safe.
class MlpCpu final : public Mlp {
 public:
  // Returns a model starting from `initial` (ParameterLayout order) for
  // batches of up to `max_batch` samples, or InvalidArgument.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<MlpCpu>> Create(
      const MlpShape& shape, int64_t max_batch, std::vector<float> initial,
      const SgdOptions& sgd);

  absl::Status TrainStep(const float* x, const int64_t* y, int64_t n) override;
  absl::Status EvalStep(const float* x, const int64_t* y, int64_t n) override;
  absl::StatusOr<MlpMetrics> TakeMetrics() override;
  absl::StatusOr<std::vector<float>> Parameters() override { return params_; }
  absl::StatusOr<MlpState> SaveState() override;
  absl::Status RestoreState(const MlpState& state) override;
  void* native_stream() const override { return nullptr; }

  // Returns the gradient of the last TrainStep (ParameterLayout order), for
  // tests.
  const std::vector<float>& last_gradient() const { return grads_; }
  // Returns the mean loss of the batch `x`, `y` under the current
  // parameters without training (for gradient checks in tests).
  double Loss(const float* x, const int64_t* y, int64_t n);

 private:
  MlpCpu(const MlpShape& shape, int64_t max_batch, std::vector<float> initial,
         const SgdOptions& sgd);
  absl::Status CheckBatch(int64_t n) const;
  // hidden_ = relu(x·W1 + b1); logits_ = hidden_·W2 (b2 not yet added).
  void Forward(const float* x, int64_t n);

  MlpShape shape_;
  ParameterLayout at_;
  int64_t max_batch_;
  SgdOptions sgd_;
  std::vector<float> params_;
  std::vector<float> grads_;
  std::vector<float> velocity_;
  std::vector<float> hidden_;       // [max_batch, hidden]
  std::vector<float> logits_;       // [max_batch, classes]
  std::vector<float> grad_logits_;  // [max_batch, classes]
  std::vector<float> grad_hidden_;  // [max_batch, hidden]
  MlpMetrics metrics_;
  int64_t train_steps_ = 0;  // TrainSteps since the last TakeMetrics()
  int64_t bad_label_count_ = 0;
  int64_t first_bad_label_ = 0;
};

}  // namespace pinwheel::train

#endif  // PINWHEEL_SAMPLES_TRAIN_MLP_CPU_H_
