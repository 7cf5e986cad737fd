// Samplers: the order of an epoch. A sampler turns (epoch, seed, rank,
// world size) into the sequence of dataset indices this rank reads; the
// loader cuts it into batches. Same seed and epoch, same order, whatever the
// number of workers.
//
// Example:
//   RandomSampler sampler(/*size=*/50000, /*seed=*/7);
//   std::vector<int64_t> order = sampler.Indices(/*epoch=*/3);
//
// Note [portable shuffles]
// std::shuffle and the std distributions differ between standard libraries,
// so the random samplers use their own Fisher–Yates over SplitMix64 with
// Lemire's bounded draw: the order for a seed is the same on every platform.
#ifndef PINWHEEL_LOADER_SAMPLER_H_
#define PINWHEEL_LOADER_SAMPLER_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"

namespace pinwheel {

// Interface. Implementations are immutable and thread-safe.
class Sampler {
 public:
  virtual ~Sampler() = default;
  // Returns the indices read in `epoch` (>= 0), in order.
  virtual std::vector<int64_t> Indices(int64_t epoch) const = 0;
  // Returns how many indices every epoch has.
  virtual int64_t size() const = 0;
};

// 0, 1, ..., size-1 every epoch.
class SequentialSampler final : public Sampler {
 public:
  explicit SequentialSampler(int64_t size) : size_(size) {}
  std::vector<int64_t> Indices(int64_t epoch) const override;
  int64_t size() const override { return size_; }

 private:
  int64_t size_;
};

// A permutation of 0..size-1, different every epoch, fixed by (seed, epoch).
class RandomSampler final : public Sampler {
 public:
  RandomSampler(int64_t size, uint64_t seed) : size_(size), seed_(seed) {}
  std::vector<int64_t> Indices(int64_t epoch) const override;
  int64_t size() const override { return size_; }

 private:
  int64_t size_;
  uint64_t seed_;
};

// This rank's share of 0..size-1, like torch's DistributedSampler: the
// (optionally shuffled) order is padded by wrapping around to a multiple of
// world_size (or its tail dropped when drop_tail), then rank r takes
// positions r, r + world_size, ...
class DistributedSampler final : public Sampler {
 public:
  // Returns the sampler, or InvalidArgument naming the bad value:
  // size >= 0, world_size >= 1, 0 <= rank < world_size.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<DistributedSampler>>
  Create(int64_t size, int rank, int world_size, bool shuffle, uint64_t seed,
         bool drop_tail);

  std::vector<int64_t> Indices(int64_t epoch) const override;
  int64_t size() const override { return per_rank_; }

 private:
  DistributedSampler(int64_t size, int rank, int world_size, bool shuffle,
                     uint64_t seed, bool drop_tail);
  int64_t size_;
  int rank_;
  int world_size_;
  bool shuffle_;
  uint64_t seed_;
  int64_t per_rank_;
};

// Cuts a sampler's order into batches of batch_size; the last short batch is
// kept unless drop_last.
class BatchSampler {
 public:
  // Returns the sampler, or InvalidArgument when batch_size < 1.
  // `sampler` is owned.
  [[nodiscard]] static absl::StatusOr<BatchSampler> Create(
      std::unique_ptr<Sampler> sampler, int64_t batch_size, bool drop_last);

  // Returns the batches of `epoch`, in order.
  std::vector<std::vector<int64_t>> Batches(int64_t epoch) const;
  // Returns how many batches every epoch has.
  int64_t batches_per_epoch() const;
  int64_t batch_size() const { return batch_size_; }
  const Sampler& sampler() const { return *sampler_; }

 private:
  BatchSampler(std::unique_ptr<Sampler> sampler, int64_t batch_size,
               bool drop_last)
      : sampler_(std::move(sampler)),
        batch_size_(batch_size),
        drop_last_(drop_last) {}
  std::shared_ptr<const Sampler> sampler_;
  int64_t batch_size_;
  bool drop_last_;
};

// Returns a permutation of 0..size-1 fixed by (seed, epoch); see
// Note [portable shuffles].
std::vector<int64_t> Permutation(int64_t size, uint64_t seed, int64_t epoch);

}  // namespace pinwheel

#endif  // PINWHEEL_LOADER_SAMPLER_H_
