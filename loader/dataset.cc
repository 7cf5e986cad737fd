#include "loader/dataset.h"

#include <cstring>

#include "absl/strings/str_cat.h"

namespace pinwheel {

SampleView::SampleView(const BatchLayout& layout, std::byte* slot,
                       int64_t position, int64_t index)
    : layout_(&layout), slot_(slot), position_(position), index_(index) {}

absl::Span<std::byte> SampleView::field(int f) const {
  const size_t bytes = layout_->fields()[f].bytes();
  return absl::Span<std::byte>(
      slot_ + layout_->field_offset(f) + bytes * static_cast<size_t>(position_),
      bytes);
}

absl::StatusOr<absl::Span<std::byte>> SampleView::field(
    absl::string_view name) const {
  const int f = layout().FieldIndex(name);
  if (f < 0) {
    return absl::NotFoundError(absl::StrCat("sample has no field '", name,
                                            "'; fields: ", layout().ToString()));
  }
  return field(f);
}

void SampleView::set_length(int f, int64_t length) {
  const int length_field = layout_->length_field(f);
  std::memcpy(field(length_field).data(), &length, sizeof(length));
}

int64_t SampleView::length(int f) const {
  int64_t length = 0;
  std::memcpy(&length, field(layout_->length_field(f)).data(), sizeof(length));
  return length;
}

}  // namespace pinwheel
