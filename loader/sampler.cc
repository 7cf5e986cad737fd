// Samplers: see sampler.h and its Note [portable shuffles].
#include "loader/sampler.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <numeric>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "loader/internal/random.h"

namespace pinwheel {
namespace {

using internal::SplitMix64;
using internal::SplitMix64Stream;

std::vector<int64_t> Iota(int64_t size) {
  std::vector<int64_t> order(static_cast<size_t>(std::max<int64_t>(size, 0)));
  std::iota(order.begin(), order.end(), int64_t{0});
  return order;
}

}  // namespace

std::vector<int64_t> Permutation(int64_t size, uint64_t seed, int64_t epoch) {
  std::vector<int64_t> order = Iota(size);
  // One stream per (seed, epoch): the epoch is hashed before it meets the
  // seed so that (seed, epoch + 1) and (seed + 1, epoch) are unrelated.
  SplitMix64Stream stream(
      SplitMix64(seed ^ SplitMix64(static_cast<uint64_t>(epoch))));
  // Fisher–Yates, from the back: position i takes one of positions 0..i.
  for (size_t i = order.size(); i > 1; --i) {
    const uint64_t j = stream.Bounded(i);
    std::swap(order[i - 1], order[j]);
  }
  return order;
}

std::vector<int64_t> SequentialSampler::Indices(int64_t /*epoch*/) const {
  return Iota(size_);
}

std::vector<int64_t> RandomSampler::Indices(int64_t epoch) const {
  return Permutation(size_, seed_, epoch);
}

absl::StatusOr<std::unique_ptr<DistributedSampler>> DistributedSampler::Create(
    int64_t size, int rank, int world_size, bool shuffle, uint64_t seed,
    bool drop_tail) {
  if (size < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "DistributedSampler: size is ", size, "; it must be >= 0"));
  }
  if (world_size < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "DistributedSampler: world_size is ", world_size, "; it must be >= 1"));
  }
  if (rank < 0 || rank >= world_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "DistributedSampler: rank is ", rank,
        "; it must be in [0, world_size) = [0, ", world_size, ")"));
  }
  return std::unique_ptr<DistributedSampler>(
      new DistributedSampler(size, rank, world_size, shuffle, seed, drop_tail));
}

DistributedSampler::DistributedSampler(int64_t size, int rank, int world_size,
                                       bool shuffle, uint64_t seed,
                                       bool drop_tail)
    : size_(size),
      rank_(rank),
      world_size_(world_size),
      shuffle_(shuffle),
      seed_(seed),
      // As torch: drop the tail down to a multiple of world_size, or pad up
      // to one.
      per_rank_(size / world_size +
                (!drop_tail && size % world_size != 0 ? 1 : 0)) {}

std::vector<int64_t> DistributedSampler::Indices(int64_t epoch) const {
  // Every rank computes the same global order (same seed and epoch), then
  // keeps its own stride of it.
  const std::vector<int64_t> order =
      shuffle_ ? Permutation(size_, seed_, epoch) : Iota(size_);
  std::vector<int64_t> mine;
  mine.reserve(static_cast<size_t>(per_rank_));
  for (int64_t k = 0; k < per_rank_; ++k) {
    const int64_t position = rank_ + k * world_size_;
    // Positions past the end wrap around to the start, as many times as
    // needed (torch's padding). size_ > 0 here: per_rank_ is 0 otherwise.
    mine.push_back(order[static_cast<size_t>(position % size_)]);
  }
  return mine;
}

absl::StatusOr<BatchSampler> BatchSampler::Create(
    std::unique_ptr<Sampler> sampler, int64_t batch_size, bool drop_last) {
  if (sampler == nullptr) {
    return absl::InvalidArgumentError(
        "BatchSampler: sampler is null; it must be a sampler");
  }
  if (batch_size < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "BatchSampler: batch_size is ", batch_size, "; it must be >= 1"));
  }
  return BatchSampler(std::move(sampler), batch_size, drop_last);
}

std::vector<std::vector<int64_t>> BatchSampler::Batches(int64_t epoch) const {
  const std::vector<int64_t> order = sampler_->Indices(epoch);
  const auto total = static_cast<int64_t>(order.size());
  std::vector<std::vector<int64_t>> batches;
  batches.reserve(static_cast<size_t>(batches_per_epoch()));
  for (int64_t begin = 0; begin < total; begin += batch_size_) {
    const int64_t end = std::min(begin + batch_size_, total);
    if (end - begin < batch_size_ && drop_last_) break;
    batches.emplace_back(order.begin() + begin, order.begin() + end);
  }
  return batches;
}

int64_t BatchSampler::batches_per_epoch() const {
  const int64_t total = std::max<int64_t>(sampler_->size(), 0);
  return drop_last_ ? total / batch_size_
                    : (total + batch_size_ - 1) / batch_size_;
}

}  // namespace pinwheel
