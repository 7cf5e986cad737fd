// Tests of SampleLayout and BatchLayout: validation names the field and the
// rule, fields of a slot are 256-byte aligned and field-major, variable-length
// fields get a length field, and partial batches copy only what they need.
#include "transfer/sample_layout.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace pinwheel {
namespace {

using ::testing::HasSubstr;

void ExpectInvalid(std::vector<FieldSpec> fields, const std::string& mentions) {
  absl::StatusOr<SampleLayout> layout = SampleLayout::Create(std::move(fields));
  EXPECT_EQ(layout.status().code(), absl::StatusCode::kInvalidArgument)
      << "expected an error mentioning '" << mentions << "'";
  EXPECT_THAT(std::string(layout.status().message()), HasSubstr(mentions));
}

TEST(SampleLayout, RejectsAnEmptyLayout) {
  ExpectInvalid({}, "at least one field");
}

TEST(SampleLayout, RejectsDuplicateNames) {
  ExpectInvalid({{.name = "x", .dtype = DType::kUInt8, .shape = {2}},
                 {.name = "x", .dtype = DType::kInt64, .shape = {}}},
                "'x' appears twice");
}

TEST(SampleLayout, RejectsBadNames) {
  ExpectInvalid({{.name = "", .dtype = DType::kUInt8, .shape = {}}},
                "field name ''");
  ExpectInvalid({{.name = "a-b", .dtype = DType::kUInt8, .shape = {}}},
                "'a-b'");
  ExpectInvalid({{.name = "a b", .dtype = DType::kUInt8, .shape = {}}},
                "'a b'");
  ExpectInvalid({{.name = "é", .dtype = DType::kUInt8, .shape = {}}},
                "[A-Za-z0-9_]");
  EXPECT_TRUE(
      SampleLayout::Create({{.name = "Az_09", .dtype = DType::kUInt8}}).ok());
}

TEST(SampleLayout, RejectsDimensionsBelowOne) {
  ExpectInvalid({{.name = "img", .dtype = DType::kUInt8, .shape = {3, 0, 4}}},
                "'img' has dimension 0");
  ExpectInvalid({{.name = "img", .dtype = DType::kUInt8, .shape = {-2}}},
                "dimension -2");
}

TEST(SampleLayout, RejectsAVariableLengthScalar) {
  ExpectInvalid({{.name = "tokens",
                  .dtype = DType::kInt32,
                  .shape = {},
                  .variable_length = true}},
                "'tokens' needs rank >= 1");
}

TEST(SampleLayout, RejectsMoreThanOneGiBPerSample) {
  // One field past the limit.
  ExpectInvalid(
      {{.name = "big", .dtype = DType::kFloat32, .shape = {1 << 28, 2}}},
      "1 GiB");
  // Fields each under the limit, together over it.
  ExpectInvalid({{.name = "a", .dtype = DType::kUInt8, .shape = {1 << 29}},
                 {.name = "b", .dtype = DType::kUInt8, .shape = {1 << 29}},
                 {.name = "c", .dtype = DType::kUInt8, .shape = {1}}},
                "1 GiB");
  // A shape whose product overflows int64 must not wrap into a small size.
  ExpectInvalid({{.name = "huge",
                  .dtype = DType::kUInt8,
                  .shape = {int64_t{1} << 40, int64_t{1} << 40}}},
                "1 GiB");
  // Exactly 1 GiB is allowed.
  EXPECT_TRUE(
      SampleLayout::Create(
          {{.name = "edge", .dtype = DType::kUInt8, .shape = {1 << 30}}})
          .ok());
}

TEST(SampleLayout, RejectsAFieldClashingWithALengthField) {
  ExpectInvalid({{.name = "tokens",
                  .dtype = DType::kInt32,
                  .shape = {8},
                  .variable_length = true},
                 {.name = "tokens_length", .dtype = DType::kInt64}},
                "tokens_length");
}

TEST(SampleLayout, DescribesItself) {
  absl::StatusOr<SampleLayout> layout = SampleLayout::Create({
      {.name = "image", .dtype = DType::kUInt8, .shape = {3, 224, 224}},
      {.name = "label", .dtype = DType::kInt64, .shape = {}},
      {.name = "tokens",
       .dtype = DType::kInt32,
       .shape = {16},
       .variable_length = true},
  });
  ASSERT_TRUE(layout.ok()) << layout.status();
  EXPECT_EQ(
      layout->ToString(),
      "image u8[3,224,224], label i64[], tokens i32[16] (variable length)");
  EXPECT_EQ(layout->num_fields(), 3);
  EXPECT_EQ(layout->FieldIndex("label"), 1);
  EXPECT_EQ(layout->FieldIndex("nope"), -1);
  EXPECT_EQ(layout->sample_bytes(), 3u * 224 * 224 + 8 + 16 * 4);
  EXPECT_EQ(layout->fields()[0].elements(), 3 * 224 * 224);
  EXPECT_EQ(layout->fields()[1].elements(), 1);
  EXPECT_EQ(layout->fields()[2].bytes(), 64u);
}

TEST(SampleLayout, EqualityComparesFields) {
  std::vector<FieldSpec> fields = {
      {.name = "a", .dtype = DType::kInt16, .shape = {2}}};
  absl::StatusOr<SampleLayout> a = SampleLayout::Create(fields);
  absl::StatusOr<SampleLayout> b = SampleLayout::Create(fields);
  fields[0].shape = {3};
  absl::StatusOr<SampleLayout> c = SampleLayout::Create(fields);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_TRUE(*a == *b);
  EXPECT_FALSE(*a == *c);
}

TEST(DType, NamesRoundTripAndSizesAreRight) {
  struct Case {
    DType dtype;
    const char* name;
    size_t size;
  };
  const Case cases[] = {
      {DType::kBool, "bool", 1},     {DType::kUInt8, "u8", 1},
      {DType::kInt8, "i8", 1},       {DType::kUInt16, "u16", 2},
      {DType::kInt16, "i16", 2},     {DType::kUInt32, "u32", 4},
      {DType::kInt32, "i32", 4},     {DType::kUInt64, "u64", 8},
      {DType::kInt64, "i64", 8},     {DType::kFloat16, "f16", 2},
      {DType::kBFloat16, "bf16", 2}, {DType::kFloat32, "f32", 4},
      {DType::kFloat64, "f64", 8},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(DTypeName(c.dtype), c.name);
    EXPECT_EQ(DTypeSize(c.dtype), c.size) << c.name;
    absl::StatusOr<DType> parsed = ParseDType(c.name);
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(*parsed, c.dtype) << c.name;
  }
  for (const char* bad : {"", "float", "U8", "i128", "u8 "}) {
    absl::StatusOr<DType> parsed = ParseDType(bad);
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument)
        << bad;
  }
}

// image u8[3,5,7] (105 B), label i64[] (8 B), weight f32[3] (12 B).
SampleLayout ThreeFields() {
  absl::StatusOr<SampleLayout> layout = SampleLayout::Create({
      {.name = "image", .dtype = DType::kUInt8, .shape = {3, 5, 7}},
      {.name = "label", .dtype = DType::kInt64, .shape = {}},
      {.name = "weight", .dtype = DType::kFloat32, .shape = {3}},
  });
  EXPECT_TRUE(layout.ok()) << layout.status();
  return *layout;
}

TEST(BatchLayout, RejectsBatchSizeBelowOne) {
  EXPECT_EQ(BatchLayout::Create(ThreeFields(), 0).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(BatchLayout::Create(ThreeFields(), -3).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(BatchLayout::Create(SampleLayout(), 4).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(BatchLayout, RejectsBatchesOverSixtyFourGiB) {
  absl::StatusOr<SampleLayout> big = SampleLayout::Create(
      {{.name = "x", .dtype = DType::kUInt8, .shape = {1 << 30}}});
  ASSERT_TRUE(big.ok());
  absl::StatusOr<BatchLayout> batch = BatchLayout::Create(*big, 65);
  EXPECT_EQ(batch.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(batch.status().message()), HasSubstr("64 GiB"));
  EXPECT_EQ(
      BatchLayout::Create(ThreeFields(), int64_t{1} << 62).status().code(),
      absl::StatusCode::kInvalidArgument);
}

TEST(BatchLayout, FieldsAreFieldMajorAndAligned) {
  constexpr int64_t kBatch = 10;
  absl::StatusOr<BatchLayout> batch =
      BatchLayout::Create(ThreeFields(), kBatch);
  ASSERT_TRUE(batch.ok()) << batch.status();
  EXPECT_EQ(batch->batch_size(), kBatch);
  ASSERT_EQ(batch->num_fields(), 3);
  // image: 1050 B at 0; label: 80 B at 1280; weight: 120 B at 1536.
  EXPECT_EQ(batch->field_offset(0), 0u);
  EXPECT_EQ(batch->field_offset(1), 1280u);
  EXPECT_EQ(batch->field_offset(2), 1536u);
  EXPECT_EQ(batch->slot_bytes(), 1792u);
  for (int f = 0; f < batch->num_fields(); ++f) {
    EXPECT_EQ(batch->field_offset(f) % BatchLayout::kFieldAlignment, 0u);
    if (f > 0) {
      EXPECT_GE(
          batch->field_offset(f),
          batch->field_offset(f - 1) + batch->fields()[f - 1].bytes() * kBatch)
          << "field " << f << " overlaps the one before";
    }
    EXPECT_EQ(batch->length_field(f), -1);
  }
  EXPECT_EQ(batch->slot_bytes() % BatchLayout::kFieldAlignment, 0u);
  EXPECT_GE(batch->slot_bytes(), batch->field_offset(2) + 12u * kBatch);
  EXPECT_TRUE(batch->sample() == ThreeFields());
}

TEST(BatchLayout, CopyBytesEndsAtTheLastSampleOfTheLastField) {
  absl::StatusOr<BatchLayout> batch = BatchLayout::Create(ThreeFields(), 10);
  ASSERT_TRUE(batch.ok());
  EXPECT_EQ(batch->CopyBytes(10), 1536u + 120u);
  EXPECT_EQ(batch->CopyBytes(3), 1536u + 36u);  // partial batch
  EXPECT_EQ(batch->CopyBytes(1), 1536u + 12u);
  EXPECT_LE(batch->CopyBytes(10), batch->slot_bytes());
}

TEST(BatchLayout, VariableLengthFieldsGetAnInt64LengthField) {
  absl::StatusOr<SampleLayout> sample = SampleLayout::Create({
      {.name = "tokens",
       .dtype = DType::kInt32,
       .shape = {7},
       .variable_length = true},
      {.name = "label", .dtype = DType::kUInt8, .shape = {}},
      {.name = "audio",
       .dtype = DType::kFloat16,
       .shape = {5, 2},
       .variable_length = true},
  });
  ASSERT_TRUE(sample.ok()) << sample.status();
  absl::StatusOr<BatchLayout> batch = BatchLayout::Create(*sample, 4);
  ASSERT_TRUE(batch.ok()) << batch.status();
  ASSERT_EQ(batch->num_fields(), 5);
  EXPECT_EQ(batch->length_field(0), 3);
  EXPECT_EQ(batch->length_field(1), -1);
  EXPECT_EQ(batch->length_field(2), 4);
  const FieldSpec& tokens_length = batch->fields()[3];
  EXPECT_EQ(tokens_length.name, "tokens_length");
  EXPECT_EQ(tokens_length.dtype, DType::kInt64);
  EXPECT_TRUE(tokens_length.shape.empty());
  EXPECT_FALSE(tokens_length.variable_length);
  EXPECT_EQ(batch->fields()[4].name, "audio_length");
  // The sample layout itself is unchanged.
  EXPECT_EQ(batch->sample().num_fields(), 3);
  // Offsets: tokens 112 B @0, label 4 B @256, audio 80 B @512,
  // tokens_length 32 B @768, audio_length 32 B @1024.
  EXPECT_EQ(batch->field_offset(3), 768u);
  EXPECT_EQ(batch->field_offset(4), 1024u);
  EXPECT_EQ(batch->slot_bytes(), 1280u);
  EXPECT_EQ(batch->CopyBytes(2), 1024u + 16u);
}

}  // namespace
}  // namespace pinwheel
