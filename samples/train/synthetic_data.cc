#include "samples/train/synthetic_data.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <system_error>
#include <unistd.h>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_format.h"
#include "absl/types/span.h"

#include "loader/record_file.h"
#include "pinning/base/status_macros.h"
#include "samples/train/mlp.h"
#include "transfer/sample_layout.h"

namespace pinwheel::train {
namespace {

// Standard normal pairs by Box-Muller from SplitMix64.
class Gaussian {
 public:
  explicit Gaussian(uint64_t seed) : rng_(seed) {}
  double Next() {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    const double u1 = 1.0 - rng_.Uniform();  // (0, 1]
    const double u2 = rng_.Uniform();
    const double r = std::sqrt(-2.0 * std::log(u1));
    const double theta = 6.283185307179586 * u2;
    spare_ = r * std::sin(theta);
    has_spare_ = true;
    return r * std::cos(theta);
  }

 private:
  SplitMix64 rng_;
  double spare_ = 0;
  bool has_spare_ = false;
};

std::vector<float> ClusterCentres(const SyntheticSpec& spec) {
  const int64_t clusters = spec.classes * spec.clusters_per_class;
  std::vector<float> centres(clusters * spec.inputs);
  Gaussian g(spec.seed);
  for (float& v : centres) v = static_cast<float>(spec.separation * g.Next());
  return centres;
}

// Each record gets its own generator stream, so any range of records can be
// generated on its own (and in parallel) with the same result.
uint64_t RecordSeed(const SyntheticSpec& spec, bool held_out, int64_t index) {
  SplitMix64 mix(spec.seed ^ (held_out ? 0xD1B54A32D192ED03ull : 0) ^
                 (static_cast<uint64_t>(index) * 0x9E3779B97F4A7C15ull));
  return mix.Next();
}

absl::Status CheckFile(const std::string& path, const SampleLayout& layout,
                       int64_t count) {
  PINWHEEL_ASSIGN_OR_RETURN(std::shared_ptr<RecordFileDataset> ds,
                            RecordFileDataset::Open(path));
  if (!(ds->layout() == layout) || ds->size() != count) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "%s holds %d records of {%s}; expected %d of {%s}", path, ds->size(),
        ds->layout().ToString(), count, layout.ToString()));
  }
  return absl::OkStatus();
}

absl::Status WriteFile(const SyntheticSpec& spec, const SampleLayout& layout,
                       bool held_out, const std::string& path) {
  const std::string tmp = absl::StrFormat("%s.tmp-%d", path, getpid());
  const int64_t count = held_out ? spec.held_out_records : spec.train_records;
  {
    PINWHEEL_ASSIGN_OR_RETURN(RecordFileWriter writer,
                              RecordFileWriter::Create(tmp, layout));
    constexpr int64_t kChunk = 4096;
    std::vector<float> x;
    std::vector<int64_t> y;
    for (int64_t first = 0; first < count; first += kChunk) {
      const int64_t n = std::min(kChunk, count - first);
      GenerateSyntheticRecords(spec, held_out, first, n, x, y);
      for (int64_t i = 0; i < n; ++i) {
        const auto* xb =
            reinterpret_cast<const std::byte*>(x.data() + i * spec.inputs);
        const auto* yb = reinterpret_cast<const std::byte*>(y.data() + i);
        PINWHEEL_RETURN_IF_ERROR(
            writer.Append({absl::MakeConstSpan(xb, spec.inputs * sizeof(float)),
                           absl::MakeConstSpan(yb, sizeof(int64_t))}));
      }
    }
    PINWHEEL_RETURN_IF_ERROR(writer.Close());
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::filesystem::remove(tmp, ec);
    return absl::InternalError(
        absl::StrFormat("renaming %s to %s: %s", tmp, path, ec.message()));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<SampleLayout> SyntheticLayout(const SyntheticSpec& spec) {
  return SampleLayout::Create(
      {{.name = "x", .dtype = DType::kFloat32, .shape = {spec.inputs}},
       {.name = "y", .dtype = DType::kInt64, .shape = {}}});
}

void GenerateSyntheticRecords(const SyntheticSpec& spec, bool held_out,
                              int64_t first, int64_t count,
                              std::vector<float>& x, std::vector<int64_t>& y) {
  static_assert(sizeof(float) == 4);
  const std::vector<float> centres = ClusterCentres(spec);
  const int64_t clusters = spec.classes * spec.clusters_per_class;
  x.resize(count * spec.inputs);
  y.resize(count);
  for (int64_t i = 0; i < count; ++i) {
    Gaussian g(RecordSeed(spec, held_out, first + i));
    SplitMix64 pick(RecordSeed(spec, held_out, first + i) + 1);
    const int64_t cluster =
        static_cast<int64_t>(pick.Next() % static_cast<uint64_t>(clusters));
    y[i] = cluster % spec.classes;
    const float* centre = centres.data() + cluster * spec.inputs;
    float* row = x.data() + i * spec.inputs;
    for (int64_t d = 0; d < spec.inputs; ++d) {
      row[d] = centre[d] + static_cast<float>(g.Next());
    }
  }
}

absl::StatusOr<bool> EnsureSyntheticData(const SyntheticSpec& spec,
                                         const std::string& dir) {
  PINWHEEL_ASSIGN_OR_RETURN(SampleLayout layout, SyntheticLayout(spec));
  const std::string train = dir + "/" + kTrainFile;
  const std::string held_out = dir + "/" + kHeldOutFile;
  if (CheckFile(train, layout, spec.train_records).ok() &&
      CheckFile(held_out, layout, spec.held_out_records).ok()) {
    return false;
  }
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    return absl::InternalError(
        absl::StrFormat("creating directory %s: %s", dir, ec.message()));
  }
  PINWHEEL_RETURN_IF_ERROR(WriteFile(spec, layout, false, train));
  PINWHEEL_RETURN_IF_ERROR(WriteFile(spec, layout, true, held_out));
  PINWHEEL_RETURN_IF_ERROR(CheckFile(train, layout, spec.train_records));
  PINWHEEL_RETURN_IF_ERROR(CheckFile(held_out, layout, spec.held_out_records));
  return true;
}

}  // namespace pinwheel::train
