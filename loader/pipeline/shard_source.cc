#include "loader/pipeline/shard_source.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

#include "loader/internal/random.h"
#include "loader/pipeline/batch_filler.h"
#include "loader/pipeline/user_code.h"
#include "pinning/base/mutex.h"
#include "pinning/base/status_macros.h"

namespace pinwheel::internal {

ShardSource::ShardSource(std::shared_ptr<const IterableDataset> dataset,
                         const LoaderOptions& options,
                         const LoaderCheckpoint* resume)
    : dataset_(std::move(dataset)),
      per_rank_(std::max(1, options.num_workers)),
      rank_(options.rank),
      num_shards_(per_rank_ * options.world_size) {
  if (resume != nullptr) resume_ = *resume;
}

const std::optional<std::string>* ShardSource::ResumedState(int64_t epoch,
                                                            size_t i) const {
  if (!resume_.has_value() || resume_->epoch != epoch ||
      i >= resume_->shard_states.size()) {
    return nullptr;
  }
  return &resume_->shard_states[i];
}

absl::StatusOr<std::unique_ptr<SampleStream>> ShardSource::OpenShard(
    int64_t epoch, int i) const {
  const int64_t shard = StreamOf(rank_, per_rank_, i);
  absl::StatusOr<std::unique_ptr<SampleStream>> stream =
      CallUser("OpenShard", [&] {
        return dataset_->OpenShard(static_cast<int>(shard),
                                   static_cast<int>(num_shards_), epoch);
      });
  if (stream.ok() && *stream == nullptr) {
    stream =
        absl::InvalidArgumentError("OpenShard returned OK with a null stream");
  }
  if (!stream.ok()) {
    return absl::Status(
        stream.status().code(),
        absl::StrCat("opening shard ", shard, " of ", num_shards_,
                     " for epoch ", epoch, ": ", stream.status().message()));
  }
  const auto s = static_cast<size_t>(i);
  if (const std::optional<std::string>* state = ResumedState(epoch, s);
      state != nullptr && state->has_value()) {
    absl::Status restored = CallUser("SampleStream::RestoreState", [&] {
      return (*stream)->RestoreState(**state);
    });
    if (!restored.ok()) {
      return absl::Status(
          restored.code(),
          absl::StrCat("restoring shard ", shard, " of ", num_shards_,
                       " for epoch ", epoch,
                       " from the checkpoint: ", restored.message()));
    }
  }
  return stream;
}

// See Note [a streamed sample's generator] in loader/iterable_dataset.h.
uint64_t ShardSource::StreamKey(int64_t shard, const std::string* state,
                                int64_t batches) {
  const uint64_t domain = Mix64(static_cast<uint64_t>(shard) + kGoldenGamma);
  if (state != nullptr) return HashBytes(*state, domain ^ 0x5354415445ULL);
  return Mix64(domain ^ Mix64(static_cast<uint64_t>(batches) + 0x42415443ULL));
}

absl::Status ShardSource::StartEpoch(int64_t epoch, WorkerInit& worker_init) {
  shards_.clear();
  // On the producer thread, in its arena slot: worker_init runs first.
  PINWHEEL_RETURN_IF_ERROR(worker_init.EnsureRan());
  const EpochShare share{
      .epoch = epoch,
      .rank = static_cast<int>(rank_),
      .world_size = static_cast<int>(num_shards_ / per_rank_),
      .shards_per_rank = static_cast<int>(per_rank_),
      .resume =
          resume_.has_value() && resume_->epoch == epoch ? &*resume_ : nullptr};
  absl::Status started = CallUser("IterableDataset::StartEpoch",
                                  [&] { return dataset_->StartEpoch(share); });
  if (!started.ok()) {
    return absl::Status(started.code(),
                        absl::StrCat("starting epoch ", epoch,
                                     " of the dataset: ", started.message()));
  }
  std::vector<Shard> shards(static_cast<size_t>(per_rank_));
  for (int i = 0; i < static_cast<int>(per_rank_); ++i) {
    Shard& shard = shards[static_cast<size_t>(i)];
    PINWHEEL_ASSIGN_OR_RETURN(shard.stream, OpenShard(epoch, i));
    const auto s = static_cast<size_t>(i);
    const std::optional<std::string>* state = ResumedState(epoch, s);
    shard.stream_key = StreamKey(
        StreamOf(rank_, per_rank_, i),
        state != nullptr && state->has_value() ? &**state : nullptr, 0);
  }
  shards_ = std::move(shards);
  epoch_ = epoch;
  delivered_ = 0;
  MutexLock lock(&mu_);
  // A resumed epoch goes on in the turn it had (Note [exact resume]).
  turn_ = share.resume != nullptr
              ? static_cast<size_t>(share.resume->next_shard) % shards_.size()
              : 0;
  next_index_ = 0;
  return absl::OkStatus();
}

void ShardSource::EndEpoch() {
  shards_.clear();  // the streams are done with
}

int ShardSource::ShardInTurn() const {
  for (size_t k = 0; k < shards_.size(); ++k) {
    const size_t s = (turn_ + k) % shards_.size();
    if (!shards_[s].done) return static_cast<int>(s);
  }
  return -1;
}

// Note [whose turn it is]
// Batches are taken from the shards in a fixed round-robin, so the order of
// an epoch's batches depends only on the shards' contents, never on which
// worker finishes first: the first stage waits for the shard whose turn it
// is to be idle (its previous batch read), skipping shards that are done.
// The wait is on mu_, which every change of busy/done takes, and a stop
// wakes it through Interrupt().
bool ShardSource::Claim(const StopFlag& stop, ProducedBatch& batch) {
  MutexLock lock(&mu_);
  Await(mu_, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (stop.stopping()) return true;
    const int s = ShardInTurn();
    return s < 0 || !shards_[static_cast<size_t>(s)].busy;
  });
  const int chosen = ShardInTurn();
  if (stop.stopping() || chosen < 0) return false;
  shards_[static_cast<size_t>(chosen)].busy = true;
  turn_ = static_cast<size_t>(chosen) + 1;
  batch.shard = chosen;
  batch.info.epoch = epoch_;
  batch.info.index = next_index_++;
  return true;
}

void ShardSource::Interrupt() { MutexLock lock(&mu_); }

void ShardSource::Unclaim(ProducedBatch& batch) {
  MutexLock lock(&mu_);
  shards_[static_cast<size_t>(batch.shard)].busy = false;
}

void ShardSource::Fill(BatchFiller& filler, ProducedBatch& batch) {
  Shard& shard = shards_[static_cast<size_t>(batch.shard)];
  const bool done = filler.FillStreamed(*shard.stream, batch, shard.stream_key);
  // The next batch's run starts at the state a checkpoint would hold.
  ++shard.batches;
  shard.stream_key = StreamKey(
      rank_ * per_rank_ + batch.shard,
      batch.stream_state.ok() ? &*batch.stream_state : nullptr, shard.batches);
  MutexLock lock(&mu_);
  shard.busy = false;
  if (done) shard.done = true;
}

void ShardSource::PrepareDelivery(ProducedBatch& batch) {
  if (!batch.status.ok() || batch.info.samples == 0) return;
  batch.info.index = delivered_++;  // no gaps for empty reads
  MutexLock lock(&states_mu_);
  stream_states_.push_back({batch.info.epoch, batch.info.index, batch.shard,
                            std::move(batch.stream_state)});
}

void ShardSource::Delivered(const BatchInfo& batch) {
  MutexLock lock(&states_mu_);
  while (!stream_states_.empty()) {
    StreamState& front = stream_states_.front();
    if (front.epoch > batch.epoch ||
        (front.epoch == batch.epoch && front.index > batch.index)) {
      break;
    }
    if (front.epoch == batch.epoch && front.index == batch.index) {
      const auto shard = static_cast<size_t>(front.shard);
      if (committed_states_.size() <= shard)
        committed_states_.resize(shard + 1);
      committed_states_[shard] = std::move(front.state);
      last_delivered_shard_ = front.shard;
    }
    stream_states_.pop_front();
  }
}

absl::Status ShardSource::Checkpoint(int64_t epoch, int64_t delivered,
                                     LoaderCheckpoint& c) const {
  c.kind = LoaderCheckpoint::Kind::kIterable;
  c.dataset_size = -1;
  c.position = delivered;
  c.num_shards = static_cast<int>(num_shards_);
  // The turn after the last delivered batch's shard; with none delivered
  // since a resume, the resumed one's.
  if (last_delivered_shard_ >= 0) {
    c.next_shard = static_cast<int>((last_delivered_shard_ + 1) % per_rank_);
  } else if (resume_.has_value() && resume_->epoch == epoch) {
    c.next_shard = resume_->next_shard;
  }
  c.shard_states.resize(static_cast<size_t>(per_rank_));
  for (int i = 0; i < static_cast<int>(per_rank_); ++i) {
    const auto s = static_cast<size_t>(i);
    if (s < committed_states_.size() && committed_states_[s].has_value()) {
      const absl::StatusOr<std::string>& state = *committed_states_[s];
      if (!state.ok()) {
        return absl::FailedPreconditionError(absl::StrCat(
            "Checkpoint(): shard ", rank_ * per_rank_ + i,
            "'s SampleStream::SaveState() failed: ", state.status().message(),
            absl::IsUnimplemented(state.status())
                ? " (an IterableDataset needs SampleStream::SaveState() and "
                  "RestoreState() to be checkpointed mid-epoch)"
                : ""));
      }
      c.shard_states[s] = *state;
    } else if (const std::optional<std::string>* state = ResumedState(epoch, s);
               state != nullptr) {
      c.shard_states[s] = *state;  // nothing delivered since
    }
  }
  return absl::OkStatus();
}

void ShardSource::ForgetResume() {
  resume_.reset();
  committed_states_.clear();
  last_delivered_shard_ = -1;
  MutexLock lock(&states_mu_);
  stream_states_.clear();
}

}  // namespace pinwheel::internal
