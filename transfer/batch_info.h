// BatchInfo: a batch's identity (epoch, position, samples and their dataset
// indices), one record built once where the batch is first named (the
// producer's first stage) and moved along with it: the filled batch handed to
// the TransferStage, the lease a DeviceBatch holds, and DeviceBatch's
// accessors all read this same record, never a field-by-field copy.
//
// Example:
//   BatchInfo info{.epoch = 2, .index = 7, .samples = 3,
//                  .sample_indices = {41, 5, 19}};
//   stage->Submit({.info = std::move(info), .slot = slot.index});
//
// FilledBatch: what a producer submits to a TransferStage (a BatchInfo and
// its slot), or a marker in a batch's place.
#ifndef PINWHEEL_TRANSFER_BATCH_INFO_H_
#define PINWHEEL_TRANSFER_BATCH_INFO_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"

namespace pinwheel {

// Thread-compatible (a plain value).
struct BatchInfo {
  int64_t epoch = 0;
  // Position in the epoch's order (0-based); for a map-style dataset the
  // sampler's batch number, for an IterableDataset the delivery count.
  int64_t index = 0;
  // Samples in the batch: batch_size, or fewer for the last batch of an
  // epoch or when samples were skipped.
  int64_t samples = 0;
  // The dataset index of each sample, in batch order (-1 for samples of an
  // IterableDataset, which have none).
  std::vector<int64_t> sample_indices;
  // LoaderOptions::pad_last_batch: how many of the last `samples` are
  // padding (index -1, validity 0).
  int64_t padded = 0;
};

// What a producer submits to a TransferStage, the job of one
// BatchWriter::Write(): a filled slot (or, for a writer that reads none, no
// slot), or an error in its place, or the end of an epoch.
struct FilledBatch {
  enum class Kind { kBatch, kError, kEndOfEpoch };
  Kind kind = Kind::kBatch;
  // kBatch: the batch's identity, moved on into its DeviceBatch. kError: the
  // epoch and index of the batch that failed; kEndOfEpoch: the epoch that
  // ended and its batch count as index.
  BatchInfo info;
  // kBatch: the ring slot holding the batch, or -1 for a writer that makes
  // the batch from `info` alone (the loader's gather with its order on the
  // device).
  int slot = -1;
  absl::Status error;  // kError: why this batch could not be produced
};

}  // namespace pinwheel

#endif  // PINWHEEL_TRANSFER_BATCH_INFO_H_
