// MixtureDataset: K map-style datasets of one layout read as one, in a
// weighted mixture. The dataset is their concatenation (source k's index i
// is offsets()[k] + i); its order(), an IndexSampler for
// LoaderBuilder::sampler(), mixes the sources by weight, so that exact and
// elastic resume keep working with the 72-byte checkpoint: the index at
// every position is a pure function of (seed, epoch, position).
//
// Example (two token corpora, 70/30):
//   PINWHEEL_ASSIGN_OR_RETURN(std::shared_ptr<MixtureDataset> mix,
//       MixtureDataset::Create({web, code}, {.weights = {0.7, 0.3}}));
//   LoaderBuilder(mix).sampler(mix->order(), /*seed=*/7).batch_size(32)
//   ... loader.stats().samples_per_source: {web's count, code's count}
//
// Note [stratified mixing]
// An epoch of the mixture has samples_per_epoch global positions, cut into
// windows of `window` positions (the last one may be shorter). The weights
// are apportioned to integer quotas q_k summing to `window` (largest
// remainders: |q_k - window * w_k| < 1), so every whole window holds exactly
// q_k samples of source k. Inside a window the slots are ordered by
// earliest deadline (source k's j-th slot aims at (j + 1/2) * window / q_k),
// which spreads each source evenly; kRandom instead permutes the window's
// slots with a keyed EpochShuffle per (seed, epoch, window): random order,
// the same exact quotas. A short last window takes the first slots of the
// table (permuted among themselves in kRandom).
// Each slot is source k's r-th of its window, so the j-th draw of source k
// over the whole run is j = (draws in earlier epochs) + window_number * q_k
// + r: O(1) per position, and the draws of each source in a window are
// consecutive numbers in any order. kSourceEpochs turns j into source epoch
// j / size_k at position j mod size_k of that epoch's permutation: every
// sample of a source is read once before any is read again, and the source
// restarts (reshuffled) when exhausted, independently of the mixture's
// epochs. (In kRandom the draws of a window come in permuted order, so a
// window that straddles two of a source's epochs may mix the end of one with
// the start of the next; at every window's end the draws so far are still
// exactly 0..j.) kWithReplacement draws uniformly from the source per j.
// A schedule changes the weights from a given epoch, or window-aligned
// global sample, on; the draws of earlier phases are summed once at
// creation (O(log phases) per position to find the phase).
// To have every N steps of W ranks with batch B hold each source's share,
// use window = N * B * W (positions are global; a resume on another world
// size keeps the windows).
#ifndef PINWHEEL_LOADER_MIXTURE_DATASET_H_
#define PINWHEEL_LOADER_MIXTURE_DATASET_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include "loader/dataset.h"
#include "loader/index_sampler.h"
#include "transfer/sample_layout.h"

namespace pinwheel {

struct MixtureOptions {
  // One weight per source: finite (however large: {1e308, 1e308} is half
  // and half), >= 0, not all 0 (normalised here).
  std::vector<double> weights;
  // From epoch `first_epoch` on, or (when first_sample >= 0) from global
  // sample first_sample = epoch * samples_per_epoch + position (a step
  // schedule: step s of a global batch G starts at sample s * G; its
  // position in the epoch must be a multiple of `window`), `weights`
  // replace the earlier ones; same rules as `weights`. Phases start after
  // sample 0, in increasing order.
  struct Phase {
    int64_t first_epoch = 1;
    std::vector<double> weights;
    int64_t first_sample = -1;
  };
  std::vector<Phase> schedule;
  // Positions in one epoch of the mixture; -1: the sum of the sources'
  // sizes. >= 1.
  int64_t samples_per_epoch = -1;
  // Positions per window, whose shares are exact (Note [stratified
  // mixing]). 1..2^24.
  int64_t window = 1024;
  enum class Interleave {
    kStratified,  // slots spread evenly, the same order every window
    kRandom,      // each window's slots in a seeded random order
  };
  Interleave interleave = Interleave::kStratified;
  enum class Draw {
    kSourceEpochs,     // each source read through, then restarted
    kWithReplacement,  // each draw uniform over the source
  };
  Draw draw = Draw::kSourceEpochs;
  // kSourceEpochs: each source epoch is a new permutation (else 0, 1, ...).
  bool shuffle_sources = true;
};

// Immutable and thread-safe (Read() calls the sources' Read()).
class MixtureDataset final : public Dataset {
 public:
  // Returns the mixture, or InvalidArgument naming what is wrong: no
  // source, a null source, a source whose layout differs from source 0's
  // (naming the source and the field), a weight count other than the
  // source count, a bad weight (naming the source), a source with weight
  // > 0 and no samples, a bad schedule, samples_per_epoch or window.
  [[nodiscard]] static absl::StatusOr<std::shared_ptr<MixtureDataset>> Create(
      std::vector<std::shared_ptr<const Dataset>> sources,
      MixtureOptions options);

  int64_t size() const override { return offsets_.back(); }
  const SampleLayout& layout() const override { return sources_[0]->layout(); }
  // Reads source k's sample offsets()[k] - index (k found by binary search).
  absl::Status Read(int64_t index, SampleView& out) const override;

  // Returns the mixed order, for LoaderBuilder::sampler(); it names the
  // sources for LoaderStats::samples_per_source.
  std::shared_ptr<const IndexSampler> order() const { return order_; }
  // Returns the first index of each source, and the total last (K + 1).
  const std::vector<int64_t>& offsets() const { return offsets_; }
  // Returns the source of concatenated index `index`.
  // REQUIRES: 0 <= index < size().
  int SourceOf(int64_t index) const;
  // Returns source k's integer quota per window at `position` of `epoch`.
  std::vector<int64_t> Quotas(int64_t epoch, int64_t position = 0) const;

 private:
  MixtureDataset() = default;

  std::vector<std::shared_ptr<const Dataset>> sources_;
  std::vector<int64_t> offsets_;
  std::shared_ptr<const IndexSampler> order_;
};

}  // namespace pinwheel

#endif  // PINWHEEL_LOADER_MIXTURE_DATASET_H_
