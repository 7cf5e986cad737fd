#include "loader/pipeline/map_style_source.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

#include "loader/pipeline/batch_filler.h"
#include "loader/pipeline/user_code.h"
#include "pinning/base/status_macros.h"

namespace pinwheel::internal {

absl::StatusOr<std::unique_ptr<MapStyleSource>> MapStyleSource::Create(
    std::shared_ptr<const Dataset> dataset, const LoaderOptions& options,
    const LoaderCheckpoint* resume) {
  // With a custom sampler the shares deal the sampler's global positions
  // (see loader/index_sampler.h); MapCustom() maps them to indices.
  const bool custom = options.sampler != nullptr;
  const int64_t order_size = custom ? options.sampler->size() : dataset->size();
  auto make_order = [&](int64_t start) -> absl::StatusOr<Order> {
    PINWHEEL_ASSIGN_OR_RETURN(
        std::unique_ptr<DistributedSampler> share,
        DistributedSampler::Create(order_size, options.rank, options.world_size,
                                   options.shuffle && !custom, options.seed,
                                   options.drop_uneven_tail, start));
    const DistributedSampler* borrowed = share.get();
    PINWHEEL_ASSIGN_OR_RETURN(
        BatchSampler batches,
        BatchSampler::Create(std::move(share), options.batch_size,
                             options.drop_last));
    return Order{std::move(batches), borrowed};
  };
  PINWHEEL_ASSIGN_OR_RETURN(Order whole, make_order(0));
  if (whole.batches.batches_per_epoch() == 0) {
    // The producer would run through empty epochs: see Note [at most two
    // epochs ahead] in producer.cc; an epoch that can never hold a batch is
    // a mistake.
    return absl::InvalidArgumentError(absl::StrCat(
        "LoaderBuilder: no epoch can hold a batch: ",
        custom ? "sampler size " : "dataset size ", order_size, ", rank ",
        options.rank, " of world_size ", options.world_size,
        " (drop_uneven_tail = ", options.drop_uneven_tail ? "true" : "false",
        "), batch_size = ", options.batch_size,
        ", drop_last = ", options.drop_last ? "true" : "false",
        ": an epoch must have at least one batch"));
  }
  std::optional<Order> rest;
  if (resume != nullptr) {
    PINWHEEL_ASSIGN_OR_RETURN(Order order, make_order(resume->position));
    rest.emplace(std::move(order));
  }
  const EpochSampling epoch_sampling{.rank = options.rank,
                                     .world_size = options.world_size,
                                     .default_sampler = !custom,
                                     .shuffle = options.shuffle,
                                     .seed = options.seed,
                                     .drop_tail = options.drop_uneven_tail,
                                     .batch_size = options.batch_size};
  std::optional<LoaderCheckpoint> resume_checkpoint;
  if (resume != nullptr) resume_checkpoint = *resume;
  return std::unique_ptr<MapStyleSource>(
      new MapStyleSource(std::move(dataset), options.in_order, std::move(whole),
                         std::move(rest), options.sampler, options.seed,
                         epoch_sampling, std::move(resume_checkpoint)));
}

MapStyleSource::MapStyleSource(
    std::shared_ptr<const Dataset> dataset, bool in_order, Order whole,
    std::optional<Order> resume, std::shared_ptr<const IndexSampler> custom,
    uint64_t seed, EpochSampling epoch_sampling,
    std::optional<LoaderCheckpoint> resume_checkpoint)
    : dataset_(std::move(dataset)),
      in_order_(in_order),
      custom_(std::move(custom)),
      seed_(seed),
      whole_(std::move(whole)),
      resume_(std::move(resume)),
      epoch_sampling_(epoch_sampling),
      resume_checkpoint_(std::move(resume_checkpoint)) {}

int64_t MapStyleSource::batches_per_epoch() const {
  return whole_.batches.batches_per_epoch();
}

const MapStyleSource::Order& MapStyleSource::OrderFor(int64_t epoch) const {
  return Resumes(epoch) ? *resume_ : whole_;
}

absl::Status MapStyleSource::StartEpoch(int64_t epoch, WorkerInit&) {
  EpochSampling sampling = epoch_sampling_;
  sampling.epoch = epoch;
  if (Resumes(epoch)) {
    sampling.resume = &*resume_checkpoint_;
  }
  absl::Status started = CallUser(
      "Dataset::StartEpoch", [&] { return dataset_->StartEpoch(sampling); });
  if (!started.ok()) {
    return absl::Status(started.code(),
                        absl::StrCat("starting epoch ", epoch,
                                     " of the dataset: ", started.message()));
  }
  epoch_ = epoch;
  next_ = 0;
  return absl::OkStatus();
}

bool MapStyleSource::Claim(const StopFlag& stop, ProducedBatch& batch) {
  // One batch's indices at a time: the order is computed per position, in
  // O(1) memory whatever the dataset's size.
  const BatchSampler& batches = OrderFor(epoch_).batches;
  if (stop.stopping() || next_ >= batches.batches_per_epoch()) return false;
  batch.info.epoch = epoch_;
  batch.info.index = next_;
  batches.Batch(epoch_, next_++, &batch.info.sample_indices);
  if (custom_ != nullptr) MapCustom(batch);
  return true;
}

void MapStyleSource::MapCustom(ProducedBatch& batch) const {
  std::vector<int64_t>& indices = batch.info.sample_indices;
  const int64_t size = dataset_->size();
  for (int64_t& slot : indices) {
    const int64_t position = slot;  // the global position the share dealt
    absl::Status status;
    int64_t index = -1;
    try {
      index = custom_->At(seed_, batch.info.epoch, position);
    } catch (...) {
      status = Thrown("IndexSampler::At");
    }
    if (status.ok() && (index < 0 || index >= size)) {
      status = absl::InvalidArgumentError(
          absl::StrCat("returned index ", index,
                       "; it must be in [0, dataset size) = [0, ", size, ")"));
    }
    if (!status.ok()) {
      batch.status = absl::Status(
          status.code(),
          absl::StrCat("custom sampler at global position ", position,
                       " of epoch ", batch.info.epoch, " (batch ",
                       batch.info.index, "): ", status.message()));
      return;
    }
    slot = index;
  }
}

void MapStyleSource::Fill(BatchFiller& filler, ProducedBatch& batch) {
  if (!batch.status.ok()) return;  // MapCustom() refused it
  filler.FillIndexed(*dataset_, batch);
}

MapStyleSource::Position MapStyleSource::PositionOf(
    const BatchInfo& batch) const {
  const Order& order = OrderFor(batch.epoch);
  return {.deal = order.share->DealFor(batch.epoch),
          .first = order.batches.PositionsIn(batch.index)};
}

void MapStyleSource::Delivered(const BatchInfo& batch) {
  consumed_in_epoch_ =
      OrderFor(batch.epoch).batches.PositionsIn(batch.index + 1);
}

absl::Status MapStyleSource::Checkpoint(int64_t epoch, int64_t,
                                        LoaderCheckpoint& checkpoint) const {
  if (!in_order_) {
    return absl::FailedPreconditionError(
        "Checkpoint(): the loader delivers out of order (in_order = false), "
        "so the batches delivered are not a prefix of the epoch's order; "
        "build it with in_order(true) to checkpoint");
  }
  checkpoint.kind = LoaderCheckpoint::Kind::kMapStyle;
  checkpoint.dataset_size =
      custom_ != nullptr ? custom_->size() : dataset_->size();
  checkpoint.position =
      OrderFor(epoch).share->GlobalPosition(consumed_in_epoch_);
  return absl::OkStatus();
}

void MapStyleSource::ForgetResume() {
  resume_.reset();
  resume_checkpoint_.reset();
  consumed_in_epoch_ = 0;
}

}  // namespace pinwheel::internal
