// MlpCuda: the Mlp on a GPU. Every step is queued on one CUDA stream owned
// by the model (the trainer's compute stream): cuBLAS GEMMs and the kernels
// of mlp_cuda_kernels.h, in the same order as MlpCpu. Nothing synchronises
// the host per step; TakeMetrics() and Parameters() do, once.
#ifndef PINWHEEL_SAMPLES_TRAIN_MLP_CUDA_H_
#define PINWHEEL_SAMPLES_TRAIN_MLP_CUDA_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include "samples/train/mlp.h"

namespace pinwheel::train {

struct MlpCudaState;

// Not thread-safe. Destroying it waits for the queued work, then frees the
// device memory, the cuBLAS handle and the stream; nothing may still queue
// work on native_stream() then.
class MlpCuda final : public Mlp {
 public:
  // Returns a model on CUDA device `ordinal` starting from `initial`
  // (ParameterLayout order) for batches of up to `max_batch` samples, or the
  // failed CUDA / cuBLAS call.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<MlpCuda>> Create(
      int ordinal, const MlpShape& shape, int64_t max_batch,
      const std::vector<float>& initial, const SgdOptions& sgd);
  ~MlpCuda() override;

  absl::Status TrainStep(const float* x, const int64_t* y, int64_t n) override;
  absl::Status EvalStep(const float* x, const int64_t* y, int64_t n) override;
  absl::StatusOr<MlpMetrics> TakeMetrics() override;
  absl::StatusOr<std::vector<float>> Parameters() override;
  absl::StatusOr<MlpState> SaveState() override;
  absl::Status RestoreState(const MlpState& state) override;
  void* native_stream() const override;

  // Copies `count` floats to / from a device buffer this model allocated
  // (for tests feeding batches from the host); synchronous.
  [[nodiscard]] absl::StatusOr<float*> UploadFloats(const float* host,
                                                    int64_t count);
  [[nodiscard]] absl::StatusOr<int64_t*> UploadLabels(const int64_t* host,
                                                      int64_t count);

 private:
  explicit MlpCuda(std::unique_ptr<MlpCudaState> state);
  absl::Status CheckBatch(int64_t n) const;
  // The forward pass of MlpCpu::Forward.
  absl::Status Forward(const float* x, int64_t n);

  std::unique_ptr<MlpCudaState> state_;
};

}  // namespace pinwheel::train

#endif  // PINWHEEL_SAMPLES_TRAIN_MLP_CUDA_H_
