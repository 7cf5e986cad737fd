// BatchSource: where the Producer's one pipeline gets its batches from, and
// what differs between a map-style Dataset (MapStyleSource: a batch
// sampler's order) and an IterableDataset (ShardSource: this rank's shards,
// round-robin). The Producer runs the same three stages over either (see
// Note [the producer pipeline] in producer.cc); a source says which batch
// comes next, fills it, and keeps what the consumer's side needs for
// checkpoints.
//
// Thread-safety, per method group below: the producer side runs on the
// producer's thread and its arena (Claim in the serial first stage, Fill in
// the parallel stage, PrepareDelivery in the serial last stage; Interrupt
// from any thread); the consumer
// side on the one consumer thread; ForgetResume only while the producer is
// stopped.
#ifndef PINWHEEL_LOADER_PIPELINE_BATCH_SOURCE_H_
#define PINWHEEL_LOADER_PIPELINE_BATCH_SOURCE_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include "loader/loader_checkpoint.h"
#include "loader/pipeline/stop_flag.h"
#include "pinning/pinned_ring.h"
#include "transfer/batch_info.h"

namespace pinwheel::internal {

// A batch travelling through the producer pipeline. Its BatchInfo is built
// in the first stage (Claim) and moved on to the TransferStage.
class BatchFiller;
class WorkerInit;

struct ProducedBatch {
  BatchInfo info;
  PinnedRing::Slot slot;
  int shard = -1;  // ShardSource: the shard it reads from
  // ShardSource: the shard's SaveState() after this batch (see Note [exact
  // resume] in loader/loader_checkpoint.h).
  absl::StatusOr<std::string> stream_state;
  absl::Status status;  // why it could not be read (delivered as an error)
  // Left half-read because the loader is stopping: never delivered.
  bool abandoned = false;
};

class BatchSource {
 public:
  virtual ~BatchSource() = default;

  // Returns the number of batches in an epoch, or -1 when the source cannot
  // know (an IterableDataset).
  virtual int64_t batches_per_epoch() const = 0;
  // Returns whether batches must be delivered in the order claimed (a
  // source may allow LoaderOptions::in_order = false).
  virtual bool in_order() const = 0;
  // Returns whether num_workers == 0 may read batches on the consumer's
  // thread, one at a time (a map-style dataset; shards need a worker).
  virtual bool reads_inline() const = 0;

  // Producer side.
  // Prepares `epoch` on the producer's thread inside the arena (opening
  // shards, after running worker_init there). An error stops the loader
  // and is delivered in the epoch's place.
  virtual absl::Status StartEpoch(int64_t epoch, WorkerInit& worker_init) = 0;
  // Names the epoch's next batch in `batch` (its BatchInfo, and its shard).
  // Returns false when the epoch has no batch left or `stop` is set (a
  // Claim() waiting for its turn returns once Interrupt() follows the flag).
  virtual bool Claim(const StopFlag& stop, ProducedBatch& batch) = 0;
  // Wakes a Claim() waiting for its turn; call after setting the stop flag.
  virtual void Interrupt() = 0;
  // Gives back what Claim() took, for a batch that will not be filled (no
  // slot could be had, or the loader is stopping).
  virtual void Unclaim(ProducedBatch& batch) = 0;
  // Writes the batch's samples into its slot through `filler`; sets
  // batch.status or batch.abandoned instead where it could not. Finishes
  // the claim.
  virtual void Fill(BatchFiller& filler, ProducedBatch& batch) = 0;
  // In delivery order, just before a read batch is delivered (a source may
  // renumber it or note its state for checkpoints).
  virtual void PrepareDelivery(ProducedBatch& batch) = 0;
  // Ends the epoch StartEpoch() prepared (closing shards).
  virtual void EndEpoch() = 0;

  // Consumer side.
  // The consumer received `batch`.
  virtual void Delivered(const BatchInfo& batch) = 0;
  // The consumer reached the end of an epoch.
  virtual void EpochEnded() = 0;
  // Fills the source's part of a checkpoint taken at `epoch`, after
  // `delivered` batches of it (kind, dataset_size, position, shards).
  virtual absl::Status Checkpoint(int64_t epoch, int64_t delivered,
                                  LoaderCheckpoint& checkpoint) const = 0;
  // From now on every epoch starts at its first batch: the checkpoint's
  // position is spent (StartEpoch()). REQUIRES: the producer is stopped.
  virtual void ForgetResume() = 0;
};

}  // namespace pinwheel::internal

#endif  // PINWHEEL_LOADER_PIPELINE_BATCH_SOURCE_H_
