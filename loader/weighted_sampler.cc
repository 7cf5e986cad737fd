// WeightedRandomSampler, ClassBalancedSampler: see weighted_sampler.h and
// its Note [alias draws].
#include "loader/weighted_sampler.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

#include "loader/internal/random.h"

namespace pinwheel {
namespace {

constexpr double kTwoTo53 = 9007199254740992.0;

absl::Status CheckNumSamples(const char* who, int64_t num_samples) {
  if (num_samples < -1) {
    return absl::InvalidArgumentError(
        absl::StrCat(who, ": num_samples is ", num_samples,
                     "; it must be >= 0 (or -1: one per index)"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<WeightedRandomSampler>>
WeightedRandomSampler::Create(absl::Span<const double> weights,
                              int64_t num_samples) {
  constexpr const char* kWho = "WeightedRandomSampler";
  if (weights.empty()) {
    return absl::InvalidArgumentError(
        "WeightedRandomSampler: weights is empty; it needs one weight per "
        "index");
  }
  if (absl::Status s = CheckNumSamples(kWho, num_samples); !s.ok()) return s;
  double largest = 0;
  for (size_t i = 0; i < weights.size(); ++i) {
    if (!std::isfinite(weights[i]) || weights[i] < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("WeightedRandomSampler: weights[", i, "] = ", weights[i],
                       "; every weight must be finite "
                       "and >= 0"));
    }
    largest = std::max(largest, weights[i]);
  }
  if (!(largest > 0)) {
    return absl::InvalidArgumentError(
        "WeightedRandomSampler: the weights sum to 0; at least one must be "
        "> 0");
  }
  // Vose's alias construction on the scaled weights n * w_i / sum, computed
  // on w_i / max(w), which sum to at most n: finite weights of any size
  // (8e307 twice, 1e308 twice) neither overflow nor lose their ratio.
  const size_t n = weights.size();
  double sum = 0;
  for (double w : weights) sum += w / largest;
  std::vector<double> scaled(n);
  std::vector<size_t> small;
  std::vector<size_t> large;
  for (size_t i = 0; i < n; ++i) {
    scaled[i] = weights[i] / largest * (static_cast<double>(n) / sum);
    (scaled[i] < 1.0 ? small : large).push_back(i);
  }
  std::vector<uint64_t> keep(n, 0);
  std::vector<int64_t> alias(n);
  for (size_t i = 0; i < n; ++i) alias[i] = static_cast<int64_t>(i);
  while (!small.empty() && !large.empty()) {
    const size_t s = small.back();
    small.pop_back();
    const size_t l = large.back();
    keep[s] = static_cast<uint64_t>(scaled[s] * kTwoTo53);
    alias[s] = static_cast<int64_t>(l);
    scaled[l] = (scaled[l] + scaled[s]) - 1.0;
    if (scaled[l] < 1.0) {
      large.pop_back();
      small.push_back(l);
    }
  }
  // What is left has (up to rounding) probability 1: always kept.
  for (size_t i : large) keep[i] = uint64_t{1} << 53;
  for (size_t i : small) keep[i] = uint64_t{1} << 53;
  return std::unique_ptr<WeightedRandomSampler>(new WeightedRandomSampler(
      std::move(keep), std::move(alias),
      num_samples == -1 ? static_cast<int64_t>(n) : num_samples));
}

int64_t WeightedRandomSampler::At(uint64_t seed, int64_t epoch,
                                  int64_t position) const {
  // A generator per (seed, epoch, position): Note [alias draws].
  internal::SplitMix64Stream stream(internal::Mix64(
      internal::SplitMix64(seed ^
                           internal::SplitMix64(static_cast<uint64_t>(epoch))) ^
      internal::SplitMix64(static_cast<uint64_t>(position))));
  const uint64_t column = stream.Bounded(keep_.size());
  const uint64_t coin = stream.Next() >> 11;  // 53 bits
  return coin < keep_[column] ? static_cast<int64_t>(column) : alias_[column];
}

absl::StatusOr<std::unique_ptr<ClassBalancedSampler>>
ClassBalancedSampler::Create(absl::Span<const int64_t> labels,
                             int64_t num_samples) {
  if (labels.empty()) {
    return absl::InvalidArgumentError(
        "ClassBalancedSampler: labels is empty; it needs one label per index");
  }
  if (absl::Status s = CheckNumSamples("ClassBalancedSampler", num_samples);
      !s.ok()) {
    return s;
  }
  absl::flat_hash_map<int64_t, int64_t> counts;
  for (size_t i = 0; i < labels.size(); ++i) {
    if (labels[i] < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("ClassBalancedSampler: labels[", i, "] = ", labels[i],
                       "; labels must be >= 0"));
    }
    ++counts[labels[i]];
  }
  std::vector<double> weights(labels.size());
  for (size_t i = 0; i < labels.size(); ++i) {
    weights[i] = 1.0 / static_cast<double>(counts[labels[i]]);
  }
  absl::StatusOr<std::unique_ptr<WeightedRandomSampler>> draws =
      WeightedRandomSampler::Create(weights, num_samples);
  if (!draws.ok()) return draws.status();
  return std::unique_ptr<ClassBalancedSampler>(
      new ClassBalancedSampler(*std::move(draws)));
}

}  // namespace pinwheel
