// LoaderCheckpoint: where a loader stands in its data order, as a few dozen
// versioned, checksummed bytes (no index lists). Loader::Checkpoint() takes
// one between Next() calls; LoaderBuilder::resume() continues from it.
//
// Example:
//   // after the training step that used the last batch:
//   PINWHEEL_ASSIGN_OR_RETURN(LoaderCheckpoint checkpoint,
//                             loader.Checkpoint());
//   WriteFile(path, checkpoint.ToBytes());
//   ...
//   PINWHEEL_ASSIGN_OR_RETURN(LoaderCheckpoint checkpoint,
//                             LoaderCheckpoint::FromBytes(ReadFile(path)));
//   PINWHEEL_ASSIGN_OR_RETURN(Loader loader,
//       LoaderBuilder(dataset).batch_size(256).shuffle(7)
//           .distributed(rank, new_world_size).resume(checkpoint).Build());
//
// Note [exact resume]
// Map-style datasets. An epoch's global order is G_e(p), p in [0, N): the
// seeded EpochShuffle (or the identity without shuffle). A rank's share of
// an epoch is described by (start g, world W, rank r): the positions
// g..N-1 dealt round-robin (DistributedSampler). The consumer counts the
// positions of its share that the batches Next() delivered cover (samples
// skipped by ErrorPolicy::kSkipSample count as covered), c; the checkpoint
// records (epoch, position = min(g + c * W, N)): every global position
// before it has been delivered by some rank, none after it, PROVIDED that
// every rank of the job delivered the same number of batches when its
// checkpoint was taken (as data-parallel training does: one batch per rank
// per step). Every rank's checkpoint then holds the same epoch and position
// and differs only in the informational rank; any one of them resumes the
// whole job. Batches read ahead (prefetched, or copied to the device) but
// not delivered are read again after resume: none lost, none duplicated.
// Resuming with world size W' deals positions position..N-1 over the W'
// ranks (every remaining sample exactly once when W' divides their count;
// otherwise padded by wrapping to the start of the epoch, or cut with
// drop_uneven_tail, as any epoch); later epochs start at 0 over W'. With the
// same W (and batch size) the batches equal, bit for bit, those the
// uninterrupted loader would have delivered, whatever num_workers, prefetch,
// device_buffers or device. Needs in_order (Checkpoint() otherwise returns
// FailedPrecondition: an out-of-order delivery leaves holes behind the last
// delivered batch). In the resumed epoch DeviceBatch::index() counts from 0
// again and the epoch has fewer batches than batches_per_epoch(); a
// StartEpoch() that restarts an epoch drops the resume point (one naming
// the resumed epoch before the first Next() is a no-op and keeps it).
//
// Iterable datasets. The checkpoint holds the epoch, the batches delivered
// in it, and each of this rank's shards' SampleStream::SaveState() taken
// after the last batch of that shard that Next() delivered (shards with none
// restart from their beginning), and which of this rank's shards delivers
// the next batch. Resume reopens each shard and restores it, so every shard
// continues exactly after its last delivered sample, and takes the batches
// from the shards in the same turn as the uninterrupted epoch: the batches
// are the same, in the same order (a version 1 checkpoint holds no turn: its
// resume starts the turn at the rank's first shard, so the interleaving of
// shards may differ). Needs the same world size, rank and number of shards
// (max(1, num_workers) per rank); streams without the hooks make
// Checkpoint() return FailedPrecondition.
//
// Format (version 2; map-style checkpoints are written as version 1, whose
// layout is the same), little-endian:
//   0  char[8] magic "PWLDCKPT"
//   8  u32     version (1)
//  12  u32     body bytes (B)
//  16  body:   u8 kind (0 map-style, 1 iterable), u8 flags (bit 0 shuffle,
//              bit 1 drop_last, bit 2 drop_uneven_tail, bit 3 custom
//              order: LoaderOptions::sampler), u16 zero,
//              u32 world_size, u32 rank, i64 dataset_size (-1 iterable),
//              u64 seed, i64 batch_size, i64 epoch, i64 position;
//              iterable only: u32 num_shards (over all ranks), u32 shards
//              (this rank's), then per shard u8 has_state, u32 length,
//              length bytes; from version 2, u32 next_shard (< shards)
//  16+B u32    CRC-32C (Castagnoli) of bytes 0 .. 16+B-1
#ifndef PINWHEEL_LOADER_LOADER_CHECKPOINT_H_
#define PINWHEEL_LOADER_LOADER_CHECKPOINT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

#include "loader/loader_options.h"

namespace pinwheel {

// A value; thread-compatible.
struct LoaderCheckpoint {
  // The newest version this pinwheel reads and writes (Note [exact
  // resume]: version 1 is still read, and written for map-style).
  static constexpr uint32_t kVersion = 2;
  // The most shards (over all ranks) an iterable checkpoint holds: its u32
  // field is read back as an int (and OpenShard() takes an int).
  static constexpr int64_t kMaxNumShards = 0x7fffffff;
  enum class Kind : uint8_t { kMapStyle = 0, kIterable = 1 };

  Kind kind = Kind::kMapStyle;
  // The order: must match on resume (else InvalidArgument naming the field).
  // Map-style: the epoch's positions (the dataset size, or with a custom
  // sampler its size()); -1 for iterable datasets.
  int64_t dataset_size = 0;
  bool shuffle = false;
  // The order is a custom sampler's (LoaderOptions::sampler), seeded with
  // `seed`; the sampler itself is not recorded: resume with the same one.
  bool custom_order = false;
  uint64_t seed = 0;
  // Informational for map-style (resume may change them: the rest of the
  // epoch is cut by the new ones).
  int64_t batch_size = 1;
  bool drop_last = false;
  bool drop_uneven_tail = false;
  int world_size = 1;
  int rank = 0;
  // Where the consumer stands: the epoch Next() reads from, and the global
  // position of its next undelivered sample (map-style) or the batches
  // delivered in the epoch (iterable).
  int64_t epoch = 0;
  int64_t position = 0;
  // Iterable only: shards over all ranks, and this rank's shards' states
  // (nullopt: the shard delivered nothing this epoch).
  int num_shards = 0;
  std::vector<std::optional<std::string>> shard_states;
  // Iterable only: which of this rank's shards (an index into shard_states)
  // delivers the epoch's next batch, its turn permitting (a shard found
  // exhausted passes it to the next). 0 from a version 1 checkpoint.
  int next_shard = 0;

  // Returns the bytes of the format above.
  std::string ToBytes() const;
  // Parses bytes from ToBytes(). Errors name what is wrong: DataLoss for
  // truncated or corrupted bytes (length, checksum), InvalidArgument for a
  // foreign magic, a newer or unknown version, or a field out of range.
  [[nodiscard]] static absl::StatusOr<LoaderCheckpoint> FromBytes(
      absl::string_view bytes);

  friend bool operator==(const LoaderCheckpoint&,
                         const LoaderCheckpoint&) = default;
};

// Returns OK if a loader with `options` over a map-style dataset of
// `dataset_size` samples (or an iterable one: dataset_size < 0) can resume
// from `checkpoint`, else InvalidArgument naming the field, the
// checkpoint's value and the loader's.
[[nodiscard]] absl::Status CheckResumable(const LoaderCheckpoint& checkpoint,
                                          const LoaderOptions& options,
                                          int64_t dataset_size);

}  // namespace pinwheel

#endif  // PINWHEEL_LOADER_LOADER_CHECKPOINT_H_
