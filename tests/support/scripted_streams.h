// ScriptedStreams: the IterableDataset double of the loader tests. Which
// samples each shard yields, what they hold, whether the streams can be
// checkpointed, and the faults of user code (an error, a throw, a null
// stream) are set per test, so one class serves every iterable case.
//
// By default a sample holds PatternDataset's contents for its index (field
// "b" = index * 7 + 1 identifies it), written in Next(); set_deferred()
// leaves the writing to a SampleFinish (SampleStream::NextOrDefer).
//
// Example:
//   auto dataset = testing_support::ScriptedStreams::Strided(503);
//   dataset->set_next([](int shard, int64_t index) -> absl::Status {
//     if (index == 37) throw std::runtime_error("bad record");
//     return absl::OkStatus();
//   });
//   absl::StatusOr<Loader> loader =
//       LoaderBuilder(dataset).batch_size(16).device(Device::Host()).Build();
#ifndef PINWHEEL_TESTS_SUPPORT_SCRIPTED_STREAMS_H_
#define PINWHEEL_TESTS_SUPPORT_SCRIPTED_STREAMS_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

#include "loader/dataset.h"
#include "loader/iterable_dataset.h"
#include "tests/support/test_datasets.h"
#include "transfer/sample_layout.h"

namespace pinwheel::testing_support {

// OpenShard() and opens() are thread-safe. The setters are not: call them
// before the dataset is handed to a LoaderBuilder.
class ScriptedStreams : public IterableDataset {
 public:
  // Runs in OpenShard() instead of opening the scripted stream: whatever it
  // returns (a stream, an error, a null stream) or throws is OpenShard()'s.
  using OpenFn = std::function<absl::StatusOr<std::unique_ptr<SampleStream>>(
      int shard, int num_shards, int64_t epoch)>;
  // Runs before sample `index` of `shard` is written; an error (or a throw)
  // is that SampleStream::Next()'s.
  using NextFn = std::function<absl::Status(int shard, int64_t index)>;
  // Writes sample `index` into `out`.
  using FillFn = std::function<absl::Status(int64_t index, SampleView& out)>;
  // Runs in sample `index`'s deferred finish, before it is written: an
  // error (or a throw) is the finish's, kSkipped skips the sample.
  using FinishFn = std::function<absl::StatusOr<SampleStream::FinishResult>(
      int shard, int64_t index)>;

  // Returns a dataset whose every shard yields samples 0..per_shard-1.
  static std::shared_ptr<ScriptedStreams> EachShard(int64_t per_shard) {
    return std::shared_ptr<ScriptedStreams>(
        new ScriptedStreams(per_shard, /*strided=*/false));
  }
  // Returns a dataset of samples 0..size-1 whose shard s of n yields the
  // indices k with k % n == s, in increasing order.
  static std::shared_ptr<ScriptedStreams> Strided(int64_t size) {
    return std::shared_ptr<ScriptedStreams>(
        new ScriptedStreams(size, /*strided=*/true));
  }

  const SampleLayout& layout() const override { return layout_; }
  bool defers_sample_work() const override { return finish_ != nullptr; }
  absl::StatusOr<std::unique_ptr<SampleStream>> OpenShard(
      int shard, int num_shards, int64_t epoch) const override {
    opens_.fetch_add(1);
    if (open_) return open_(shard, num_shards, epoch);
    if (strided_) {
      return std::unique_ptr<SampleStream>(
          new Stream(this, shard, /*first=*/shard, /*step=*/num_shards));
    }
    return std::unique_ptr<SampleStream>(
        new Stream(this, shard, /*first=*/0, /*step=*/1));
  }

  void set_open(OpenFn open) { open_ = std::move(open); }
  void set_next(NextFn next) { next_ = std::move(next); }
  // From now on each sample is written by its SampleFinish, which runs
  // `finish` first.
  void set_deferred(FinishFn finish) { finish_ = std::move(finish); }
  // Replaces PatternDataset's layout and contents.
  void set_content(SampleLayout layout, FillFn fill) {
    layout_ = std::move(layout);
    fill_ = std::move(fill);
  }
  // With true, each stream's SaveState() is the next index it yields, in
  // decimal, and RestoreState() continues from there; with false (the
  // default) they are SampleStream's, which return Unimplemented.
  void set_resumable(bool resumable) { resumable_ = resumable; }

  // Returns how many times OpenShard() was called.
  int64_t opens() const { return opens_.load(); }

 private:
  class Stream : public SampleStream {
   public:
    Stream(const ScriptedStreams* owner, int shard, int64_t first, int64_t step)
        : owner_(owner), shard_(shard), next_(first), step_(step) {}
    absl::StatusOr<bool> Next(SampleView& out) override {
      return NextFinishedHere(out);
    }
    absl::StatusOr<bool> NextOrDefer(SampleView& out,
                                     SampleFinish& finish) override {
      if (next_ >= owner_->size_) return false;
      if (owner_->next_) {
        absl::Status status = owner_->next_(shard_, next_);
        if (!status.ok()) return status;
      }
      const int64_t index = next_;
      next_ += step_;
      if (owner_->finish_) {
        finish = [owner = owner_, shard = shard_,
                  index](SampleView& view) -> absl::StatusOr<FinishResult> {
          absl::StatusOr<FinishResult> first = owner->finish_(shard, index);
          if (!first.ok() || *first == FinishResult::kSkipped) return first;
          absl::Status status = owner->fill_(index, view);
          if (!status.ok()) return status;
          return FinishResult::kWritten;
        };
        return true;
      }
      absl::Status status = owner_->fill_(index, out);
      if (!status.ok()) {
        next_ = index;  // as before deferral: a failed sample is not passed
        return status;
      }
      return true;
    }
    absl::StatusOr<std::string> SaveState() const override {
      if (!owner_->resumable_) return SampleStream::SaveState();
      return absl::StrCat(next_);
    }
    absl::Status RestoreState(absl::string_view state) override {
      if (!owner_->resumable_) return SampleStream::RestoreState(state);
      if (!absl::SimpleAtoi(state, &next_)) {
        return absl::InvalidArgumentError("not a number");
      }
      return absl::OkStatus();
    }

   private:
    const ScriptedStreams* owner_;
    int shard_;
    int64_t next_;  // the index of the next sample
    int64_t step_;
  };

  ScriptedStreams(int64_t size, bool strided)
      : pattern_(size), size_(size), strided_(strided) {
    layout_ = pattern_.layout();
    fill_ = [this](int64_t index, SampleView& out) {
      return pattern_.Read(index, out);
    };
  }

  PatternDataset pattern_;
  int64_t size_;
  bool strided_;
  SampleLayout layout_;
  FillFn fill_;
  OpenFn open_;
  NextFn next_;
  FinishFn finish_;
  bool resumable_ = false;
  mutable std::atomic<int64_t> opens_{0};
};

}  // namespace pinwheel::testing_support

#endif  // PINWHEEL_TESTS_SUPPORT_SCRIPTED_STREAMS_H_
