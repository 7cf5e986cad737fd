// WeightedRandomSampler and ClassBalancedSampler: IndexSamplers (see
// loader/index_sampler.h) that draw with replacement, index i with
// probability weight[i] / sum(weights), like torch's WeightedRandomSampler,
// but each draw a pure function of (seed, epoch, position): exact and
// elastic resume keep working.
//
// Example:
//   PINWHEEL_ASSIGN_OR_RETURN(std::unique_ptr<WeightedRandomSampler> s,
//       WeightedRandomSampler::Create(weights, /*num_samples=*/100000));
//   LoaderBuilder(dataset).sampler(std::move(s), /*seed=*/7).batch_size(64)
//
// Note [alias draws]
// Walker's alias method (Vose's construction), built once in O(n): a draw
// picks a column uniformly (Lemire's unbiased bounded draw) and keeps it or
// takes its alias by one 53-bit comparison: O(1) per position whatever the
// weights. The generator of position p is SplitMix64 seeded with a hash of
// (seed, epoch, p); the table is built in double precision, so a draw's
// probability is the weight's share up to about 2^-50 relative.
#ifndef PINWHEEL_LOADER_WEIGHTED_SAMPLER_H_
#define PINWHEEL_LOADER_WEIGHTED_SAMPLER_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

#include "loader/index_sampler.h"

namespace pinwheel {

// Immutable and thread-safe.
class WeightedRandomSampler final : public IndexSampler {
 public:
  // Returns the sampler of `num_samples` draws per epoch (-1: as many as
  // weights) over indices 0..weights.size()-1, or InvalidArgument naming
  // the first bad value: an empty list, a negative, NaN or infinite weight
  // (with its index), all weights zero, num_samples < -1. Any finite
  // weights are accepted, however large: {1e308, 1e308} draws half and
  // half though the sum overflows a double.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<WeightedRandomSampler>>
  Create(absl::Span<const double> weights, int64_t num_samples = -1);

  int64_t size() const override { return num_samples_; }
  int64_t At(uint64_t seed, int64_t epoch, int64_t position) const override;
  int64_t dataset_size() const override {
    return static_cast<int64_t>(alias_.size());
  }

 private:
  WeightedRandomSampler(std::vector<uint64_t> keep, std::vector<int64_t> alias,
                        int64_t num_samples)
      : keep_(std::move(keep)),
        alias_(std::move(alias)),
        num_samples_(num_samples) {}
  // Column c is kept when a 53-bit draw is below keep_[c], else alias_[c].
  std::vector<uint64_t> keep_;
  std::vector<int64_t> alias_;
  int64_t num_samples_;
};

// Draws classes uniformly (each of the classes present equally often, in
// expectation) and, within a class, its indices uniformly, with replacement:
// a WeightedRandomSampler with weight 1 / (count of its class) per index.
// Immutable and thread-safe.
class ClassBalancedSampler final : public IndexSampler {
 public:
  // Returns the sampler over indices 0..labels.size()-1 (labels[i] is index
  // i's class), or InvalidArgument naming the first bad value: an empty
  // list, a negative label (with its index), num_samples < -1.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<ClassBalancedSampler>>
  Create(absl::Span<const int64_t> labels, int64_t num_samples = -1);

  int64_t size() const override { return draws_->size(); }
  int64_t At(uint64_t seed, int64_t epoch, int64_t position) const override {
    return draws_->At(seed, epoch, position);
  }
  int64_t dataset_size() const override { return draws_->dataset_size(); }

 private:
  explicit ClassBalancedSampler(std::unique_ptr<WeightedRandomSampler> draws)
      : draws_(std::move(draws)) {}
  std::unique_ptr<WeightedRandomSampler> draws_;
};

}  // namespace pinwheel

#endif  // PINWHEEL_LOADER_WEIGHTED_SAMPLER_H_
