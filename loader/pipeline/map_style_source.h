// MapStyleSource: the batches of a map-style Dataset, in the order of this
// rank's BatchSampler (the whole epoch, or after a resume the rest of the
// checkpoint's epoch first). See BatchSource for the contract.
#ifndef PINWHEEL_LOADER_PIPELINE_MAP_STYLE_SOURCE_H_
#define PINWHEEL_LOADER_PIPELINE_MAP_STYLE_SOURCE_H_

#include <cstdint>
#include <memory>
#include <optional>

#include "absl/status/statusor.h"

#include "loader/dataset.h"
#include "loader/epoch_order.h"
#include "loader/loader_checkpoint.h"
#include "loader/loader_options.h"
#include "loader/pipeline/batch_source.h"
#include "loader/sampler.h"

namespace pinwheel::internal {

class MapStyleSource final : public BatchSource {
 public:
  // Returns the source, or InvalidArgument when no epoch can hold a batch.
  // `resume`, when not null, was checked by CheckResumable().
  static absl::StatusOr<std::unique_ptr<MapStyleSource>> Create(
      std::shared_ptr<const Dataset> dataset, const LoaderOptions& options,
      const LoaderCheckpoint* resume);

  int64_t batches_per_epoch() const override;
  bool in_order() const override { return in_order_; }
  bool reads_inline() const override { return true; }

  // Where `batch` stands in the loader's own order: its epoch's order as a
  // pure function (order::Deal) and the position of its first sample in
  // it, for a gather that computes the order on the device (Note [the
  // order on the device] in loader/gather/gather_plan.h). Thread-safe
  // against the producer side; not during ForgetResume().
  // REQUIRES: no custom sampler (only it knows its order).
  struct Position {
    order::Deal deal;
    int64_t first = 0;
  };
  Position PositionOf(const BatchInfo& batch) const;

  absl::Status StartEpoch(int64_t epoch, WorkerInit& worker_init) override;
  bool Claim(const StopFlag& stop, ProducedBatch& batch) override;
  void Interrupt() override {}
  void Unclaim(ProducedBatch&) override {}
  void Fill(BatchFiller& filler, ProducedBatch& batch) override;
  void PrepareDelivery(ProducedBatch&) override {}
  void EndEpoch() override {}

  void Delivered(const BatchInfo& batch) override;
  void EpochEnded() override { consumed_in_epoch_ = 0; }
  absl::Status Checkpoint(int64_t epoch, int64_t delivered,
                          LoaderCheckpoint& checkpoint) const override;
  void ForgetResume() override;

 private:
  // An epoch's order: this rank's share (world_size 1 included: the whole
  // order) from some position on, cut into batches.
  struct Order {
    BatchSampler batches;
    const DistributedSampler* share;  // batches' sampler
  };
  MapStyleSource(std::shared_ptr<const Dataset> dataset, bool in_order,
                 Order whole, std::optional<Order> resume,
                 std::shared_ptr<const IndexSampler> custom, uint64_t seed,
                 EpochSampling epoch_sampling,
                 std::optional<LoaderCheckpoint> resume_checkpoint);
  // A custom sampler's order: the batch's global positions (what the share
  // dealt) become the sampler's indices, each checked; a bad one or a throw
  // is the batch's status.
  void MapCustom(ProducedBatch& batch) const;
  // The order of `epoch`: the resumed epoch's from the checkpoint's
  // position, else a whole epoch's.
  const Order& OrderFor(int64_t epoch) const;
  // Whether `epoch` is the one the checkpoint resumes (resume_ and
  // resume_checkpoint_ are set and forgotten together).
  bool Resumes(int64_t epoch) const {
    return resume_checkpoint_.has_value() && resume_checkpoint_->epoch == epoch;
  }

  const std::shared_ptr<const Dataset> dataset_;
  const bool in_order_;
  // LoaderOptions::sampler, or null: the shares then deal global positions
  // (unshuffled) and MapCustom() turns them into indices.
  const std::shared_ptr<const IndexSampler> custom_;
  const uint64_t seed_;
  const Order whole_;
  // Resume (see Note [exact resume]): set at creation, forgotten by
  // ForgetResume() while the producer is stopped; read by both sides.
  std::optional<Order> resume_;
  // What Dataset::StartEpoch() is told (its epoch and resume set per
  // epoch), and the checkpoint it is told of on the resumed epoch.
  const EpochSampling epoch_sampling_;
  std::optional<LoaderCheckpoint> resume_checkpoint_;
  // Producer, first stage: the epoch being claimed and its next batch.
  int64_t epoch_ = 0;
  int64_t next_ = 0;
  // Consumer: positions of this rank's share of the epoch that delivered
  // batches cover.
  int64_t consumed_in_epoch_ = 0;
};

}  // namespace pinwheel::internal

#endif  // PINWHEEL_LOADER_PIPELINE_MAP_STYLE_SOURCE_H_
