#include "samples/train/mlp_cuda.h"

#include <climits>
#include <cstddef>
#include <cstdint>
#include <cublas_v2.h>
#include <cuda_runtime.h>  // the typed cudaMalloc overloads
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_format.h"

#include "pinning/base/cuda_status.h"
#include "pinning/base/status_macros.h"
#include "samples/train/mlp.h"
#include "samples/train/mlp_cuda_kernels.h"

namespace pinwheel::train {
namespace {

absl::Status CublasStatus(cublasStatus_t status, const char* call) {
  if (status == CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
  return absl::InternalError(
      absl::StrFormat("%s: %s", call, cublasGetStatusString(status)));
}

}  // namespace

// Returns from the enclosing function with the failed cuBLAS call named (CUDA
// calls: PINWHEEL_CUDA_RETURN_IF_ERROR, pinning/base/cuda_status.h).
#define PINWHEEL_TRAIN_CUBLAS(call) \
  PINWHEEL_RETURN_IF_ERROR(CublasStatus((call), #call))

constexpr size_t kCublasWorkspaceBytes = size_t{32} << 20;

struct MlpCudaState {
  MlpCudaState(int ordinal, const MlpShape& shape, int64_t max_batch,
               const SgdOptions& sgd)
      : ordinal(ordinal),
        shape(shape),
        at(shape),
        max_batch(max_batch),
        sgd(sgd) {}
  MlpCudaState(const MlpCudaState&) = delete;
  MlpCudaState& operator=(const MlpCudaState&) = delete;
  // Waits for queued work, then frees everything (errors are ignored: there
  // is no one left to report them to).
  ~MlpCudaState() {
    cudaSetDevice(ordinal);
    if (stream != nullptr) cudaStreamSynchronize(stream);
    for (void* p : {static_cast<void*>(params), static_cast<void*>(grads),
                    static_cast<void*>(velocity), static_cast<void*>(hidden),
                    static_cast<void*>(logits), static_cast<void*>(grad_logits),
                    static_cast<void*>(grad_hidden),
                    static_cast<void*>(counters), workspace}) {
      if (p != nullptr) cudaFree(p);
    }
    for (void* p : uploads) cudaFree(p);
    if (host_counters != nullptr) cudaFreeHost(host_counters);
    if (cublas != nullptr) cublasDestroy(cublas);
    if (stream != nullptr) cudaStreamDestroy(stream);
  }

  // Row-major C[m, n] = alpha · op(A)[m, k] · op(B)[k, n] + beta · C, as
  // RowMajorGemm on the host. cuBLAS is column-major, and a row-major matrix
  // read column-major is its transpose, so compute C^T = op(B)^T · op(A)^T:
  // swap the operands and m with n; each keeps its own transpose flag and
  // its row-major leading dimension.
  absl::Status Gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                    const float* a, const float* b, float beta, float* c) {
    if (m > INT_MAX || n > INT_MAX || k > INT_MAX) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "GEMM of %dx%dx%d exceeds cuBLAS's int sizes", m, n, k));
    }
    const float alpha = 1.0f;
    const int lda = static_cast<int>(trans_a ? m : k);
    const int ldb = static_cast<int>(trans_b ? k : n);
    PINWHEEL_TRAIN_CUBLAS(
        cublasSgemm(cublas, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                    trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, static_cast<int>(n),
                    static_cast<int>(m), static_cast<int>(k), &alpha, b, ldb, a,
                    lda, &beta, c, static_cast<int>(n)));
    return absl::OkStatus();
  }

  int ordinal;
  MlpShape shape;
  ParameterLayout at;
  int64_t max_batch;
  SgdOptions sgd;
  cudaStream_t stream = nullptr;
  cublasHandle_t cublas = nullptr;
  float* params = nullptr;                  // ParameterLayout
  float* grads = nullptr;                   // ParameterLayout
  float* velocity = nullptr;                // ParameterLayout
  float* hidden = nullptr;                  // [max_batch, hidden]
  float* logits = nullptr;                  // [max_batch, classes]
  float* grad_logits = nullptr;             // [max_batch, classes]
  float* grad_hidden = nullptr;             // [max_batch, hidden]
  DeviceCounters* counters = nullptr;       // device
  DeviceCounters* host_counters = nullptr;  // page-locked, for TakeMetrics
  std::vector<void*> uploads;               // UploadFloats / UploadLabels
  void* workspace = nullptr;                // cuBLAS's, kCublasWorkspaceBytes
  int64_t train_samples = 0;
  int64_t train_steps = 0;  // since the last TakeMetrics()
  int64_t eval_samples = 0;
};

absl::StatusOr<std::unique_ptr<MlpCuda>> MlpCuda::Create(
    int ordinal, const MlpShape& shape, int64_t max_batch,
    const std::vector<float>& initial, const SgdOptions& sgd) {
  if (shape.inputs < 1 || shape.hidden < 1 || shape.classes < 2 ||
      max_batch < 1) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "MLP %d -> %d -> %d, max batch %d: need inputs, hidden, max batch "
        ">= 1 and classes >= 2",
        shape.inputs, shape.hidden, shape.classes, max_batch));
  }
  auto state = std::make_unique<MlpCudaState>(ordinal, shape, max_batch, sgd);
  MlpCudaState& st = *state;
  if (initial.size() != st.at.total) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%d initial parameters given; the shape needs %d",
                        initial.size(), st.at.total));
  }
  PINWHEEL_CUDA_RETURN_IF_ERROR(cudaSetDevice(ordinal));
  PINWHEEL_CUDA_RETURN_IF_ERROR(
      cudaStreamCreateWithFlags(&st.stream, cudaStreamNonBlocking));
  PINWHEEL_TRAIN_CUBLAS(cublasCreate(&st.cublas));
  PINWHEEL_TRAIN_CUBLAS(cublasSetStream(st.cublas, st.stream));
  // Plain FP32 GEMMs (no TF32), to stay close to the host's numbers.
  PINWHEEL_TRAIN_CUBLAS(cublasSetMathMode(st.cublas, CUBLAS_DEFAULT_MATH));
  // Bit-for-bit reproducible runs (the trainer's kill/resume test compares
  // final weights byte for byte): cuBLAS gives the same bits run to run on
  // one GPU model and toolkit for routines without atomics (not-allowed is
  // the default; said here so no one turns it on), provided its workspace
  // is not chosen per concurrently active stream: the handle gets its own
  // (32 MiB, the size cuBLAS suggests for Hopper).
  PINWHEEL_TRAIN_CUBLAS(
      cublasSetAtomicsMode(st.cublas, CUBLAS_ATOMICS_NOT_ALLOWED));
  PINWHEEL_CUDA_RETURN_IF_ERROR(
      cudaMalloc(&st.workspace, kCublasWorkspaceBytes));
  PINWHEEL_TRAIN_CUBLAS(
      cublasSetWorkspace(st.cublas, st.workspace, kCublasWorkspaceBytes));
  const size_t param_bytes = st.at.total * sizeof(float);
  const size_t hidden_bytes = max_batch * shape.hidden * sizeof(float);
  const size_t logit_bytes = max_batch * shape.classes * sizeof(float);
  PINWHEEL_CUDA_RETURN_IF_ERROR(cudaMalloc(&st.params, param_bytes));
  PINWHEEL_CUDA_RETURN_IF_ERROR(cudaMalloc(&st.grads, param_bytes));
  PINWHEEL_CUDA_RETURN_IF_ERROR(cudaMalloc(&st.velocity, param_bytes));
  PINWHEEL_CUDA_RETURN_IF_ERROR(cudaMalloc(&st.hidden, hidden_bytes));
  PINWHEEL_CUDA_RETURN_IF_ERROR(cudaMalloc(&st.grad_hidden, hidden_bytes));
  PINWHEEL_CUDA_RETURN_IF_ERROR(cudaMalloc(&st.logits, logit_bytes));
  PINWHEEL_CUDA_RETURN_IF_ERROR(cudaMalloc(&st.grad_logits, logit_bytes));
  PINWHEEL_CUDA_RETURN_IF_ERROR(
      cudaMalloc(&st.counters, sizeof(DeviceCounters)));
  PINWHEEL_CUDA_RETURN_IF_ERROR(
      cudaMallocHost(&st.host_counters, sizeof(DeviceCounters)));
  PINWHEEL_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(st.params, initial.data(), param_bytes,
                      cudaMemcpyHostToDevice, st.stream));
  PINWHEEL_CUDA_RETURN_IF_ERROR(
      cudaMemsetAsync(st.velocity, 0, param_bytes, st.stream));
  PINWHEEL_CUDA_RETURN_IF_ERROR(
      cudaMemsetAsync(st.counters, 0, sizeof(DeviceCounters), st.stream));
  // `initial` is pageable and the caller's: wait before returning.
  PINWHEEL_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(st.stream));
  return std::unique_ptr<MlpCuda>(new MlpCuda(std::move(state)));
}

MlpCuda::MlpCuda(std::unique_ptr<MlpCudaState> state)
    : state_(std::move(state)) {}

MlpCuda::~MlpCuda() = default;

void* MlpCuda::native_stream() const { return state_->stream; }

absl::Status MlpCuda::CheckBatch(int64_t n) const {
  if (n < 1 || n > state_->max_batch) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "batch of %d samples; this model takes 1..%d", n, state_->max_batch));
  }
  PINWHEEL_CUDA_RETURN_IF_ERROR(cudaSetDevice(state_->ordinal));
  return absl::OkStatus();
}

absl::Status MlpCuda::Forward(const float* x, int64_t n) {
  MlpCudaState& st = *state_;
  const int64_t hid = st.shape.hidden;
  if (absl::Status s = st.Gemm(false, false, n, hid, st.shape.inputs, x,
                               st.params + st.at.w1, 0.0f, st.hidden);
      !s.ok()) {
    return s;
  }
  PINWHEEL_CUDA_RETURN_IF_ERROR(
      LaunchBiasRelu(st.hidden, st.params + st.at.b1, n, hid, st.stream));
  return st.Gemm(false, false, n, st.shape.classes, hid, st.hidden,
                 st.params + st.at.w2, 0.0f, st.logits);
}

absl::Status MlpCuda::TrainStep(const float* x, const int64_t* y, int64_t n) {
  if (absl::Status s = CheckBatch(n); !s.ok()) return s;
  if (absl::Status s = Forward(x, n); !s.ok()) return s;
  MlpCudaState& st = *state_;
  const int64_t in = st.shape.inputs, hid = st.shape.hidden,
                cls = st.shape.classes;
  float* g = st.grads;
  PINWHEEL_CUDA_RETURN_IF_ERROR(LaunchSoftmaxCrossEntropy(
      st.logits, st.params + st.at.b2, y, n, cls, st.grad_logits,
      ++st.train_steps, st.counters, st.stream));
  // Output layer: dW2 = hidden^T · dZ2, db2 = column sums of dZ2.
  if (absl::Status s = st.Gemm(true, false, hid, cls, n, st.hidden,
                               st.grad_logits, 0.0f, g + st.at.w2);
      !s.ok()) {
    return s;
  }
  PINWHEEL_CUDA_RETURN_IF_ERROR(
      LaunchColumnSums(st.grad_logits, n, cls, g + st.at.b2, st.stream));
  // Hidden layer: dZ1 = (dZ2 · W2^T) masked by relu, dW1 = x^T · dZ1.
  if (absl::Status s = st.Gemm(false, true, n, hid, cls, st.grad_logits,
                               st.params + st.at.w2, 0.0f, st.grad_hidden);
      !s.ok()) {
    return s;
  }
  PINWHEEL_CUDA_RETURN_IF_ERROR(
      LaunchReluBackward(st.hidden, st.grad_hidden, n * hid, st.stream));
  PINWHEEL_CUDA_RETURN_IF_ERROR(
      LaunchColumnSums(st.grad_hidden, n, hid, g + st.at.b1, st.stream));
  if (absl::Status s = st.Gemm(true, false, in, hid, n, x, st.grad_hidden, 0.0f,
                               g + st.at.w1);
      !s.ok()) {
    return s;
  }
  if (gradient_hook_) {
    if (absl::Status s =
            gradient_hook_(g, static_cast<int64_t>(st.at.total), st.stream);
        !s.ok()) {
      return s;
    }
  }
  PINWHEEL_CUDA_RETURN_IF_ERROR(LaunchSgdMomentum(
      st.params, st.velocity, g, static_cast<int64_t>(st.at.total),
      st.sgd.learning_rate, st.sgd.momentum, st.stream));
  st.train_samples += n;
  return absl::OkStatus();
}

absl::Status MlpCuda::EvalStep(const float* x, const int64_t* y, int64_t n) {
  if (absl::Status s = CheckBatch(n); !s.ok()) return s;
  if (absl::Status s = Forward(x, n); !s.ok()) return s;
  MlpCudaState& st = *state_;
  PINWHEEL_CUDA_RETURN_IF_ERROR(
      LaunchCountCorrect(st.logits, st.params + st.at.b2, y, n,
                         st.shape.classes, st.counters, st.stream));
  st.eval_samples += n;
  return absl::OkStatus();
}

absl::StatusOr<MlpMetrics> MlpCuda::TakeMetrics() {
  MlpCudaState& st = *state_;
  PINWHEEL_CUDA_RETURN_IF_ERROR(cudaSetDevice(st.ordinal));
  PINWHEEL_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(st.host_counters, st.counters, sizeof(DeviceCounters),
                      cudaMemcpyDeviceToHost, st.stream));
  PINWHEEL_CUDA_RETURN_IF_ERROR(
      cudaMemsetAsync(st.counters, 0, sizeof(DeviceCounters), st.stream));
  // The copy is read only after this synchronisation (DESIGN.md).
  PINWHEEL_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(st.stream));
  const DeviceCounters c = *st.host_counters;
  if (c.bad_labels > 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%d samples had a label outside 0..%d (one of them: %d)", c.bad_labels,
        st.shape.classes - 1, c.first_bad_label));
  }
  MlpMetrics out;
  out.train_loss_sum = c.train_loss_sum;
  out.train_samples = st.train_samples;
  out.first_nonfinite_step = static_cast<int64_t>(c.first_nonfinite_step);
  out.eval_correct = static_cast<int64_t>(c.eval_correct);
  out.eval_samples = st.eval_samples;
  st.train_samples = 0;
  st.train_steps = 0;
  st.eval_samples = 0;
  return out;
}

absl::StatusOr<std::vector<float>> MlpCuda::Parameters() {
  MlpCudaState& st = *state_;
  std::vector<float> out(st.at.total);
  PINWHEEL_CUDA_RETURN_IF_ERROR(cudaSetDevice(st.ordinal));
  PINWHEEL_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(out.data(), st.params, st.at.total * sizeof(float),
                      cudaMemcpyDeviceToHost, st.stream));
  PINWHEEL_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(st.stream));
  return out;
}

absl::StatusOr<MlpState> MlpCuda::SaveState() {
  MlpCudaState& st = *state_;
  MlpState out{.parameters = std::vector<float>(st.at.total),
               .velocity = std::vector<float>(st.at.total)};
  const size_t bytes = st.at.total * sizeof(float);
  PINWHEEL_CUDA_RETURN_IF_ERROR(cudaSetDevice(st.ordinal));
  // Queued behind every step on the compute stream, so they copy the values
  // after the last queued update.
  PINWHEEL_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(out.parameters.data(), st.params, bytes,
                      cudaMemcpyDeviceToHost, st.stream));
  PINWHEEL_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(out.velocity.data(), st.velocity, bytes,
                      cudaMemcpyDeviceToHost, st.stream));
  // The copies are read only after this synchronisation (DESIGN.md).
  PINWHEEL_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(st.stream));
  return out;
}

absl::Status MlpCuda::RestoreState(const MlpState& state) {
  MlpCudaState& st = *state_;
  if (state.parameters.size() != st.at.total ||
      state.velocity.size() != st.at.total) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "RestoreState: %d parameters and %d momentum values given; the shape "
        "%d -> %d -> %d needs %d of each",
        state.parameters.size(), state.velocity.size(), st.shape.inputs,
        st.shape.hidden, st.shape.classes, st.at.total));
  }
  const size_t bytes = st.at.total * sizeof(float);
  PINWHEEL_CUDA_RETURN_IF_ERROR(cudaSetDevice(st.ordinal));
  PINWHEEL_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(st.params, state.parameters.data(), bytes,
                      cudaMemcpyHostToDevice, st.stream));
  PINWHEEL_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(st.velocity, state.velocity.data(), bytes,
                      cudaMemcpyHostToDevice, st.stream));
  // `state` is pageable and the caller's: wait before returning.
  PINWHEEL_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(st.stream));
  return absl::OkStatus();
}

absl::StatusOr<float*> MlpCuda::UploadFloats(const float* host, int64_t count) {
  PINWHEEL_CUDA_RETURN_IF_ERROR(cudaSetDevice(state_->ordinal));
  void* p = nullptr;
  PINWHEEL_CUDA_RETURN_IF_ERROR(cudaMalloc(&p, count * sizeof(float)));
  state_->uploads.push_back(p);
  PINWHEEL_CUDA_RETURN_IF_ERROR(
      cudaMemcpy(p, host, count * sizeof(float), cudaMemcpyHostToDevice));
  return static_cast<float*>(p);
}

absl::StatusOr<int64_t*> MlpCuda::UploadLabels(const int64_t* host,
                                               int64_t count) {
  PINWHEEL_CUDA_RETURN_IF_ERROR(cudaSetDevice(state_->ordinal));
  void* p = nullptr;
  PINWHEEL_CUDA_RETURN_IF_ERROR(cudaMalloc(&p, count * sizeof(int64_t)));
  state_->uploads.push_back(p);
  PINWHEEL_CUDA_RETURN_IF_ERROR(
      cudaMemcpy(p, host, count * sizeof(int64_t), cudaMemcpyHostToDevice));
  return static_cast<int64_t*>(p);
}

}  // namespace pinwheel::train
