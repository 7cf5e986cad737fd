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
#include "transfer/sample_layout.h"

namespace pinwheel {

// Where one sample goes inside a batch slot. Borrowed by Read() for the
// duration of the call only. Not thread-safe (one sample, one writer).
class SampleView {
 public:
  // REQUIRES: `slot` holds a batch laid out by `layout`; 0 <= position <
  // layout.batch_size(). Fields' bytes are left as they were (Read must
  // write every byte of a fixed-size field).
  SampleView(const BatchLayout& layout, std::byte* slot, int64_t position,
             int64_t index);

  // Returns the dataset index being read.
  int64_t index() const { return index_; }
  const SampleLayout& layout() const { return layout_->sample(); }

  // Returns the bytes of sample field `f` (SampleLayout order).
  // REQUIRES: 0 <= f < layout().num_fields().
  absl::Span<std::byte> field(int f) const;
  // Returns sample field `f` as elements of T.
  // REQUIRES: sizeof(T) == DTypeSize(field dtype).
  template <typename T>
  absl::Span<T> field_as(int f) const {
    absl::Span<std::byte> bytes = field(f);
    return absl::Span<T>(reinterpret_cast<T*>(bytes.data()),
                         bytes.size() / sizeof(T));
  }
  // Returns the bytes of the field named `name`, or NotFound.
  [[nodiscard]] absl::StatusOr<absl::Span<std::byte>> field(
      absl::string_view name) const;

  // For a variable-length field `f`: the number of elements along its first
  // dimension that Read() wrote. Unset means the maximum.
  // REQUIRES: the field is variable-length, 0 <= length <= its maximum.
  void set_length(int f, int64_t length);
  // Returns the length set for variable-length field `f` (its maximum when
  // unset).
  int64_t length(int f) const;

 private:
  const BatchLayout* layout_;
  std::byte* slot_;
  int64_t position_;
  int64_t index_;
};

// Interface. Implementations must make size() and layout() constant and
// Read() safe to call from many threads at once.
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
};

}  // namespace pinwheel

#endif  // PINWHEEL_LOADER_DATASET_H_
