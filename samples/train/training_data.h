// The sample trainer's data: a directory holding train.pwr and heldout.pwr,
// record files with the fields x f32[...] and y i64[] (by default the
// synthetic dataset of synthetic_data.h, written on first use and reused).
//
// Example:
//   PINWHEEL_ASSIGN_OR_RETURN(
//       TrainingData data,
//       OpenTrainingData(/*data_flag=*/"", /*synthetic_records=*/100'000,
//                        /*report=*/true));
//   LoaderBuilder(data.train).batch_size(256).Build();
#ifndef PINWHEEL_SAMPLES_TRAIN_TRAINING_DATA_H_
#define PINWHEEL_SAMPLES_TRAIN_TRAINING_DATA_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

#include "loader/record_file.h"

// The synthetic dataset's directory (CMake sets it to the build tree's
// data/synthetic-v1); other sizes live beside it, in DIR-<records>.
#ifndef PINWHEEL_TRAIN_DEFAULT_DATA_DIR
#define PINWHEEL_TRAIN_DEFAULT_DATA_DIR "pinwheel-data/synthetic-v1"
#endif

namespace pinwheel::train {

// The opened data and the model shape it implies. A value; thread-compatible.
struct TrainingData {
  std::string dir;
  std::shared_ptr<RecordFileDataset> train;
  std::shared_ptr<RecordFileDataset> held_out;
  int64_t inputs = 0;   // elements of "x"
  int64_t classes = 0;  // 1 + the largest training label
};

// Opens `data_flag`/train.pwr and heldout.pwr, or, when `data_flag` is
// empty, the synthetic dataset of `synthetic_records` training records
// (written first when missing). Checks the fields (x f32[...], y i64[], the
// same in both files) and the labels (>= 0). `report`: print what was found
// (rank 0 only, under a launcher). InvalidArgument naming the file or the
// flag otherwise.
[[nodiscard]] absl::StatusOr<TrainingData> OpenTrainingData(
    const std::string& data_flag, int64_t synthetic_records, bool report);

}  // namespace pinwheel::train

#endif  // PINWHEEL_SAMPLES_TRAIN_TRAINING_DATA_H_
