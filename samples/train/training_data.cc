#include "samples/train/training_data.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

#include "loader/record_file.h"
#include "pinning/base/status_macros.h"
#include "samples/train/synthetic_data.h"
#include "transfer/sample_layout.h"

namespace pinwheel::train {
namespace {

// Returns the index of field `name` after checking its dtype (and, for a
// scalar, its element count), or InvalidArgument naming the file.
absl::StatusOr<int> CheckedField(const RecordFileDataset& ds,
                                 const std::string& name, DType dtype,
                                 bool scalar) {
  const SampleLayout& layout = ds.layout();
  const int f = layout.FieldIndex(name);
  if (f < 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s has no field \"%s\" (its fields: %s); the trainer needs x f32[...] "
        "and y i64[]",
        ds.path(), name, layout.ToString()));
  }
  const FieldSpec& spec = layout.fields()[f];
  if (spec.dtype != dtype || (scalar && spec.elements() != 1)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: field %s; the trainer needs x f32[...] and y i64[]", ds.path(),
        spec.ToString()));
  }
  return f;
}

}  // namespace

absl::StatusOr<TrainingData> OpenTrainingData(const std::string& data_flag,
                                              int64_t synthetic_records,
                                              bool report) {
  TrainingData data;
  data.dir = data_flag.empty() ? PINWHEEL_TRAIN_DEFAULT_DATA_DIR : data_flag;
  if (data_flag.empty()) {
    SyntheticSpec spec;
    if (synthetic_records < 10) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "--synthetic_records=%d; must be >= 10", synthetic_records));
    }
    if (synthetic_records != spec.train_records) {
      spec.train_records = synthetic_records;
      spec.held_out_records = synthetic_records / 10;
      data.dir = absl::StrFormat("%s-%d", data.dir, synthetic_records);
    }
    const absl::Time start = absl::Now();
    PINWHEEL_ASSIGN_OR_RETURN(bool created,
                              EnsureSyntheticData(spec, data.dir));
    if (report && created) {
      absl::PrintF(
          "data: wrote the synthetic dataset to %s in %.1f s (reused "
          "on later runs)\n",
          data.dir, absl::ToDoubleSeconds(absl::Now() - start));
    } else if (report) {
      absl::PrintF("data: synthetic dataset in %s\n", data.dir);
    }
  } else if (report) {
    absl::PrintF("data: %s\n", data.dir);
  }
  PINWHEEL_ASSIGN_OR_RETURN(
      data.train, RecordFileDataset::Open(data.dir + "/" + kTrainFile));
  PINWHEEL_ASSIGN_OR_RETURN(
      data.held_out, RecordFileDataset::Open(data.dir + "/" + kHeldOutFile));
  PINWHEEL_ASSIGN_OR_RETURN(
      int x, CheckedField(*data.train, "x", DType::kFloat32, false));
  PINWHEEL_ASSIGN_OR_RETURN(
      int y, CheckedField(*data.train, "y", DType::kInt64, true));
  if (!(data.held_out->layout() == data.train->layout())) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s has fields {%s} but %s has {%s}; they must match",
        data.held_out->path(), data.held_out->layout().ToString(),
        data.train->path(), data.train->layout().ToString()));
  }
  const SampleLayout& layout = data.train->layout();
  data.inputs = layout.fields()[x].elements();
  // The number of classes: one more than the largest training label.
  size_t y_offset = 0;
  for (int f = 0; f < y; ++f) y_offset += layout.fields()[f].bytes();
  int64_t max_label = -1;
  for (int64_t i = 0; i < data.train->size(); ++i) {
    int64_t label;
    std::memcpy(&label, data.train->record(i).data() + y_offset, sizeof label);
    if (label < 0) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s: record %d has label %d; labels must be >= 0",
                          data.train->path(), i, label));
    }
    max_label = std::max(max_label, label);
  }
  data.classes = std::max<int64_t>(max_label + 1, 2);
  if (report) {
    absl::PrintF(
        "      train.pwr %d records, heldout.pwr %d records of {%s}, "
        "%d classes\n",
        data.train->size(), data.held_out->size(), layout.ToString(),
        data.classes);
  }
  return data;
}

}  // namespace pinwheel::train
