// Samplers: see sampler.h and its Notes [portable shuffles] and [the epoch
// shuffle].
#include "loader/sampler.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

namespace pinwheel {

EpochShuffle::EpochShuffle(int64_t size, uint64_t seed, int64_t epoch)
    : shuffle_(order::MakeShuffle(size, seed, epoch)) {}

int64_t EpochShuffle::At(int64_t position) const {
  return order::ShuffleAt(shuffle_, position);
}

std::vector<int64_t> Permutation(int64_t size, uint64_t seed, int64_t epoch) {
  const EpochShuffle shuffle(size, seed, epoch);
  std::vector<int64_t> order(static_cast<size_t>(shuffle.size()));
  for (size_t p = 0; p < order.size(); ++p) {
    order[p] = shuffle.At(static_cast<int64_t>(p));
  }
  return order;
}

void Sampler::Fill(int64_t epoch, int64_t begin,
                   absl::Span<int64_t> out) const {
  for (size_t i = 0; i < out.size(); ++i) {
    out[i] = At(epoch, begin + static_cast<int64_t>(i));
  }
}

std::vector<int64_t> Sampler::Indices(int64_t epoch) const {
  std::vector<int64_t> order(static_cast<size_t>(std::max<int64_t>(size(), 0)));
  Fill(epoch, 0, absl::MakeSpan(order));
  return order;
}

int64_t SequentialSampler::At(int64_t /*epoch*/, int64_t position) const {
  return position;
}

void SequentialSampler::Fill(int64_t /*epoch*/, int64_t begin,
                             absl::Span<int64_t> out) const {
  for (size_t i = 0; i < out.size(); ++i) {
    out[i] = begin + static_cast<int64_t>(i);
  }
}

int64_t RandomSampler::At(int64_t epoch, int64_t position) const {
  return EpochShuffle(size_, seed_, epoch).At(position);
}

void RandomSampler::Fill(int64_t epoch, int64_t begin,
                         absl::Span<int64_t> out) const {
  const EpochShuffle shuffle(size_, seed_, epoch);
  for (size_t i = 0; i < out.size(); ++i) {
    out[i] = shuffle.At(begin + static_cast<int64_t>(i));
  }
}

absl::StatusOr<std::unique_ptr<DistributedSampler>> DistributedSampler::Create(
    int64_t size, int rank, int world_size, bool shuffle, uint64_t seed,
    bool drop_tail, int64_t start) {
  if (size < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "DistributedSampler: size is ", size, "; it must be >= 0"));
  }
  if (world_size < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "DistributedSampler: world_size is ", world_size, "; it must be >= 1"));
  }
  if (rank < 0 || rank >= world_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "DistributedSampler: rank is ", rank,
        "; it must be in [0, world_size) = [0, ", world_size, ")"));
  }
  if (start < 0 || start > size) {
    return absl::InvalidArgumentError(
        absl::StrCat("DistributedSampler: start is ", start,
                     "; it must be in [0, size] = [0, ", size, "]"));
  }
  return std::unique_ptr<DistributedSampler>(new DistributedSampler(
      size, rank, world_size, shuffle, seed, drop_tail, start));
}

DistributedSampler::DistributedSampler(int64_t size, int rank, int world_size,
                                       bool shuffle, uint64_t seed,
                                       bool drop_tail, int64_t start)
    : size_(size),
      rank_(rank),
      world_size_(world_size),
      shuffle_(shuffle),
      seed_(seed),
      start_(start) {
  // As torch: drop the tail down to a multiple of world_size, or pad up to
  // one. No product or sum here can overflow: remaining <= INT64_MAX.
  const int64_t remaining = size - start;
  per_rank_ = remaining / world_size +
              (!drop_tail && remaining % world_size != 0 ? 1 : 0);
}

order::Deal DistributedSampler::DealFor(int64_t epoch) const {
  order::Deal deal;
  deal.size = size_;
  deal.start = start_;
  deal.world_size = world_size_;
  deal.rank = rank_;
  deal.shuffle = shuffle_;
  // Every rank computes the same global order (same seed and epoch), then
  // keeps its own stride of it.
  if (shuffle_) deal.epoch_shuffle = order::MakeShuffle(size_, seed_, epoch);
  return deal;
}

int64_t DistributedSampler::At(int64_t epoch, int64_t position) const {
  // Positions past the end wrap around to the start, as many times as
  // needed (torch's padding): see order::DealAt.
  return order::DealAt(DealFor(epoch), position);
}

void DistributedSampler::Fill(int64_t epoch, int64_t begin,
                              absl::Span<int64_t> out) const {
  const order::Deal deal = DealFor(epoch);
  for (size_t i = 0; i < out.size(); ++i) {
    out[i] = order::DealAt(deal, begin + static_cast<int64_t>(i));
  }
}

int64_t DistributedSampler::GlobalPosition(int64_t consumed) const {
  const uint64_t end = static_cast<uint64_t>(start_) +
                       static_cast<uint64_t>(std::max<int64_t>(consumed, 0)) *
                           static_cast<uint64_t>(world_size_);
  return static_cast<int64_t>(std::min(end, static_cast<uint64_t>(size_)));
}

absl::StatusOr<BatchSampler> BatchSampler::Create(
    std::unique_ptr<Sampler> sampler, int64_t batch_size, bool drop_last) {
  if (sampler == nullptr) {
    return absl::InvalidArgumentError(
        "BatchSampler: sampler is null; it must be a sampler");
  }
  if (batch_size < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "BatchSampler: batch_size is ", batch_size, "; it must be >= 1"));
  }
  return BatchSampler(std::move(sampler), batch_size, drop_last);
}

int64_t BatchSampler::PositionsIn(int64_t batches) const {
  const int64_t total = std::max<int64_t>(sampler_->size(), 0);
  // Past total / batch_size_ the product could overflow; it is clamped.
  if (batches > total / batch_size_) return total;
  return batches * batch_size_;
}

void BatchSampler::Batch(int64_t epoch, int64_t batch,
                         std::vector<int64_t>* out) const {
  const int64_t begin = PositionsIn(batch);
  const int64_t end = PositionsIn(batch + 1);
  out->resize(static_cast<size_t>(end - begin));
  sampler_->Fill(epoch, begin, absl::MakeSpan(*out));
}

std::vector<int64_t> BatchSampler::Batch(int64_t epoch, int64_t batch) const {
  std::vector<int64_t> out;
  Batch(epoch, batch, &out);
  return out;
}

int64_t BatchSampler::batches_per_epoch() const {
  const int64_t total = std::max<int64_t>(sampler_->size(), 0);
  return total / batch_size_ +
         (!drop_last_ && total % batch_size_ != 0 ? 1 : 0);
}

}  // namespace pinwheel
