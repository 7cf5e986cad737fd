// SampleView: where one sample's fields go inside a batch slot.
#include "loader/dataset.h"

#include <cstring>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <vector>

#include "transfer/sample_layout.h"

namespace pinwheel {
namespace {

using ::testing::HasSubstr;

SampleLayout ImageAndTokens() {
  return *SampleLayout::Create({
      {.name = "image", .dtype = DType::kUInt8, .shape = {3, 5}},
      {.name = "tokens",
       .dtype = DType::kInt32,
       .shape = {7},
       .variable_length = true},
  });
}

TEST(SampleView, FieldsPointIntoTheSlotFieldMajor) {
  const BatchLayout layout = *BatchLayout::Create(ImageAndTokens(), 4);
  std::vector<std::byte> slot(layout.slot_bytes());
  SampleView view(layout, slot.data(), /*position=*/2, /*index=*/99);
  EXPECT_EQ(view.index(), 99);
  absl::Span<std::byte> image = view.field(0);
  EXPECT_EQ(image.size(), 15u);
  EXPECT_EQ(image.data(), slot.data() + layout.field_offset(0) + 2 * 15);
  absl::Span<int32_t> tokens = view.field_as<int32_t>(1);
  EXPECT_EQ(tokens.size(), 7u);
  EXPECT_EQ(reinterpret_cast<std::byte*>(tokens.data()),
            slot.data() + layout.field_offset(1) + 2 * 28);
}

TEST(SampleView, FieldByNameFindsItOrSaysWhichExist) {
  const BatchLayout layout = *BatchLayout::Create(ImageAndTokens(), 2);
  std::vector<std::byte> slot(layout.slot_bytes());
  SampleView view(layout, slot.data(), 1, 5);
  absl::StatusOr<absl::Span<std::byte>> tokens = view.field("tokens");
  ASSERT_TRUE(tokens.ok());
  EXPECT_EQ(tokens->data(), view.field(1).data());
  absl::StatusOr<absl::Span<std::byte>> missing = view.field("label");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(missing.status().message()),
              HasSubstr("image u8[3,5]"));
}

TEST(SampleView, FieldAsATypeOfAnotherSizeIsEmptyAndRecordedInStatus) {
  const BatchLayout layout = *BatchLayout::Create(ImageAndTokens(), 2);
  std::vector<std::byte> slot(layout.slot_bytes());
  SampleView view(layout, slot.data(), 1, 5);
  EXPECT_TRUE(view.field_as<double>(1).empty());  // tokens is i32
  EXPECT_EQ(view.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(view.status().message()),
              HasSubstr("field 'tokens' is i32 (4 bytes an element), read as "
                        "a type of 8 bytes"));
  // A type of the right size reads as before.
  SampleView fresh(layout, slot.data(), 1, 5);
  EXPECT_EQ(fresh.field_as<float>(1).size(), 7u);
  EXPECT_EQ(fresh.field_as<uint8_t>(0).size(), 15u);
  EXPECT_TRUE(fresh.status().ok()) << fresh.status();
}

TEST(SampleView, LengthOfAVariableFieldLandsInItsLengthField) {
  const BatchLayout layout = *BatchLayout::Create(ImageAndTokens(), 3);
  std::vector<std::byte> slot(layout.slot_bytes());
  SampleView view(layout, slot.data(), 1, 0);
  view.set_length(1, 4);
  EXPECT_EQ(view.length(1), 4);
  const int length_field = layout.length_field(1);
  ASSERT_GE(length_field, 0);
  int64_t stored = 0;
  std::memcpy(&stored, slot.data() + layout.field_offset(length_field) + 8,
              sizeof(stored));
  EXPECT_EQ(stored, 4);
}

TEST(SampleView, SamplesOfOneBatchDoNotOverlap) {
  const BatchLayout layout = *BatchLayout::Create(ImageAndTokens(), 3);
  std::vector<std::byte> slot(layout.slot_bytes());
  for (int p = 0; p < 3; ++p) {
    SampleView view(layout, slot.data(), p, p);
    std::memset(view.field(0).data(), p + 1, view.field(0).size());
  }
  for (int p = 0; p < 3; ++p) {
    SampleView view(layout, slot.data(), p, p);
    for (std::byte b : view.field(0)) ASSERT_EQ(b, std::byte(p + 1));
  }
}

}  // namespace
}  // namespace pinwheel
