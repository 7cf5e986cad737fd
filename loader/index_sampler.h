// IndexSampler: a caller's own data order for a map-style dataset, given to
// LoaderBuilder::sampler(). The contract keeps the checkpoint a few dozen
// bytes and resume exact and elastic: the dataset index at each position of
// an epoch is a pure function of (seed, epoch, position) over one global
// order shared by every rank; the loader deals that order's positions over
// the ranks (rank r of W reads global positions r, r + W, ... as the
// built-in DistributedSampler does), so what a rank reads at its own
// position q is a pure function of (seed, epoch, q, rank, world size), and a
// checkpoint needs only (epoch, global position).
//
// Example (a sampler that reads every index twice per epoch):
//   class Twice : public pinwheel::IndexSampler {
//    public:
//     explicit Twice(int64_t n) : n_(n) {}
//     int64_t size() const override { return 2 * n_; }
//     int64_t At(uint64_t seed, int64_t epoch, int64_t p) const override {
//       return pinwheel::EpochShuffle(n_, seed, epoch).At(p % n_);
//     }
//    private:
//     int64_t n_;
//   };
//   LoaderBuilder(dataset).sampler(std::make_shared<Twice>(n), /*seed=*/7)
//
// The contract, checked where it can be:
//  - size() and dataset_size() are constant; At() is thread-safe, never
//    blocks for long, and depends on its arguments only (no state, no
//    clock): the same call returns the same index on every rank, after a
//    resume, with any number of workers. Elastic resume and exactness rest
//    on it; the loader cannot check it.
//  - At() returns an index in [0, dataset size): anything else is delivered
//    as InvalidArgument in that batch's place, naming the epoch, the global
//    position and the value; an exception thrown is delivered the same way.
//  - dataset_size(), when not -1, must equal the dataset's size (Build()
//    returns InvalidArgument naming both otherwise).
// A sampler that keeps state of its own (and saves it into the checkpoint)
// is not supported: the checkpoint holds (seed, epoch, position) only.
#ifndef PINWHEEL_LOADER_INDEX_SAMPLER_H_
#define PINWHEEL_LOADER_INDEX_SAMPLER_H_

#include <cstdint>

namespace pinwheel {

// Interface. Implementations must be immutable and thread-safe.
class IndexSampler {
 public:
  virtual ~IndexSampler() = default;

  // Returns the number of positions in every epoch's global order (>= 0);
  // it may differ from the dataset's size (sampling with replacement).
  virtual int64_t size() const = 0;
  // Returns the dataset index at global `position` of `epoch`'s order for
  // `seed` (the loader's seed). REQUIRES: epoch >= 0, 0 <= position < size().
  virtual int64_t At(uint64_t seed, int64_t epoch, int64_t position) const = 0;
  // Returns the size of the dataset the sampler was made for, or -1 when it
  // does not know (the default).
  virtual int64_t dataset_size() const { return -1; }

  // The most sources a sampler may name.
  static constexpr int kMaxSources = 1 << 16;
  // Optional: sources for LoaderStats::samples_per_source. Returns how many
  // sources indices belong to (0, the default: no per-source counts; at
  // most kMaxSources, else Build() returns InvalidArgument).
  virtual int num_sources() const { return 0; }
  // Returns the source (0..num_sources()-1) of dataset index `index`.
  // REQUIRES: num_sources() > 0, 0 <= index < dataset size.
  virtual int SourceOf(int64_t /*index*/) const { return 0; }
};

}  // namespace pinwheel

#endif  // PINWHEEL_LOADER_INDEX_SAMPLER_H_
