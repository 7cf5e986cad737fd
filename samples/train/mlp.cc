#include "samples/train/mlp.h"

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace pinwheel::train {

ParameterLayout::ParameterLayout(const MlpShape& shape) {
  const auto in = static_cast<size_t>(shape.inputs);
  const auto hid = static_cast<size_t>(shape.hidden);
  const auto cls = static_cast<size_t>(shape.classes);
  w1 = 0;
  b1 = w1 + in * hid;
  w2 = b1 + hid;
  b2 = w2 + hid * cls;
  total = b2 + cls;
}

std::vector<float> InitialParameters(const MlpShape& shape, uint64_t seed) {
  const ParameterLayout at(shape);
  std::vector<float> params(at.total, 0.0f);
  SplitMix64 rng(seed);
  auto fill = [&rng](float* w, size_t count, int64_t fan_in) {
    const double bound = 1.0 / std::sqrt(static_cast<double>(fan_in));
    for (size_t i = 0; i < count; ++i) {
      w[i] = static_cast<float>((2.0 * rng.Uniform() - 1.0) * bound);
    }
  };
  fill(params.data() + at.w1, at.b1 - at.w1, shape.inputs);
  fill(params.data() + at.w2, at.b2 - at.w2, shape.hidden);
  return params;
}

double ScaledLearningRate(double lr, int64_t global_batch) {
  if (global_batch >= kLearningRateBatch) return lr;
  return lr * static_cast<double>(global_batch) /
         static_cast<double>(kLearningRateBatch);
}

}  // namespace pinwheel::train
