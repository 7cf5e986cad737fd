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
#ifndef PINWHEEL_TRANSFER_BATCH_INFO_H_
#define PINWHEEL_TRANSFER_BATCH_INFO_H_

#include <cstdint>
#include <vector>

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

}  // namespace pinwheel

#endif  // PINWHEEL_TRANSFER_BATCH_INFO_H_
