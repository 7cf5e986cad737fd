#include "samples/train/mlp_cpu.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <unistd.h>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_format.h"

namespace pinwheel::train {
namespace {

// C[i, :] (+)= sum_kk op(A)(i, kk) · B[kk, :] for four rows i at once, so
// each row of B is read once per four rows of C (B not transposed).
void GemmRowsNN(bool trans_a, int64_t m, int64_t n, int64_t k, float alpha,
                const float* a, const float* __restrict b,
                float* __restrict c) {
  auto a_at = [&](int64_t i, int64_t kk) {
    return alpha * (trans_a ? a[kk * m + i] : a[i * k + kk]);
  };
  int64_t i = 0;
  for (; i + 4 <= m; i += 4) {
    float* __restrict c0 = c + (i + 0) * n;
    float* __restrict c1 = c + (i + 1) * n;
    float* __restrict c2 = c + (i + 2) * n;
    float* __restrict c3 = c + (i + 3) * n;
    for (int64_t kk = 0; kk < k; ++kk) {
      const float a0 = a_at(i + 0, kk);
      const float a1 = a_at(i + 1, kk);
      const float a2 = a_at(i + 2, kk);
      const float a3 = a_at(i + 3, kk);
      const float* __restrict brow = b + kk * n;
      for (int64_t j = 0; j < n; ++j) {
        const float bv = brow[j];
        c0[j] += a0 * bv;
        c1[j] += a1 * bv;
        c2[j] += a2 * bv;
        c3[j] += a3 * bv;
      }
    }
  }
  for (; i < m; ++i) {
    float* __restrict crow = c + i * n;
    for (int64_t kk = 0; kk < k; ++kk) {
      const float av = a_at(i, kk);
      const float* __restrict brow = b + kk * n;
      for (int64_t j = 0; j < n; ++j) crow[j] += av * brow[j];
    }
  }
}

}  // namespace

void RowMajorGemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                  float alpha, const float* a, const float* b, float beta,
                  float* c) {
  for (int64_t i = 0; i < m * n; ++i) c[i] = beta == 0.0f ? 0.0f : beta * c[i];
  if (!trans_b) {
    GemmRowsNN(trans_a, m, n, k, alpha, a, b, c);
    return;
  }
  // B transposed: rows of B are contiguous along k, so take dot products.
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      float sum = 0.0f;
      for (int64_t kk = 0; kk < k; ++kk) {
        const float av = trans_a ? a[kk * m + i] : a[i * k + kk];
        sum += av * b[j * k + kk];
      }
      c[i * n + j] += alpha * sum;
    }
  }
}

absl::StatusOr<std::unique_ptr<MlpCpu>> MlpCpu::Create(
    const MlpShape& shape, int64_t max_batch, std::vector<float> initial,
    const SgdOptions& sgd) {
  if (shape.inputs < 1 || shape.hidden < 1 || shape.classes < 2) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "MLP shape %d -> %d -> %d: need inputs >= 1, hidden >= 1, classes >= 2",
        shape.inputs, shape.hidden, shape.classes));
  }
  if (max_batch < 1) {
    return absl::InvalidArgumentError(
        absl::StrFormat("max_batch is %d; must be >= 1", max_batch));
  }
  // The activations take max_batch × (2·hidden + 2·classes) floats: refuse
  // what the machine cannot hold rather than die of bad_alloc.
  const double activation_bytes =
      4.0 * static_cast<double>(max_batch) *
      static_cast<double>(2 * shape.hidden + 2 * shape.classes);
  const double physical = static_cast<double>(sysconf(_SC_PHYS_PAGES)) *
                          static_cast<double>(sysconf(_SC_PAGESIZE));
  if (physical > 0 && activation_bytes > physical) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "a batch of %d samples needs %.1f GiB of activations for MLP %d -> %d "
        "-> %d; the machine has %.1f GiB",
        max_batch, activation_bytes / (1 << 30), shape.inputs, shape.hidden,
        shape.classes, physical / (1 << 30)));
  }
  if (initial.size() != ParameterLayout(shape).total) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%d initial parameters given; the shape needs %d",
                        initial.size(), ParameterLayout(shape).total));
  }
  return std::unique_ptr<MlpCpu>(
      new MlpCpu(shape, max_batch, std::move(initial), sgd));
}

MlpCpu::MlpCpu(const MlpShape& shape, int64_t max_batch,
               std::vector<float> initial, const SgdOptions& sgd)
    : shape_(shape),
      at_(shape),
      max_batch_(max_batch),
      sgd_(sgd),
      params_(std::move(initial)),
      grads_(at_.total, 0.0f),
      velocity_(at_.total, 0.0f),
      hidden_(max_batch * shape.hidden),
      logits_(max_batch * shape.classes),
      grad_logits_(max_batch * shape.classes),
      grad_hidden_(max_batch * shape.hidden) {}

absl::Status MlpCpu::CheckBatch(int64_t n) const {
  if (n < 1 || n > max_batch_) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "batch of %d samples; this model takes 1..%d", n, max_batch_));
  }
  return absl::OkStatus();
}

void MlpCpu::Forward(const float* x, int64_t n) {
  const int64_t hid = shape_.hidden;
  const float* b1 = params_.data() + at_.b1;
  RowMajorGemm(false, false, n, hid, shape_.inputs, 1.0f, x,
               params_.data() + at_.w1, 0.0f, hidden_.data());
  for (int64_t s = 0; s < n; ++s) {
    float* row = hidden_.data() + s * hid;
    for (int64_t j = 0; j < hid; ++j) row[j] = std::max(row[j] + b1[j], 0.0f);
  }
  RowMajorGemm(false, false, n, shape_.classes, hid, 1.0f, hidden_.data(),
               params_.data() + at_.w2, 0.0f, logits_.data());
}

absl::Status MlpCpu::TrainStep(const float* x, const int64_t* y, int64_t n) {
  if (absl::Status s = CheckBatch(n); !s.ok()) return s;
  const int64_t in = shape_.inputs, hid = shape_.hidden, cls = shape_.classes;
  Forward(x, n);

  // Softmax cross-entropy: loss and d(mean loss)/d(logits).
  const float* b2 = params_.data() + at_.b2;
  const float inv_n = 1.0f / static_cast<float>(n);
  double loss_sum = 0.0;
  for (int64_t s = 0; s < n; ++s) {
    float* z = logits_.data() + s * cls;
    float* dz = grad_logits_.data() + s * cls;
    const int64_t label = y[s];
    if (label < 0 || label >= cls) {
      if (bad_label_count_++ == 0) first_bad_label_ = label;
      std::fill(dz, dz + cls, 0.0f);
      continue;
    }
    float max_z = z[0] + b2[0];
    for (int64_t c = 1; c < cls; ++c) max_z = std::max(max_z, z[c] + b2[c]);
    float sum = 0.0f;
    for (int64_t c = 0; c < cls; ++c) {
      dz[c] = std::exp(z[c] + b2[c] - max_z);
      sum += dz[c];
    }
    loss_sum += std::log(sum) - (z[label] + b2[label] - max_z);
    for (int64_t c = 0; c < cls; ++c) {
      dz[c] = (dz[c] / sum - (c == label ? 1.0f : 0.0f)) * inv_n;
    }
  }

  float* g = grads_.data();
  // Output layer: dW2 = hidden^T · dZ2, db2 = column sums of dZ2.
  RowMajorGemm(true, false, hid, cls, n, 1.0f, hidden_.data(),
               grad_logits_.data(), 0.0f, g + at_.w2);
  for (int64_t c = 0; c < cls; ++c) {
    float sum = 0.0f;
    for (int64_t s = 0; s < n; ++s) sum += grad_logits_[s * cls + c];
    g[at_.b2 + c] = sum;
  }
  // Hidden layer: dZ1 = (dZ2 · W2^T) masked by relu, dW1 = x^T · dZ1.
  RowMajorGemm(false, true, n, hid, cls, 1.0f, grad_logits_.data(),
               params_.data() + at_.w2, 0.0f, grad_hidden_.data());
  for (int64_t i = 0; i < n * hid; ++i) {
    if (!(hidden_[i] > 0.0f)) grad_hidden_[i] = 0.0f;
  }
  for (int64_t j = 0; j < hid; ++j) {
    float sum = 0.0f;
    for (int64_t s = 0; s < n; ++s) sum += grad_hidden_[s * hid + j];
    g[at_.b1 + j] = sum;
  }
  RowMajorGemm(true, false, in, hid, n, 1.0f, x, grad_hidden_.data(), 0.0f,
               g + at_.w1);

  if (gradient_hook_) {
    if (absl::Status s =
            gradient_hook_(g, static_cast<int64_t>(at_.total), nullptr);
        !s.ok()) {
      return s;
    }
  }
  // SGD with momentum (PyTorch's form).
  const float lr = sgd_.learning_rate, mu = sgd_.momentum;
  for (size_t i = 0; i < at_.total; ++i) {
    velocity_[i] = mu * velocity_[i] + g[i];
    params_[i] -= lr * velocity_[i];
  }
  ++train_steps_;
  if (!std::isfinite(loss_sum) && metrics_.first_nonfinite_step == 0) {
    metrics_.first_nonfinite_step = train_steps_;
  }
  metrics_.train_loss_sum += loss_sum;
  metrics_.train_samples += n;
  return absl::OkStatus();
}

absl::Status MlpCpu::EvalStep(const float* x, const int64_t* y, int64_t n) {
  if (absl::Status s = CheckBatch(n); !s.ok()) return s;
  const int64_t cls = shape_.classes;
  Forward(x, n);
  const float* b2 = params_.data() + at_.b2;
  int64_t correct = 0;
  for (int64_t s = 0; s < n; ++s) {
    const float* z = logits_.data() + s * cls;
    int64_t best = 0;
    float best_z = z[0] + b2[0];
    for (int64_t c = 1; c < cls; ++c) {
      if (z[c] + b2[c] > best_z) {
        best_z = z[c] + b2[c];
        best = c;
      }
    }
    if (y[s] < 0 || y[s] >= cls) {
      if (bad_label_count_++ == 0) first_bad_label_ = y[s];
    } else if (best == y[s]) {
      ++correct;
    }
  }
  metrics_.eval_correct += correct;
  metrics_.eval_samples += n;
  return absl::OkStatus();
}

absl::StatusOr<MlpMetrics> MlpCpu::TakeMetrics() {
  if (bad_label_count_ > 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%d samples had a label outside 0..%d (the first: %d)",
        bad_label_count_, shape_.classes - 1, first_bad_label_));
  }
  MlpMetrics out = metrics_;
  metrics_ = MlpMetrics();
  train_steps_ = 0;
  return out;
}

absl::StatusOr<MlpState> MlpCpu::SaveState() {
  return MlpState{.parameters = params_, .velocity = velocity_};
}

absl::Status MlpCpu::RestoreState(const MlpState& state) {
  if (state.parameters.size() != at_.total ||
      state.velocity.size() != at_.total) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "RestoreState: %d parameters and %d momentum values given; the shape "
        "%d -> %d -> %d needs %d of each",
        state.parameters.size(), state.velocity.size(), shape_.inputs,
        shape_.hidden, shape_.classes, at_.total));
  }
  params_ = state.parameters;
  velocity_ = state.velocity;
  return absl::OkStatus();
}

double MlpCpu::Loss(const float* x, const int64_t* y, int64_t n) {
  const int64_t cls = shape_.classes;
  Forward(x, n);
  const float* b2 = params_.data() + at_.b2;
  double sum = 0.0;
  for (int64_t s = 0; s < n; ++s) {
    const float* z = logits_.data() + s * cls;
    double max_z = z[0] + b2[0];
    for (int64_t c = 1; c < cls; ++c)
      max_z = std::max<double>(max_z, z[c] + b2[c]);
    double e = 0.0;
    for (int64_t c = 0; c < cls; ++c) e += std::exp(z[c] + b2[c] - max_z);
    sum += std::log(e) - (z[y[s]] + b2[y[s]] - max_z);
  }
  return sum / static_cast<double>(n);
}

}  // namespace pinwheel::train
