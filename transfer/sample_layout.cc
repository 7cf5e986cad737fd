#include "transfer/sample_layout.h"

#include <algorithm>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace pinwheel {
namespace {

constexpr size_t kMaxSampleBytes = size_t{1} << 30;
constexpr size_t kMaxBatchBytes = size_t{64} << 30;

struct DTypeInfo {
  DType dtype;
  const char* name;
  size_t size;
};
constexpr DTypeInfo kDTypes[] = {
    {DType::kBool, "bool", 1},     {DType::kUInt8, "u8", 1},
    {DType::kInt8, "i8", 1},       {DType::kUInt16, "u16", 2},
    {DType::kInt16, "i16", 2},     {DType::kUInt32, "u32", 4},
    {DType::kInt32, "i32", 4},     {DType::kUInt64, "u64", 8},
    {DType::kInt64, "i64", 8},     {DType::kFloat16, "f16", 2},
    {DType::kBFloat16, "bf16", 2}, {DType::kFloat32, "f32", 4},
    {DType::kFloat64, "f64", 8},
};

const DTypeInfo& Info(DType dtype) {
  for (const DTypeInfo& info : kDTypes) {
    if (info.dtype == dtype) return info;
  }
  return kDTypes[1];
}

bool ValidName(const std::string& name) {
  return !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (c >= '0' && c <= '9') || c == '_';
  });
}

size_t AlignUp(size_t n, size_t alignment) {
  return (n + alignment - 1) / alignment * alignment;
}

}  // namespace

size_t DTypeSize(DType dtype) { return Info(dtype).size; }
std::string DTypeName(DType dtype) { return Info(dtype).name; }

absl::StatusOr<DType> ParseDType(absl::string_view name) {
  for (const DTypeInfo& info : kDTypes) {
    if (name == info.name) return info.dtype;
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown dtype '", name, "'"));
}

int64_t FieldSpec::elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

size_t FieldSpec::bytes() const {
  return static_cast<size_t>(elements()) * DTypeSize(dtype);
}

std::string FieldSpec::ToString() const {
  return absl::StrCat(name, " ", DTypeName(dtype), "[",
                      absl::StrJoin(shape, ","), "]",
                      variable_length ? " (variable length)" : "");
}

bool operator==(const FieldSpec& a, const FieldSpec& b) {
  return a.name == b.name && a.dtype == b.dtype && a.shape == b.shape &&
         a.variable_length == b.variable_length;
}

absl::StatusOr<SampleLayout> SampleLayout::Create(
    std::vector<FieldSpec> fields) {
  if (fields.empty()) {
    return absl::InvalidArgumentError(
        "sample layout: needs at least one field");
  }
  absl::flat_hash_set<std::string> names;
  size_t total = 0;
  for (const FieldSpec& f : fields) {
    if (!ValidName(f.name)) {
      return absl::InvalidArgumentError(
          absl::StrCat("sample layout: field name '", f.name,
                       "' must be non-empty and use only [A-Za-z0-9_]"));
    }
    if (!names.insert(f.name).second) {
      return absl::InvalidArgumentError(absl::StrCat(
          "sample layout: field name '", f.name, "' appears twice"));
    }
    if (f.shape.size() > 8) {
      return absl::InvalidArgumentError(
          absl::StrCat("sample layout: field '", f.name, "' has rank ",
                       f.shape.size(), "; at most 8 dimensions"));
    }
    size_t elements = 1;
    for (int64_t d : f.shape) {
      if (d < 1) {
        return absl::InvalidArgumentError(
            absl::StrCat("sample layout: field '", f.name, "' has dimension ",
                         d, " in shape [", absl::StrJoin(f.shape, ","),
                         "]; dims must be >= 1"));
      }
      if (static_cast<size_t>(d) > kMaxSampleBytes ||
          elements * static_cast<size_t>(d) > kMaxSampleBytes) {
        return absl::InvalidArgumentError(absl::StrCat(
            "sample layout: field '", f.name, "' shape [",
            absl::StrJoin(f.shape, ","), "] exceeds 1 GiB per sample"));
      }
      elements *= static_cast<size_t>(d);
    }
    if (f.variable_length && f.shape.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("sample layout: variable-length field '", f.name,
                       "' needs rank >= 1 (shape[0] is its maximum length)"));
    }
    total += f.bytes();
    if (total > kMaxSampleBytes) {
      return absl::InvalidArgumentError(absl::StrCat(
          "sample layout: ", total, " bytes per sample exceeds 1 GiB"));
    }
  }
  for (const FieldSpec& f : fields) {
    if (f.variable_length && names.contains(absl::StrCat(f.name, "_length"))) {
      return absl::InvalidArgumentError(absl::StrCat(
          "sample layout: field '", f.name,
          "_length' clashes with the length field of variable-length field '",
          f.name, "'"));
    }
  }
  SampleLayout layout;
  layout.fields_ = std::move(fields);
  layout.sample_bytes_ = total;
  return layout;
}

int SampleLayout::FieldIndex(absl::string_view name) const {
  for (size_t i = 0; i < fields_.size(); ++i) {
    if (fields_[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

std::string SampleLayout::ToString() const {
  return absl::StrJoin(fields_, ", ", [](std::string* out, const FieldSpec& f) {
    absl::StrAppend(out, f.ToString());
  });
}

bool operator==(const SampleLayout& a, const SampleLayout& b) {
  return a.fields_ == b.fields_;
}

absl::StatusOr<BatchLayout> BatchLayout::Create(const SampleLayout& sample,
                                                int64_t batch_size) {
  if (batch_size < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("batch_size = ", batch_size, ": must be >= 1"));
  }
  if (sample.num_fields() == 0) {
    return absl::InvalidArgumentError(
        "batch layout: the sample layout is empty");
  }
  BatchLayout layout;
  layout.sample_ = sample;
  layout.batch_size_ = batch_size;
  layout.fields_ = sample.fields();
  layout.length_field_.assign(sample.num_fields(), -1);
  for (int f = 0; f < sample.num_fields(); ++f) {
    if (!sample.fields()[f].variable_length) continue;
    layout.length_field_[f] = static_cast<int>(layout.fields_.size());
    layout.fields_.push_back(
        {.name = absl::StrCat(sample.fields()[f].name, "_length"),
         .dtype = DType::kInt64,
         .shape = {}});
  }
  size_t offset = 0;
  for (const FieldSpec& f : layout.fields_) {
    const size_t bytes = f.bytes();
    if (bytes != 0 &&
        static_cast<size_t>(batch_size) > kMaxBatchBytes / bytes) {
      return absl::InvalidArgumentError(absl::StrCat(
          "batch_size = ", batch_size, " with samples of ",
          sample.sample_bytes(), " bytes exceeds 64 GiB per batch"));
    }
    offset = AlignUp(offset, kFieldAlignment);
    layout.offsets_.push_back(offset);
    offset += bytes * static_cast<size_t>(batch_size);
    if (offset > kMaxBatchBytes) {
      return absl::InvalidArgumentError(absl::StrCat(
          "batch_size = ", batch_size, " with samples of ",
          sample.sample_bytes(), " bytes exceeds 64 GiB per batch"));
    }
  }
  layout.slot_bytes_ = AlignUp(offset, kFieldAlignment);
  return layout;
}

size_t BatchLayout::CopyBytes(int64_t samples) const {
  const int last = num_fields() - 1;
  return offsets_[last] + fields_[last].bytes() * static_cast<size_t>(samples);
}

}  // namespace pinwheel
