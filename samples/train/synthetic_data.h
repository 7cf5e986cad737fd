// The trainer's default dataset: a learnable synthetic classification
// problem (Gaussian clusters in `inputs` dimensions, several clusters per
// class), written once as two record files and reused afterwards.
//
// Example:
//   PINWHEEL_ASSIGN_OR_RETURN(bool created,
//                             EnsureSyntheticData(SyntheticSpec(), dir));
//   // dir/train.pwr and dir/heldout.pwr now open as RecordFileDatasets.
#ifndef PINWHEEL_SAMPLES_TRAIN_SYNTHETIC_DATA_H_
#define PINWHEEL_SAMPLES_TRAIN_SYNTHETIC_DATA_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

#include "transfer/sample_layout.h"

namespace pinwheel::train {

// The file names inside a data directory.
inline constexpr char kTrainFile[] = "train.pwr";
inline constexpr char kHeldOutFile[] = "heldout.pwr";

struct SyntheticSpec {
  int64_t inputs = 256;            // features per sample ("x" is f32[inputs])
  int64_t classes = 10;            // labels 0..classes-1 ("y" is i64[])
  int64_t clusters_per_class = 4;  // Gaussian blobs per class
  // Cluster centres are drawn from N(0, separation² I); samples add
  // N(0, I) noise. Centres of two clusters lie about
  // separation·sqrt(2·inputs) apart.
  double separation = 0.3;
  int64_t train_records = 100'000;
  int64_t held_out_records = 10'000;
  uint64_t seed = 0x70696E776865656Cull;  // "pinwheel": fixes the data
};

// Returns the record layout: x f32[inputs], y i64[].
absl::StatusOr<SampleLayout> SyntheticLayout(const SyntheticSpec& spec);

// Fills `x` ([count, inputs]) and `y` ([count]) with records `first` ..
// first+count-1 of the split (held_out or not). Deterministic: the same
// spec gives the same bytes on every platform up to libm rounding.
void GenerateSyntheticRecords(const SyntheticSpec& spec, bool held_out,
                              int64_t first, int64_t count,
                              std::vector<float>& x, std::vector<int64_t>& y);

// Makes sure `dir` holds the spec's train and held-out files: reuses them
// when both open with the expected layout and record count, else (missing,
// corrupt, or from another spec) writes them afresh, each to a temporary
// name renamed into place. Returns whether it wrote them.
[[nodiscard]] absl::StatusOr<bool> EnsureSyntheticData(
    const SyntheticSpec& spec, const std::string& dir);

}  // namespace pinwheel::train

#endif  // PINWHEEL_SAMPLES_TRAIN_SYNTHETIC_DATA_H_
