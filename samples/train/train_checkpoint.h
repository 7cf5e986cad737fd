// The sample trainer's checkpoint: everything a killed job needs to continue
// with exactly the steps an uninterrupted one would have taken (issue 10).
// One file, CHECKPOINT_DIR/train.ckpt, replaced atomically by the library's
// WriteFileAtomically() (loader/atomic_file.h): written to a temporary file
// of its own beside it (train.ckpt.tmp-<pid>-<n>, created exclusively, never
// through a link), fsync'ed, renamed over the old one, the directory
// fsync'ed. A crash at any instant leaves the old file or the new one whole
// (and perhaps a stale temporary file, which is never reused).
//
// What it holds: the model shape, the seed and batch size it was trained
// with (and the SGD options), the trainer's counters (the epoch being trained,
// 1-based, and the steps taken in all), the training loader's LoaderCheckpoint
// bytes, the parameters and the SGD momentum. There is no other random state:
// the initial weights come from the seed once, and each epoch's shuffle is a
// function of (seed, epoch) (loader/sampler.h).
//
// Format (version 1), little-endian:
//   0   char[8] magic "PWTRCKPT"
//   8   u32     version (1)
//   12  u32     zero
//   16  u64     body bytes (B)
//   24  body:   i64 inputs, i64 hidden, i64 classes, u64 seed,
//               i64 batch_size, i32 world_size, u32 zero,
//               f32 learning_rate, f32 momentum, i64 epoch,
//               i64 step, i64 batches_in_epoch, u32 loader bytes (L),
//               L bytes (LoaderCheckpoint::ToBytes), u64 parameter count (P),
//               P f32 parameters, P f32 momentum
//   24+B u32    CRC-32C (Castagnoli) of bytes 0 .. 24+B-1
#ifndef PINWHEEL_SAMPLES_TRAIN_TRAIN_CHECKPOINT_H_
#define PINWHEEL_SAMPLES_TRAIN_TRAIN_CHECKPOINT_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

#include "loader/loader_checkpoint.h"
#include "samples/train/mlp.h"

namespace pinwheel::train {

inline constexpr char kCheckpointFile[] = "train.ckpt";

// A value; thread-compatible.
struct TrainCheckpoint {
  static constexpr uint32_t kVersion = 1;

  MlpShape shape;
  uint64_t seed = 0;
  int64_t batch_size = 0;  // per rank, when written
  int world_size = 1;      // when written (resume may change it)
  SgdOptions sgd;
  int64_t epoch = 1;             // the epoch being trained (1-based); past the
                                 // last one when the job had finished
  int64_t step = 0;              // training steps taken in all epochs
  int64_t batches_in_epoch = 0;  // steps taken in `epoch` (informational)
  LoaderCheckpoint loader;       // the training loader's
  MlpState model;

  // Returns the bytes of the format above.
  std::string ToBytes() const;
  // Parses bytes from ToBytes(). DataLoss for truncated or corrupted bytes
  // (length, checksum), InvalidArgument for a foreign magic, an unknown
  // version or a field out of range; each names the offset or the field.
  [[nodiscard]] static absl::StatusOr<TrainCheckpoint> FromBytes(
      absl::string_view bytes);
};

// Reads and parses DIR/train.ckpt. NotFound naming the file when there is
// none; otherwise FromBytes' error prefixed with the file's path.
[[nodiscard]] absl::StatusOr<TrainCheckpoint> ReadTrainCheckpoint(
    const std::string& dir);

// Returns DIR/train.ckpt (ReadTrainCheckpoint) after checking that it fits
// the run about to resume from it: the same model shape, seed and SGD
// options, and the loader's epoch matching the trainer's.
// InvalidArgument naming the file and what differs otherwise.
[[nodiscard]] absl::StatusOr<TrainCheckpoint> ReadCheckpointToResume(
    const std::string& dir, const MlpShape& shape, uint64_t seed,
    const SgdOptions& sgd);

}  // namespace pinwheel::train

#endif  // PINWHEEL_SAMPLES_TRAIN_TRAIN_CHECKPOINT_H_
