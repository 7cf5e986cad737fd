#include "loader/in_memory_dataset.h"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include "loader/dataset.h"
#include "transfer/sample_layout.h"

namespace pinwheel {
namespace {

using ::testing::HasSubstr;

SampleLayout ImageLabelLayout() {
  absl::StatusOr<SampleLayout> layout = SampleLayout::Create(
      {{.name = "image", .dtype = DType::kUInt8, .shape = {2, 3}},
       {.name = "label", .dtype = DType::kInt64, .shape = {}}});
  EXPECT_TRUE(layout.ok()) << layout.status();
  return *layout;
}

template <typename T>
absl::Span<const std::byte> Bytes(const std::vector<T>& v) {
  return absl::Span<const std::byte>(
      reinterpret_cast<const std::byte*>(v.data()), v.size() * sizeof(T));
}

struct Arrays {
  std::vector<uint8_t> images;
  std::vector<int64_t> labels;
};

Arrays MakeArrays(int64_t n) {
  Arrays a;
  for (int64_t i = 0; i < n * 6; ++i) a.images.push_back(uint8_t(i * 7 + 1));
  for (int64_t i = 0; i < n; ++i) a.labels.push_back(-1000 * i - 3);
  return a;
}

TEST(InMemoryDataset, ReadsEachSampleIntoItsPlaceInTheBatch) {
  const int64_t n = 5;
  Arrays a = MakeArrays(n);
  absl::StatusOr<std::shared_ptr<InMemoryDataset>> ds = InMemoryDataset::Create(
      ImageLabelLayout(), n, {Bytes(a.images), Bytes(a.labels)});
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_EQ((*ds)->size(), n);

  absl::StatusOr<BatchLayout> batch = BatchLayout::Create((*ds)->layout(), 3);
  ASSERT_TRUE(batch.ok()) << batch.status();
  std::vector<std::byte> slot(batch->slot_bytes(), std::byte{0xAB});
  const int64_t indices[3] = {4, 0, 2};
  for (int64_t position = 0; position < 3; ++position) {
    SampleView view(*batch, slot.data(), position, indices[position]);
    ASSERT_TRUE((*ds)->Read(indices[position], view).ok());
  }
  for (int64_t position = 0; position < 3; ++position) {
    const int64_t i = indices[position];
    EXPECT_EQ(std::memcmp(slot.data() + batch->field_offset(0) + position * 6,
                          a.images.data() + i * 6, 6),
              0)
        << "image of position " << position;
    int64_t label = 0;
    std::memcpy(&label, slot.data() + batch->field_offset(1) + position * 8, 8);
    EXPECT_EQ(label, a.labels[i]) << "label of position " << position;
  }
}

TEST(InMemoryDataset, OwningDatasetOutlivesTheCallersArrays) {
  std::shared_ptr<InMemoryDataset> ds;
  std::vector<int64_t> expected_labels;
  {
    Arrays a = MakeArrays(4);
    expected_labels = a.labels;
    const absl::Span<const std::byte> images = Bytes(a.images);
    const absl::Span<const std::byte> labels = Bytes(a.labels);
    std::vector<std::vector<std::byte>> owned = {
        {images.begin(), images.end()}, {labels.begin(), labels.end()}};
    absl::StatusOr<std::shared_ptr<InMemoryDataset>> created =
        InMemoryDataset::CreateOwning(ImageLabelLayout(), 4, std::move(owned));
    ASSERT_TRUE(created.ok()) << created.status();
    ds = *created;
  }
  absl::StatusOr<BatchLayout> batch = BatchLayout::Create(ds->layout(), 1);
  ASSERT_TRUE(batch.ok());
  std::vector<std::byte> slot(batch->slot_bytes());
  for (int64_t i = 0; i < 4; ++i) {
    SampleView view(*batch, slot.data(), 0, i);
    ASSERT_TRUE(ds->Read(i, view).ok());
    EXPECT_EQ(view.field_as<int64_t>(1)[0], expected_labels[i]);
  }
}

TEST(InMemoryDataset, RejectsSpanOfWrongSizeNamingFieldAndBothSizes) {
  Arrays a = MakeArrays(5);
  a.labels.pop_back();  // 4 labels for 5 samples: 32 bytes, want 40.
  absl::StatusOr<std::shared_ptr<InMemoryDataset>> ds = InMemoryDataset::Create(
      ImageLabelLayout(), 5, {Bytes(a.images), Bytes(a.labels)});
  ASSERT_FALSE(ds.ok());
  EXPECT_EQ(ds.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(ds.status().message(), HasSubstr("label"));
  EXPECT_THAT(ds.status().message(), HasSubstr("32"));
  EXPECT_THAT(ds.status().message(), HasSubstr("40"));
}

TEST(InMemoryDataset, RejectsOwnedArrayOfWrongSize) {
  std::vector<std::vector<std::byte>> owned = {
      std::vector<std::byte>(6 * 2), std::vector<std::byte>(8 * 2 + 1)};
  absl::StatusOr<std::shared_ptr<InMemoryDataset>> ds =
      InMemoryDataset::CreateOwning(ImageLabelLayout(), 2, std::move(owned));
  ASSERT_FALSE(ds.ok());
  EXPECT_EQ(ds.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(ds.status().message(), HasSubstr("17"));
}

TEST(InMemoryDataset, RejectsWrongNumberOfSpans) {
  Arrays a = MakeArrays(2);
  absl::StatusOr<std::shared_ptr<InMemoryDataset>> ds =
      InMemoryDataset::Create(ImageLabelLayout(), 2, {Bytes(a.images)});
  ASSERT_FALSE(ds.ok());
  EXPECT_EQ(ds.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(ds.status().message(), HasSubstr("1 arrays"));
}

TEST(InMemoryDataset, RejectsNegativeSize) {
  absl::StatusOr<std::shared_ptr<InMemoryDataset>> ds =
      InMemoryDataset::Create(ImageLabelLayout(), -1, {{}, {}});
  ASSERT_FALSE(ds.ok());
  EXPECT_EQ(ds.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(InMemoryDataset,
     ASizeOf2To40OrInt64MaxIsCheckedWithoutOverflowOrAllocation) {
  // Issue 9: a dataset reporting 2^40 samples must not abort. Arrays that
  // small for that size are InvalidArgument naming both sizes; a size whose
  // arrays would not fit size_t says so instead of wrapping around.
  std::vector<std::byte> small(16);
  absl::StatusOr<std::shared_ptr<InMemoryDataset>> ds = InMemoryDataset::Create(
      ImageLabelLayout(), int64_t{1} << 40,
      {absl::MakeConstSpan(small), absl::MakeConstSpan(small)});
  ASSERT_FALSE(ds.ok());
  EXPECT_EQ(ds.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(ds.status().message(), HasSubstr("1099511627776 samples"));
  EXPECT_THAT(ds.status().message(), HasSubstr("has 16 bytes"));

  ds = InMemoryDataset::Create(
      ImageLabelLayout(), std::numeric_limits<int64_t>::max(),
      {absl::MakeConstSpan(small), absl::MakeConstSpan(small)});
  ASSERT_FALSE(ds.ok());
  EXPECT_EQ(ds.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(ds.status().message(), HasSubstr("overflow size_t"));
}

TEST(InMemoryDataset, RejectsVariableLengthLayout) {
  absl::StatusOr<SampleLayout> layout =
      SampleLayout::Create({{.name = "tokens",
                             .dtype = DType::kInt32,
                             .shape = {8},
                             .variable_length = true}});
  ASSERT_TRUE(layout.ok()) << layout.status();
  std::vector<int32_t> tokens(8 * 3);
  absl::StatusOr<std::shared_ptr<InMemoryDataset>> ds =
      InMemoryDataset::Create(*layout, 3, {Bytes(tokens)});
  ASSERT_FALSE(ds.ok());
  EXPECT_EQ(ds.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(ds.status().message(), HasSubstr("variable-length"));
}

TEST(InMemoryDataset, RejectsLayoutWithoutFields) {
  absl::StatusOr<std::shared_ptr<InMemoryDataset>> ds =
      InMemoryDataset::Create(SampleLayout(), 0, {});
  ASSERT_FALSE(ds.ok());
  EXPECT_EQ(ds.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(InMemoryDataset, AcceptsAnEmptyDataset) {
  absl::StatusOr<std::shared_ptr<InMemoryDataset>> ds =
      InMemoryDataset::Create(ImageLabelLayout(), 0, {{}, {}});
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_EQ((*ds)->size(), 0);
}

TEST(InMemoryDataset, ReadReportsAnIndexOutOfRange) {
  Arrays a = MakeArrays(2);
  absl::StatusOr<std::shared_ptr<InMemoryDataset>> ds = InMemoryDataset::Create(
      ImageLabelLayout(), 2, {Bytes(a.images), Bytes(a.labels)});
  ASSERT_TRUE(ds.ok());
  absl::StatusOr<BatchLayout> batch = BatchLayout::Create((*ds)->layout(), 1);
  ASSERT_TRUE(batch.ok());
  std::vector<std::byte> slot(batch->slot_bytes());
  SampleView view(*batch, slot.data(), 0, 2);
  absl::Status status = (*ds)->Read(2, view);
  EXPECT_EQ(status.code(), absl::StatusCode::kOutOfRange);
  EXPECT_THAT(status.message(), HasSubstr("index 2"));
}

TEST(InMemoryDataset, ReadRejectsAViewOfAnotherLayout) {
  Arrays a = MakeArrays(2);
  absl::StatusOr<std::shared_ptr<InMemoryDataset>> ds = InMemoryDataset::Create(
      ImageLabelLayout(), 2, {Bytes(a.images), Bytes(a.labels)});
  ASSERT_TRUE(ds.ok());
  absl::StatusOr<SampleLayout> other = SampleLayout::Create(
      {{.name = "image", .dtype = DType::kUInt8, .shape = {2}},
       {.name = "label", .dtype = DType::kInt64, .shape = {}}});
  ASSERT_TRUE(other.ok());
  absl::StatusOr<BatchLayout> batch = BatchLayout::Create(*other, 1);
  ASSERT_TRUE(batch.ok());
  std::vector<std::byte> slot(batch->slot_bytes());
  SampleView view(*batch, slot.data(), 0, 0);
  EXPECT_EQ((*ds)->Read(0, view).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace pinwheel
