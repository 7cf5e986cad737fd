// SampleLayout: the fixed per-sample layout of a dataset (named fields, each
// a dtype and a shape), and BatchLayout: where each field of a batch lives in
// one slot, so that a whole batch moves in one copy.
//
// A batch slot is field-major: field f of a batch of B samples is one
// contiguous [B, shape...] array starting at field_offset(f) (256-byte
// aligned), so each field arrives on the device as a ready tensor.
//
// Example:
//   PINWHEEL_ASSIGN_OR_RETURN(SampleLayout layout, SampleLayout::Create({
//       {.name = "image", .dtype = DType::kUInt8, .shape = {3, 224, 224}},
//       {.name = "label", .dtype = DType::kInt64, .shape = {}}}));
//   PINWHEEL_ASSIGN_OR_RETURN(BatchLayout batch, BatchLayout::Create(layout,
//   256));
//
// Variable-length fields declare their maximum length as shape[0]. A batch
// then also carries an int64 field "<name>_length" with each sample's
// length; elements past it are zero (padding).
#ifndef PINWHEEL_TRANSFER_SAMPLE_LAYOUT_H_
#define PINWHEEL_TRANSFER_SAMPLE_LAYOUT_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace pinwheel {

enum class DType {
  kBool,
  kUInt8,
  kInt8,
  kUInt16,
  kInt16,
  kUInt32,
  kInt32,
  kUInt64,
  kInt64,
  kFloat16,
  kBFloat16,
  kFloat32,
  kFloat64,
};

// Returns the size of one element in bytes.
size_t DTypeSize(DType dtype);
// Returns the short name: "u8", "i64", "bf16", ...
std::string DTypeName(DType dtype);
// Returns the dtype named by DTypeName(), or InvalidArgument.
absl::StatusOr<DType> ParseDType(absl::string_view name);

struct FieldSpec {
  std::string name;  // [A-Za-z0-9_]+, unique within a layout
  DType dtype = DType::kUInt8;
  std::vector<int64_t> shape;    // per sample; {} is a scalar; dims >= 1
  bool variable_length = false;  // shape[0] is then the maximum length

  int64_t elements() const;      // product of shape (1 for a scalar)
  size_t bytes() const;          // elements() * DTypeSize(dtype)
  std::string ToString() const;  // "image u8[3,224,224]"
};

// Thread-compatible; immutable after Create().
class SampleLayout {
 public:
  // Returns the layout, or InvalidArgument naming the field and the rule:
  // at least one field, names unique and of [A-Za-z0-9_], dims >= 1, a
  // variable-length field has rank >= 1, at most 1 GiB per sample.
  [[nodiscard]] static absl::StatusOr<SampleLayout> Create(
      std::vector<FieldSpec> fields);

  SampleLayout() = default;

  const std::vector<FieldSpec>& fields() const { return fields_; }
  int num_fields() const { return static_cast<int>(fields_.size()); }
  // Returns the index of the field named `name`, or -1.
  int FieldIndex(absl::string_view name) const;
  // Returns the bytes of one sample: the sum of the fields' bytes.
  size_t sample_bytes() const { return sample_bytes_; }
  std::string ToString() const;  // "image u8[3,224,224], label i64[]"

  friend bool operator==(const SampleLayout& a, const SampleLayout& b);

 private:
  std::vector<FieldSpec> fields_;
  size_t sample_bytes_ = 0;
};

bool operator==(const FieldSpec& a, const FieldSpec& b);

// Thread-compatible; immutable after Create().
class BatchLayout {
 public:
  static constexpr size_t kFieldAlignment = 256;

  // Returns the slot layout of batches of up to `batch_size` samples.
  // InvalidArgument when batch_size < 1 or the batch exceeds 64 GiB.
  [[nodiscard]] static absl::StatusOr<BatchLayout> Create(
      const SampleLayout& sample, int64_t batch_size);

  BatchLayout() = default;

  const SampleLayout& sample() const { return sample_; }
  int64_t batch_size() const { return batch_size_; }
  // Fields of the batch: the sample's fields, then one "<name>_length"
  // int64 scalar field per variable-length field.
  const std::vector<FieldSpec>& fields() const { return fields_; }
  int num_fields() const { return static_cast<int>(fields_.size()); }
  // Returns the index in fields() of the length field of sample field `f`,
  // or -1 when `f` is not variable-length.
  int length_field(int f) const { return length_field_[f]; }
  // Returns the byte offset of batch field `f` in a slot.
  size_t field_offset(int f) const { return offsets_[f]; }
  // Returns the bytes of a slot holding a full batch.
  size_t slot_bytes() const { return slot_bytes_; }
  // Returns the bytes a copy must move for a batch of `samples` samples:
  // up to the end of the last field's last sample.
  size_t CopyBytes(int64_t samples) const;

 private:
  SampleLayout sample_;
  int64_t batch_size_ = 0;
  std::vector<FieldSpec> fields_;
  std::vector<int> length_field_;
  std::vector<size_t> offsets_;
  size_t slot_bytes_ = 0;
};

}  // namespace pinwheel

#endif  // PINWHEEL_TRANSFER_SAMPLE_LAYOUT_H_
