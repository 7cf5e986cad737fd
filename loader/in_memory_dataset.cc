#include "loader/in_memory_dataset.h"

#include <cstring>
#include <limits>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace pinwheel {
namespace {

// Checks that `layout`, `size` and the arrays' sizes agree.
absl::Status ValidateArrays(
    const SampleLayout& layout, int64_t size,
    const std::vector<absl::Span<const std::byte>>& fields) {
  if (layout.num_fields() == 0) {
    return absl::InvalidArgumentError(
        "InMemoryDataset: the layout has no fields");
  }
  if (size < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("InMemoryDataset: size ", size, " is negative"));
  }
  if (fields.size() != layout.fields().size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "InMemoryDataset: got ", fields.size(), " arrays for a layout of ",
        layout.num_fields(), " fields (", layout.ToString(), ")"));
  }
  for (size_t f = 0; f < fields.size(); ++f) {
    const FieldSpec& spec = layout.fields()[f];
    if (spec.variable_length) {
      return absl::InvalidArgumentError(absl::StrCat(
          "InMemoryDataset: field ", f, " ('", spec.name,
          "') is variable-length, which InMemoryDataset does not support"));
    }
    const size_t bytes = spec.bytes();
    if (bytes != 0 && static_cast<uint64_t>(size) >
                          std::numeric_limits<size_t>::max() / bytes) {
      return absl::InvalidArgumentError(absl::StrCat(
          "InMemoryDataset: field ", f, " ('", spec.name, "'): ", size,
          " samples of ", bytes, " bytes overflow size_t"));
    }
    const size_t want = static_cast<size_t>(size) * bytes;
    if (fields[f].size() != want) {
      return absl::InvalidArgumentError(absl::StrCat(
          "InMemoryDataset: field ", f, " ('", spec.name, "', ",
          spec.ToString(), ") has ", fields[f].size(), " bytes, want ", want,
          " (", size, " samples × ", bytes, " bytes)"));
    }
    if (want != 0 && fields[f].data() == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("InMemoryDataset: field ", f, " ('", spec.name,
                       "') has a null data pointer"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::shared_ptr<InMemoryDataset>> InMemoryDataset::Create(
    SampleLayout layout, int64_t size,
    std::vector<absl::Span<const std::byte>> fields) {
  if (absl::Status status = ValidateArrays(layout, size, fields);
      !status.ok()) {
    return status;
  }
  return std::shared_ptr<InMemoryDataset>(new InMemoryDataset(
      std::move(layout), size, std::move(fields), /*owned=*/{}));
}

absl::StatusOr<std::shared_ptr<InMemoryDataset>> InMemoryDataset::CreateOwning(
    SampleLayout layout, int64_t size,
    std::vector<std::vector<std::byte>> fields) {
  // The spans point into the inner vectors' heap buffers, which moving the
  // outer vector into the dataset leaves where they are.
  std::vector<absl::Span<const std::byte>> spans;
  spans.reserve(fields.size());
  for (const std::vector<std::byte>& field : fields) {
    spans.push_back(absl::MakeConstSpan(field));
  }
  if (absl::Status status = ValidateArrays(layout, size, spans); !status.ok()) {
    return status;
  }
  return std::shared_ptr<InMemoryDataset>(new InMemoryDataset(
      std::move(layout), size, std::move(spans), std::move(fields)));
}

InMemoryDataset::InMemoryDataset(
    SampleLayout layout, int64_t size,
    std::vector<absl::Span<const std::byte>> fields,
    std::vector<std::vector<std::byte>> owned)
    : layout_(std::move(layout)),
      size_(size),
      owned_(std::move(owned)),
      fields_(std::move(fields)) {
  field_bytes_.reserve(layout_.fields().size());
  for (const FieldSpec& spec : layout_.fields()) {
    field_bytes_.push_back(spec.bytes());
  }
}

absl::Status InMemoryDataset::Read(int64_t index, SampleView& out) const {
  if (index < 0 || index >= size_) {
    return absl::OutOfRangeError(absl::StrCat("InMemoryDataset: index ", index,
                                              " is outside [0, ", size_, ")"));
  }
  const int num_fields = static_cast<int>(field_bytes_.size());
  if (out.layout().num_fields() != num_fields) {
    return absl::InvalidArgumentError(absl::StrCat(
        "InMemoryDataset: the sample view has ", out.layout().num_fields(),
        " fields, the dataset has ", num_fields));
  }
  for (int f = 0; f < num_fields; ++f) {
    const size_t bytes = field_bytes_[f];
    absl::Span<std::byte> dst = out.field(f);
    if (dst.size() != bytes) {
      return absl::InvalidArgumentError(
          absl::StrCat("InMemoryDataset: field ", f, " of the sample view has ",
                       dst.size(), " bytes, the dataset's has ", bytes));
    }
    std::memcpy(dst.data(),
                fields_[f].data() + static_cast<size_t>(index) * bytes, bytes);
  }
  return absl::OkStatus();
}

absl::StatusOr<GatherSource> InMemoryDataset::Gather(uint64_t) const {
  GatherSource source;
  source.regions = fields_;
  source.fields.reserve(field_bytes_.size());
  for (size_t f = 0; f < field_bytes_.size(); ++f) {
    source.fields.push_back({.region = static_cast<int>(f),
                             .offset = 0,
                             .stride = field_bytes_[f],
                             .bytes = field_bytes_[f]});
  }
  return source;
}

}  // namespace pinwheel
