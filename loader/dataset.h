// Dataset: the map-style dataset interface. A dataset has a size, a fixed
// per-sample layout of named fields, and a thread-safe Read() that writes
// one sample straight into its place in a pinned slot (no collate copy).
//
// Example:
//   class Squares : public pinwheel::Dataset {
//    public:
//     Squares() : layout_(*SampleLayout::Create({{"x", DType::kInt64, {}}})) {}
//     int64_t size() const override { return 1000; }
//     const SampleLayout& layout() const override { return layout_; }
//     absl::Status Read(int64_t i, SampleView& out) const override {
//       out.field_as<int64_t>(0)[0] = i * i;
//       return absl::OkStatus();
//     }
//    private:
//     SampleLayout layout_;
//   };
//
// Samples whose size varies declare a variable-length field (see
// SampleLayout): Read() writes up to the maximum and calls set_length(); the
// loader zero-pads the rest and delivers a "<name>_length" field.
#ifndef PINWHEEL_LOADER_DATASET_H_
#define PINWHEEL_LOADER_DATASET_H_

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

#include "loader/gather_source.h"
#include "loader/sample_random.h"
#include "transfer/sample_layout.h"

namespace pinwheel {

// Where one sample goes inside a batch slot. Borrowed by Read() for the
// duration of the call only. Not thread-safe (one sample, one writer).
//
// Misuse never writes outside the sample: field(f) with f out of range
// returns an empty span, set_length() on a field that is not
// variable-length, out of range, or with a length outside 0..maximum writes
// nothing; each records InvalidArgument in status(), and the loader fails
// that Read with it (naming the field, the dataset index and the batch).
// A copy of a view records its own misuse.
class SampleView {
 public:
  // REQUIRES: `slot` holds a batch laid out by `layout`; 0 <= position <
  // layout.batch_size(). Fields' bytes are left as they were (Read must
  // write every byte of a fixed-size field). The loader passes the sample's
  // generator; a view made outside a loader (a test, a tool) gets that of
  // seed 0, epoch 0, key 0 unless given one.
  // `sample`, when not null, is the layout Read() sees (layout()): the
  // dataset's own fields, the first of layout.sample()'s (the loader
  // appends pad_last_batch's validity field after them); it must outlive
  // the view. Null: layout.sample().
  SampleView(const BatchLayout& layout, std::byte* slot, int64_t position,
             int64_t index, SampleRandom random = SampleRandom(0, 0, 0),
             const SampleLayout* sample = nullptr);

  // Returns the dataset index being read.
  int64_t index() const { return index_; }
  // Returns this sample's random generator: a pure function of (loader seed,
  // epoch, dataset index), so augmentation drawn from it is the same with
  // any number of workers, on any thread, after a checkpoint/resume and
  // with another world size (see loader/sample_random.h). Every Read() of a
  // sample starts the generator afresh: a sample read again (a restarted
  // epoch, a resume) draws the same numbers; the next epoch draws others.
  // Draw only from this generator, not from thread-local or global ones,
  // to keep that. A SampleStream's sample is keyed by its place in its
  // shard instead (Note [a streamed sample's generator] in
  // loader/iterable_dataset.h).
  SampleRandom& random() { return random_; }
  const SampleLayout& layout() const { return *sample_; }

  // Returns the bytes of sample field `f` (SampleLayout order); empty (and
  // recorded in status()) when `f` is out of range.
  absl::Span<std::byte> field(int f) const;
  // Returns sample field `f` as elements of T; empty (and recorded in
  // status(), naming the field, its dtype and sizeof(T)) when `f` is out of
  // range or T is not the size of the field's dtype (field_as<double>() on
  // an f32 field).
  // REQUIRES: sizeof(T) == DTypeSize(field dtype).
  template <typename T>
  absl::Span<T> field_as(int f) const {
    if (!ElementSizeIs(f, sizeof(T))) return {};
    absl::Span<std::byte> bytes = field(f);
    return absl::Span<T>(reinterpret_cast<T*>(bytes.data()),
                         bytes.size() / sizeof(T));
  }
  // Returns the bytes of the field named `name`, or NotFound.
  [[nodiscard]] absl::StatusOr<absl::Span<std::byte>> field(
      absl::string_view name) const;

  // For a variable-length field `f`: the number of elements along its first
  // dimension that Read() wrote. Unset means the maximum. A field that is
  // not variable-length, or a length outside 0..maximum, writes nothing and
  // is recorded in status().
  void set_length(int f, int64_t length);
  // Returns the length set for variable-length field `f` (its maximum when
  // unset), or -1 when `f` is not a variable-length field.
  int64_t length(int f) const;

  // Returns OK, or InvalidArgument describing the first misuse of this view
  // (see the class comment).
  absl::Status status() const { return misuse_; }

 private:
  void RecordMisuse(absl::Status status) const;
  // Returns false, recording the misuse, when field `f` exists and its
  // dtype's size is not `size`.
  bool ElementSizeIs(int f, size_t size) const;

  const BatchLayout* layout_;
  const SampleLayout* sample_;  // never null
  std::byte* slot_;
  int64_t position_;
  int64_t index_;
  SampleRandom random_;
  mutable absl::Status misuse_;
};

struct LoaderCheckpoint;  // loader/loader_checkpoint.h

// The order the loader reads a map-style dataset in for an epoch: what it
// tells Dataset::StartEpoch(). With the default sampler this rank reads
// DistributedSampler(size, rank, world_size, shuffle, seed, drop_tail)'s
// share (loader/sampler.h), from the checkpoint's position when resuming.
// A value.
struct EpochSampling {
  int64_t epoch = 0;
  int rank = 0;
  int world_size = 1;
  // False when LoaderOptions::sampler orders the epoch: the fields below
  // then do not describe the order.
  bool default_sampler = true;
  bool shuffle = false;
  uint64_t seed = 0;
  bool drop_tail = false;  // LoaderOptions::drop_uneven_tail
  int64_t batch_size = 1;  // batches are cut from the order in this size
  // The checkpoint this epoch resumes from (its epoch is `epoch`); null when
  // the epoch starts from the beginning. Borrowed for the call.
  const LoaderCheckpoint* resume = nullptr;
};

// Interface. Implementations must make size() and layout() constant and
// Read() and StartEpoch() safe to call from many threads at once.
class Dataset {
 public:
  virtual ~Dataset() = default;

  // Returns the number of samples; indices are 0..size()-1.
  virtual int64_t size() const = 0;
  // Returns the layout every sample has.
  virtual const SampleLayout& layout() const = 0;
  // Writes sample `index` into `out`, or returns why it could not. Thread-
  // safe. An exception thrown here is caught and reported as a Status.
  // REQUIRES: 0 <= index < size().
  virtual absl::Status Read(int64_t index, SampleView& out) const = 0;

  // Returns where the samples lie in host memory, for the loader's gather
  // path (loader/gather_source.h), or why they cannot be gathered: the
  // default is Unimplemented (samples only come through Read()). A dataset
  // that must copy a file into memory to describe it refuses, with
  // ResourceExhausted naming both sizes, when that copy would exceed
  // `max_copy_bytes`, before reading anything; a copy it makes is shared by
  // every loader over the dataset while any of them holds it. Thread-safe.
  [[nodiscard]] virtual absl::StatusOr<GatherSource> Gather(
      uint64_t max_copy_bytes) const;

  // Optional: called at the start of every epoch, before any Read() of it,
  // with the order the epoch is read in. A dataset that reads through a
  // cache plans the epoch's reads here (loader/storage/cache/
  // planned_record_file.h). An error or exception stops the loader,
  // reported naming the epoch. The default does nothing.
  virtual absl::Status StartEpoch(const EpochSampling& /*sampling*/) const {
    return absl::OkStatus();
  }
};

}  // namespace pinwheel

#endif  // PINWHEEL_LOADER_DATASET_H_
