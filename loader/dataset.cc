#include "loader/dataset.h"

#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"

namespace pinwheel {

SampleView::SampleView(const BatchLayout& layout, std::byte* slot,
                       int64_t position, int64_t index, SampleRandom random,
                       const SampleLayout* sample)
    : layout_(&layout),
      sample_(sample != nullptr ? sample : &layout.sample()),
      slot_(slot),
      position_(position),
      index_(index),
      random_(random) {}

void SampleView::RecordMisuse(absl::Status status) const {
  if (misuse_.ok()) misuse_ = std::move(status);
}

bool SampleView::ElementSizeIs(int f, size_t size) const {
  if (f < 0 || f >= layout_->num_fields()) return true;  // field() says so
  const FieldSpec& spec = layout_->fields()[f];
  if (DTypeSize(spec.dtype) == size) return true;
  RecordMisuse(absl::InvalidArgumentError(
      absl::StrCat("SampleView::field_as(", f, "): field '", spec.name, "' is ",
                   DTypeName(spec.dtype), " (", DTypeSize(spec.dtype),
                   " bytes an element), read as a type of ", size, " bytes")));
  return false;
}

absl::Span<std::byte> SampleView::field(int f) const {
  // Length fields follow the sample's fields in the batch layout.
  if (f < 0 || f >= layout_->num_fields()) {
    RecordMisuse(absl::InvalidArgumentError(
        absl::StrCat("SampleView::field(", f, "): the sample has fields 0..",
                     layout().num_fields() - 1)));
    return {};
  }
  const size_t bytes = layout_->fields()[f].bytes();
  return absl::Span<std::byte>(
      slot_ + layout_->field_offset(f) + bytes * static_cast<size_t>(position_),
      bytes);
}

absl::StatusOr<absl::Span<std::byte>> SampleView::field(
    absl::string_view name) const {
  const int f = layout().FieldIndex(name);
  if (f < 0) {
    return absl::NotFoundError(absl::StrCat(
        "sample has no field '", name, "'; fields: ", layout().ToString()));
  }
  return field(f);
}

void SampleView::set_length(int f, int64_t length) {
  const SampleLayout& sample = layout();
  if (f < 0 || f >= sample.num_fields()) {
    RecordMisuse(absl::InvalidArgumentError(
        absl::StrCat("SampleView::set_length(", f, ", ", length,
                     "): the sample has fields 0..", sample.num_fields() - 1)));
    return;
  }
  const FieldSpec& spec = sample.fields()[f];
  const int length_field = layout_->length_field(f);
  if (!spec.variable_length || length_field < 0) {
    RecordMisuse(absl::InvalidArgumentError(
        absl::StrCat("SampleView::set_length(", f, ", ", length, "): field '",
                     spec.name, "' (field ", f, ") is not variable-length")));
    return;
  }
  if (length < 0 || length > spec.shape[0]) {
    RecordMisuse(absl::InvalidArgumentError(absl::StrCat(
        "SampleView::set_length(", f, ", ", length, "): length for field '",
        spec.name, "' (field ", f, ") must be in 0..", spec.shape[0])));
    return;
  }
  std::memcpy(field(length_field).data(), &length, sizeof(length));
}

int64_t SampleView::length(int f) const {
  if (f < 0 || f >= layout().num_fields() || layout_->length_field(f) < 0) {
    return -1;
  }
  int64_t length = 0;
  std::memcpy(&length, field(layout_->length_field(f)).data(), sizeof(length));
  return length;
}

absl::StatusOr<GatherSource> Dataset::Gather(uint64_t) const {
  return absl::UnimplementedError(
      "the dataset does not describe its samples as rows in memory (no "
      "Dataset::Gather()); its samples are read with Read()");
}

}  // namespace pinwheel
