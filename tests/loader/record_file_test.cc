#include "loader/record_file.h"

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <sys/resource.h>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include "loader/dataset.h"
#include "tests/support/read_while_truncating.h"
#include "transfer/sample_layout.h"

namespace pinwheel {
namespace {

using ::testing::HasSubstr;
using testing_support::ReadWhileTruncating;

// Byte offsets of the header's fixed part and of the first field (see
// record_file.h).
constexpr size_t kVersionOffset = 8;
constexpr size_t kHeaderBytesOffset = 12;
constexpr size_t kCountOffset = 16;
constexpr size_t kRecordBytesOffset = 24;
constexpr size_t kNumFieldsOffset = 32;
constexpr size_t kFirstFieldOffset = 36;

// image u8[3,4,5] (60 bytes), label i64[] (8), weight f32[2] (8): 76 bytes.
SampleLayout TestLayout() {
  absl::StatusOr<SampleLayout> layout = SampleLayout::Create(
      {{.name = "image", .dtype = DType::kUInt8, .shape = {3, 4, 5}},
       {.name = "label", .dtype = DType::kInt64, .shape = {}},
       {.name = "weight", .dtype = DType::kFloat32, .shape = {2}}});
  EXPECT_TRUE(layout.ok()) << layout.status();
  return *layout;
}
constexpr size_t kTestRecordBytes = 76;

std::string TempPath(const std::string& name) {
  return absl::StrCat(::testing::TempDir(), "/record_file_test_", getpid(), "_",
                      name);
}

// Record `i`'s bytes: a pattern that differs per record and per byte.
std::vector<std::byte> RecordBytes(uint64_t i) {
  std::vector<std::byte> record(kTestRecordBytes);
  for (size_t b = 0; b < record.size(); ++b) {
    record[b] = static_cast<std::byte>((i * 131 + b * 7 + 1) & 0xFF);
  }
  return record;
}

std::vector<std::byte> ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> chars((std::istreambuf_iterator<char>(in)),
                          std::istreambuf_iterator<char>());
  std::vector<std::byte> bytes(chars.size());
  std::memcpy(bytes.data(), chars.data(), chars.size());
  return bytes;
}

void WriteAll(const std::string& path, const std::vector<std::byte>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << path;
}

template <typename T>
void Poke(std::vector<std::byte>& bytes, size_t offset, T value) {
  ASSERT_LE(offset + sizeof(T), bytes.size());
  std::memcpy(bytes.data() + offset, &value, sizeof(T));
}

// Names of the files in TempDir() that start with `prefix`.
std::vector<std::string> FilesStartingWith(const std::string& prefix) {
  std::vector<std::string> names;
  DIR* dir = ::opendir(::testing::TempDir().c_str());
  if (dir == nullptr) return names;
  while (const dirent* entry = ::readdir(dir)) {
    const std::string name = entry->d_name;
    if (name.rfind(prefix, 0) == 0) names.push_back(name);
  }
  ::closedir(dir);
  return names;
}

// Writes a valid file of `count` records with the writer and returns its
// bytes.
std::vector<std::byte> WriteValidFile(const std::string& path, uint64_t count) {
  absl::StatusOr<RecordFileWriter> writer =
      RecordFileWriter::Create(path, TestLayout());
  EXPECT_TRUE(writer.ok()) << writer.status();
  for (uint64_t i = 0; i < count; ++i) {
    EXPECT_TRUE(writer->AppendRaw(RecordBytes(i)).ok());
  }
  EXPECT_TRUE(writer->Close().ok());
  return ReadAll(path);
}

// Writes `bytes` as a file and returns what Open() says about it.
absl::Status OpenStatus(const std::string& path,
                        const std::vector<std::byte>& bytes) {
  WriteAll(path, bytes);
  return RecordFileDataset::Open(path).status();
}

TEST(RecordFile, RoundTripsWriterToDatasetBitExact) {
  const std::string path = TempPath("round_trip.pwr");
  const SampleLayout layout = TestLayout();
  {
    absl::StatusOr<RecordFileWriter> writer =
        RecordFileWriter::Create(path, layout);
    ASSERT_TRUE(writer.ok()) << writer.status();
    for (uint64_t i = 0; i < 10; ++i) {
      const std::vector<std::byte> record = RecordBytes(i);
      const absl::Span<const std::byte> all(record);
      // Even records per field, odd ones raw: both give the same bytes.
      if (i % 2 == 0) {
        ASSERT_TRUE(writer
                        ->Append({all.subspan(0, 60), all.subspan(60, 8),
                                  all.subspan(68, 8)})
                        .ok());
      } else {
        ASSERT_TRUE(writer->AppendRaw(all).ok());
      }
    }
    EXPECT_EQ(writer->count(), 10u);
    ASSERT_TRUE(writer->Close().ok());
  }

  absl::StatusOr<std::shared_ptr<RecordFileDataset>> ds =
      RecordFileDataset::Open(path);
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_EQ((*ds)->size(), 10);
  EXPECT_EQ((*ds)->layout(), layout);
  EXPECT_EQ((*ds)->path(), path);

  // A batch of 4 gathers records 9, 0, 5, 2 field-major.
  absl::StatusOr<BatchLayout> batch = BatchLayout::Create(layout, 4);
  ASSERT_TRUE(batch.ok()) << batch.status();
  std::vector<std::byte> slot(batch->slot_bytes());
  const int64_t indices[4] = {9, 0, 5, 2};
  for (int64_t position = 0; position < 4; ++position) {
    SampleView view(*batch, slot.data(), position, indices[position]);
    ASSERT_TRUE((*ds)->Read(indices[position], view).ok());
  }
  const size_t field_record_offset[3] = {0, 60, 68};
  const size_t field_bytes[3] = {60, 8, 8};
  for (int64_t position = 0; position < 4; ++position) {
    const std::vector<std::byte> want = RecordBytes(indices[position]);
    for (int f = 0; f < 3; ++f) {
      EXPECT_EQ(
          std::memcmp(
              slot.data() + batch->field_offset(f) + position * field_bytes[f],
              want.data() + field_record_offset[f], field_bytes[f]),
          0)
          << "field " << f << " of position " << position;
    }
  }
  for (int64_t i = 0; i < 10; ++i) {
    const absl::Span<const std::byte> record = (*ds)->record(i);
    const std::vector<std::byte> want = RecordBytes(i);
    ASSERT_EQ(record.size(), want.size());
    EXPECT_EQ(std::memcmp(record.data(), want.data(), want.size()), 0);
  }
  std::remove(path.c_str());
}

TEST(RecordFile, SerializedHeaderParsesBackToTheSameLayout) {
  const SampleLayout layout = TestLayout();
  const std::vector<std::byte> header = SerializeRecordFileHeader(layout, 3);
  EXPECT_EQ(header.size() % 64, 0u);
  absl::StatusOr<RecordFileHeader> parsed =
      ParseRecordFileHeader(header, header.size() + 3 * kTestRecordBytes);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->layout, layout);
  EXPECT_EQ(parsed->count, 3u);
  EXPECT_EQ(parsed->record_bytes, kTestRecordBytes);
  EXPECT_EQ(parsed->header_bytes, header.size());
}

TEST(RecordFile, ParseRejectsEveryTruncatedPrefixOfAValidHeader) {
  const std::vector<std::byte> header =
      SerializeRecordFileHeader(TestLayout(), 1);
  for (size_t n = 0; n < header.size(); ++n) {
    // An exact-size copy, so that a read past it trips AddressSanitizer.
    const std::vector<std::byte> prefix(header.begin(), header.begin() + n);
    absl::StatusOr<RecordFileHeader> parsed =
        ParseRecordFileHeader(prefix, header.size() + kTestRecordBytes);
    ASSERT_FALSE(parsed.ok()) << "prefix of " << n << " bytes";
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kDataLoss)
        << parsed.status();
    EXPECT_THAT(parsed.status().message(), HasSubstr("truncated"));
  }
}

TEST(RecordFile, RejectsNonExistentPath) {
  const std::string path = TempPath("does_not_exist.pwr");
  absl::StatusOr<std::shared_ptr<RecordFileDataset>> ds =
      RecordFileDataset::Open(path);
  ASSERT_FALSE(ds.ok());
  EXPECT_EQ(ds.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(ds.status().message(), HasSubstr(path));
}

TEST(RecordFile, RejectsADirectory) {
  absl::Status status = RecordFileDataset::Open(::testing::TempDir()).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
}

TEST(RecordFile, RejectsEmptyFile) {
  const std::string path = TempPath("empty.pwr");
  absl::Status status = OpenStatus(path, {});
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(status.message(), HasSubstr(path));
  EXPECT_THAT(status.message(), HasSubstr("truncated"));
  std::remove(path.c_str());
}

TEST(RecordFile, RejectsTruncatedHeader) {
  const std::string path = TempPath("truncated_header.pwr");
  std::vector<std::byte> bytes = WriteValidFile(path, 2);
  bytes.resize(20);
  absl::Status status = OpenStatus(path, bytes);
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(status.message(), HasSubstr("truncated header"));
  EXPECT_THAT(status.message(), HasSubstr("20 bytes"));
  std::remove(path.c_str());
}

TEST(RecordFile, RejectsFileTruncatedInsideTheFields) {
  const std::string path = TempPath("truncated_fields.pwr");
  std::vector<std::byte> bytes = WriteValidFile(path, 2);
  bytes.resize(kFirstFieldOffset + 5);
  absl::Status status = OpenStatus(path, bytes);
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(status.message(), HasSubstr("truncated"));
  std::remove(path.c_str());
}

TEST(RecordFile, RejectsWrongMagic) {
  const std::string path = TempPath("wrong_magic.pwr");
  std::vector<std::byte> bytes = WriteValidFile(path, 2);
  bytes[3] = std::byte{'X'};
  absl::Status status = OpenStatus(path, bytes);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("magic"));
  EXPECT_THAT(status.message(), HasSubstr(path));
  std::remove(path.c_str());
}

TEST(RecordFile, RejectsWrongVersion) {
  const std::string path = TempPath("wrong_version.pwr");
  std::vector<std::byte> bytes = WriteValidFile(path, 2);
  Poke<uint32_t>(bytes, kVersionOffset, 2);
  absl::Status status = OpenStatus(path, bytes);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("version 2"));
  EXPECT_THAT(status.message(), HasSubstr("byte offset 8"));
  std::remove(path.c_str());
}

TEST(RecordFile, RejectsFileLongerThanTheHeaderSays) {
  const std::string path = TempPath("longer.pwr");
  std::vector<std::byte> bytes = WriteValidFile(path, 2);
  const size_t size = bytes.size();
  bytes.push_back(std::byte{0});
  absl::Status status = OpenStatus(path, bytes);
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(status.message(),
              HasSubstr(absl::StrCat("file size ", size + 1)));
  std::remove(path.c_str());
}

TEST(RecordFile, RejectsFileWithATruncatedLastRecord) {
  const std::string path = TempPath("short.pwr");
  std::vector<std::byte> bytes = WriteValidFile(path, 3);
  bytes.resize(bytes.size() - 1);
  absl::Status status = OpenStatus(path, bytes);
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(status.message(), HasSubstr("disagrees with the header"));
  std::remove(path.c_str());
}

TEST(RecordFile, RejectsCountThatOverflowsTheFileSize) {
  const std::string path = TempPath("huge_count.pwr");
  std::vector<std::byte> bytes = WriteValidFile(path, 1);
  Poke<uint64_t>(bytes, kCountOffset, ~uint64_t{0} / 8);
  absl::Status status = OpenStatus(path, bytes);
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(status.message(), HasSubstr("disagrees with the header"));
  std::remove(path.c_str());
}

TEST(RecordFile, RejectsZeroRecords) {
  const std::string path = TempPath("zero.pwr");
  WriteValidFile(path, 0);
  absl::Status status = RecordFileDataset::Open(path).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(status.message(), HasSubstr("zero records"));
  std::remove(path.c_str());
}

TEST(RecordFile, RejectsRecordBytesThatDisagreeWithTheLayout) {
  const std::string path = TempPath("record_bytes.pwr");
  std::vector<std::byte> bytes = WriteValidFile(path, 2);
  Poke<uint64_t>(bytes, kRecordBytesOffset, kTestRecordBytes + 1);
  absl::Status status = OpenStatus(path, bytes);
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(status.message(), HasSubstr("record bytes 77"));
  EXPECT_THAT(status.message(), HasSubstr("sample bytes 76"));
  std::remove(path.c_str());
}

TEST(RecordFile, RejectsAbsurdFieldCount) {
  const std::string path = TempPath("field_count.pwr");
  std::vector<std::byte> bytes = WriteValidFile(path, 2);
  Poke<uint32_t>(bytes, kNumFieldsOffset, 1'000'000'000);
  absl::Status status = OpenStatus(path, bytes);
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(status.message(), HasSubstr("field count 1000000000"));
  std::remove(path.c_str());
}

TEST(RecordFile, RejectsZeroFields) {
  const std::string path = TempPath("no_fields.pwr");
  std::vector<std::byte> bytes = WriteValidFile(path, 2);
  Poke<uint32_t>(bytes, kNumFieldsOffset, 0);
  absl::Status status = OpenStatus(path, bytes);
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(status.message(), HasSubstr("field count 0"));
  std::remove(path.c_str());
}

TEST(RecordFile, RejectsAbsurdNameLength) {
  const std::string path = TempPath("name_length.pwr");
  std::vector<std::byte> bytes = WriteValidFile(path, 2);
  Poke<uint16_t>(bytes, kFirstFieldOffset, 60000);
  absl::Status status = OpenStatus(path, bytes);
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(status.message(), HasSubstr("field 0 at byte offset 36"));
  EXPECT_THAT(status.message(), HasSubstr("name length 60000"));
  std::remove(path.c_str());
}

TEST(RecordFile, RejectsNameLengthRunningPastTheHeader) {
  const std::string path = TempPath("name_past_header.pwr");
  std::vector<std::byte> bytes = WriteValidFile(path, 2);
  Poke<uint16_t>(bytes, kFirstFieldOffset, 200);  // The header is 128 bytes.
  absl::Status status = OpenStatus(path, bytes);
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(status.message(), HasSubstr("truncated header"));
  std::remove(path.c_str());
}

TEST(RecordFile, RejectsInvalidFieldName) {
  const std::string path = TempPath("bad_name.pwr");
  std::vector<std::byte> bytes = WriteValidFile(path, 2);
  bytes[kFirstFieldOffset + 2] = std::byte{'!'};  // "!mage"
  absl::Status status = OpenStatus(path, bytes);
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(status.message(), HasSubstr("not a valid layout"));
  std::remove(path.c_str());
}

TEST(RecordFile, RejectsUnknownDType) {
  const std::string path = TempPath("dtype.pwr");
  std::vector<std::byte> bytes = WriteValidFile(path, 2);
  // Field 0 is "image": name_len u16, 5 name bytes, then the dtype.
  bytes[kFirstFieldOffset + 2 + 5] = std::byte{200};
  absl::Status status = OpenStatus(path, bytes);
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(status.message(), HasSubstr("dtype 200 at byte offset 43"));
  std::remove(path.c_str());
}

TEST(RecordFile, RejectsAbsurdRank) {
  const std::string path = TempPath("rank.pwr");
  std::vector<std::byte> bytes = WriteValidFile(path, 2);
  bytes[kFirstFieldOffset + 2 + 5 + 1] = std::byte{250};
  absl::Status status = OpenStatus(path, bytes);
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(status.message(), HasSubstr("rank 250 at byte offset 44"));
  std::remove(path.c_str());
}

TEST(RecordFile, RejectsNonPositiveAndHugeDims) {
  const std::string path = TempPath("dims.pwr");
  const std::vector<std::byte> valid = WriteValidFile(path, 2);
  const size_t first_dim = kFirstFieldOffset + 2 + 5 + 2;
  for (int64_t dim :
       {int64_t{0}, int64_t{-3}, int64_t{1} << 40, int64_t{1} << 62}) {
    std::vector<std::byte> bytes = valid;
    Poke<int64_t>(bytes, first_dim, dim);
    absl::Status status = OpenStatus(path, bytes);
    EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << dim;
    EXPECT_THAT(status.message(), HasSubstr(absl::StrCat("dim 0 = ", dim)));
  }
  // Three dims of 2048: each fine alone, their product (8 GiB) is not.
  std::vector<std::byte> bytes = valid;
  for (int d = 0; d < 3; ++d) {
    Poke<int64_t>(bytes, first_dim + 8 * d, 2048);
  }
  absl::Status status = OpenStatus(path, bytes);
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(status.message(), HasSubstr("dim 2"));
  std::remove(path.c_str());
}

TEST(RecordFile, RejectsHeaderBytesThatAreNotAMultipleOf64) {
  const std::string path = TempPath("header_align.pwr");
  std::vector<std::byte> bytes = WriteValidFile(path, 2);
  Poke<uint32_t>(bytes, kHeaderBytesOffset, 100);
  absl::Status status = OpenStatus(path, bytes);
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(status.message(), HasSubstr("header bytes 100"));
  std::remove(path.c_str());
}

TEST(RecordFile, RejectsHeaderBytesBeyondTheFile) {
  const std::string path = TempPath("header_beyond.pwr");
  std::vector<std::byte> bytes = WriteValidFile(path, 2);
  Poke<uint32_t>(bytes, kHeaderBytesOffset, 1 << 20);
  absl::Status status = OpenStatus(path, bytes);
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(status.message(), HasSubstr("truncated file"));
  std::remove(path.c_str());
}

TEST(RecordFile, RejectsNonZeroHeaderPadding) {
  const std::string path = TempPath("padding.pwr");
  std::vector<std::byte> bytes = WriteValidFile(path, 2);
  uint32_t header_bytes = 0;
  std::memcpy(&header_bytes, bytes.data() + kHeaderBytesOffset, 4);
  bytes[header_bytes - 1] = std::byte{1};
  absl::Status status = OpenStatus(path, bytes);
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(
      status.message(),
      HasSubstr(absl::StrCat("padding at byte offset ", header_bytes - 1)));
  std::remove(path.c_str());
}

TEST(RecordFileWriter, RejectsFieldOfWrongSizeNamingFieldAndBothSizes) {
  const std::string path = TempPath("writer_field_size.pwr");
  absl::StatusOr<RecordFileWriter> writer =
      RecordFileWriter::Create(path, TestLayout());
  ASSERT_TRUE(writer.ok());
  const std::vector<std::byte> record = RecordBytes(0);
  const absl::Span<const std::byte> all(record);
  absl::Status status = writer->Append(
      {all.subspan(0, 60), all.subspan(60, 4), all.subspan(68, 8)});
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("label"));
  EXPECT_THAT(status.message(), HasSubstr("4 bytes"));
  EXPECT_THAT(status.message(), HasSubstr("wants 8"));
  EXPECT_EQ(writer->count(), 0u);
  EXPECT_EQ(writer->Append({all.subspan(0, 60)}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(writer->AppendRaw(all.subspan(1)).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(writer->Close().ok());
  std::remove(path.c_str());
}

TEST(RecordFileWriter, RejectsVariableLengthLayout) {
  absl::StatusOr<SampleLayout> layout =
      SampleLayout::Create({{.name = "tokens",
                             .dtype = DType::kInt32,
                             .shape = {16},
                             .variable_length = true}});
  ASSERT_TRUE(layout.ok()) << layout.status();
  absl::StatusOr<RecordFileWriter> writer =
      RecordFileWriter::Create(TempPath("varlen.pwr"), *layout);
  ASSERT_FALSE(writer.ok());
  EXPECT_EQ(writer.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(writer.status().message(), HasSubstr("tokens"));
}

TEST(RecordFileWriter, ReportsAnUncreatablePathWithTheErrnoMessage) {
  const std::string path = TempPath("no_such_dir/file.pwr");
  absl::StatusOr<RecordFileWriter> writer =
      RecordFileWriter::Create(path, TestLayout());
  ASSERT_FALSE(writer.ok());
  EXPECT_EQ(writer.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(writer.status().message(), HasSubstr(path));
  EXPECT_THAT(writer.status().message(), HasSubstr("No such file"));
}

TEST(RecordFileWriter, CloseIsIdempotentAndAppendAfterCloseFails) {
  const std::string path = TempPath("close_twice.pwr");
  absl::StatusOr<RecordFileWriter> writer =
      RecordFileWriter::Create(path, TestLayout());
  ASSERT_TRUE(writer.ok());
  ASSERT_TRUE(writer->AppendRaw(RecordBytes(0)).ok());
  EXPECT_TRUE(writer->Close().ok());
  EXPECT_TRUE(writer->Close().ok());
  EXPECT_EQ(writer->AppendRaw(RecordBytes(1)).code(),
            absl::StatusCode::kFailedPrecondition);
  absl::StatusOr<std::shared_ptr<RecordFileDataset>> ds =
      RecordFileDataset::Open(path);
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_EQ((*ds)->size(), 1);
  std::remove(path.c_str());
}

TEST(RecordFileWriter, MovedWriterKeepsWritingTheSameFile) {
  const std::string path = TempPath("moved.pwr");
  absl::StatusOr<RecordFileWriter> created =
      RecordFileWriter::Create(path, TestLayout());
  ASSERT_TRUE(created.ok());
  RecordFileWriter writer = *std::move(created);
  ASSERT_TRUE(writer.AppendRaw(RecordBytes(0)).ok());
  RecordFileWriter moved(std::move(writer));
  ASSERT_TRUE(moved.AppendRaw(RecordBytes(1)).ok());
  EXPECT_EQ(moved.count(), 2u);
  EXPECT_FALSE(writer.AppendRaw(RecordBytes(2)).ok());  // NOLINT: moved-from
  ASSERT_TRUE(moved.Close().ok());
  absl::StatusOr<std::shared_ptr<RecordFileDataset>> ds =
      RecordFileDataset::Open(path);
  ASSERT_TRUE(ds.ok()) << ds.status();
  ASSERT_EQ((*ds)->size(), 2);
  const std::vector<std::byte> want = RecordBytes(1);
  EXPECT_EQ(std::memcmp((*ds)->record(1).data(), want.data(), want.size()), 0);
  std::remove(path.c_str());
}

TEST(RecordFileWriter, DestructorWithoutCloseCreatesNoFile) {
  // The destructor abandons an open writer: only Close() publishes.
  const std::string path = TempPath("destructor.pwr");
  const std::string base = path.substr(path.find_last_of('/') + 1);
  std::remove(path.c_str());
  {
    absl::StatusOr<RecordFileWriter> writer =
        RecordFileWriter::Create(path, TestLayout());
    ASSERT_TRUE(writer.ok());
    ASSERT_TRUE(writer->AppendRaw(RecordBytes(0)).ok());
  }
  EXPECT_EQ(RecordFileDataset::Open(path).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_THAT(FilesStartingWith(base), ::testing::IsEmpty());
}

TEST(RecordFileDataset, ReadReportsAnIndexOutOfRange) {
  const std::string path = TempPath("read_range.pwr");
  WriteValidFile(path, 2);
  absl::StatusOr<std::shared_ptr<RecordFileDataset>> ds =
      RecordFileDataset::Open(path);
  ASSERT_TRUE(ds.ok()) << ds.status();
  absl::StatusOr<BatchLayout> batch = BatchLayout::Create((*ds)->layout(), 1);
  ASSERT_TRUE(batch.ok());
  std::vector<std::byte> slot(batch->slot_bytes());
  SampleView view(*batch, slot.data(), 0, 2);
  absl::Status status = (*ds)->Read(2, view);
  EXPECT_EQ(status.code(), absl::StatusCode::kOutOfRange);
  EXPECT_THAT(status.message(), HasSubstr(path));
  std::remove(path.c_str());
}

// --- Faults from the outside audit (issue 9) ---------------------------------

// Reads every record of `ds` and checks it against RecordBytes(i), with a
// message naming the first that differs.
void ExpectRecordsAre(const RecordFileDataset& ds, uint64_t count) {
  ASSERT_EQ(ds.size(), static_cast<int64_t>(count));
  absl::StatusOr<BatchLayout> batch = BatchLayout::Create(ds.layout(), 1);
  ASSERT_TRUE(batch.ok());
  std::vector<std::byte> slot(batch->slot_bytes());
  for (uint64_t i = 0; i < count; ++i) {
    SampleView view(*batch, slot.data(), 0, static_cast<int64_t>(i));
    ASSERT_TRUE(ds.Read(static_cast<int64_t>(i), view).ok()) << i;
    const std::vector<std::byte> want = RecordBytes(i);
    ASSERT_EQ(std::memcmp(ds.record(static_cast<int64_t>(i)).data(),
                          want.data(), want.size()),
              0)
        << "record " << i;
    // The view holds the same bytes, field by field.
    size_t offset = 0;
    for (int f = 0; f < view.layout().num_fields(); ++f) {
      absl::Span<std::byte> field = view.field(f);
      ASSERT_EQ(std::memcmp(field.data(), want.data() + offset, field.size()),
                0)
          << "record " << i << " field " << f;
      offset += field.size();
    }
  }
}

TEST(RecordFile, RejectsAFifoWithoutBlockingNamingItsType) {
  // Before the fix open() waited for a writer of the FIFO forever; this runs
  // on the test thread, so a hang is ctest's timeout.
  const std::string path = TempPath("fifo.pwr");
  ::unlink(path.c_str());
  ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0) << std::strerror(errno);
  absl::Status status = RecordFileDataset::Open(path).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(status.message(), HasSubstr(path));
  EXPECT_THAT(status.message(), HasSubstr("FIFO"));
  EXPECT_THAT(status.message(), HasSubstr("not a regular file"));
  ::unlink(path.c_str());
}

TEST(RecordFile, RejectsADirectoryNamingItsType) {
  absl::Status status = RecordFileDataset::Open(::testing::TempDir()).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(status.message(), HasSubstr("a directory"));
}

TEST(RecordFileWriter, RewritingThePathLeavesAnOpenReaderOnTheOldBytes) {
  const std::string path = TempPath("rewrite.pwr");
  constexpr uint64_t kOld = 200;  // 15 KiB: several pages
  WriteValidFile(path, kOld);
  absl::StatusOr<std::shared_ptr<RecordFileDataset>> old_ds =
      RecordFileDataset::Open(path);
  ASSERT_TRUE(old_ds.ok()) << old_ds.status();

  // A writer of the same path, mid-way: before the fix Create() truncated
  // the mapped file in place, and these reads raised SIGBUS (or, inside the
  // last page, read zeros).
  absl::StatusOr<RecordFileWriter> writer =
      RecordFileWriter::Create(path, TestLayout());
  ASSERT_TRUE(writer.ok()) << writer.status();
  ASSERT_TRUE(writer->AppendRaw(RecordBytes(1000)).ok());
  ExpectRecordsAre(**old_ds, kOld);
  // Until Close() the path still holds the old file.
  absl::StatusOr<std::shared_ptr<RecordFileDataset>> during =
      RecordFileDataset::Open(path);
  ASSERT_TRUE(during.ok()) << during.status();
  EXPECT_EQ((*during)->size(), static_cast<int64_t>(kOld));

  ASSERT_TRUE(writer->Close().ok());
  ExpectRecordsAre(**old_ds, kOld);  // after the rename too
  absl::StatusOr<std::shared_ptr<RecordFileDataset>> new_ds =
      RecordFileDataset::Open(path);
  ASSERT_TRUE(new_ds.ok()) << new_ds.status();
  ASSERT_EQ((*new_ds)->size(), 1);
  const std::vector<std::byte> want = RecordBytes(1000);
  EXPECT_EQ(std::memcmp((*new_ds)->record(0).data(), want.data(), want.size()),
            0);
  std::remove(path.c_str());
}

TEST(RecordFileWriter,
     AReaderKeepsReadingCorrectBytesWhileAWriterRewritesThePath) {
  const std::string path = TempPath("rewrite_concurrent.pwr");
  constexpr uint64_t kRecords = 500;
  WriteValidFile(path, kRecords);
  absl::StatusOr<std::shared_ptr<RecordFileDataset>> ds =
      RecordFileDataset::Open(path);
  ASSERT_TRUE(ds.ok()) << ds.status();
  std::thread rewriter([&] {
    for (int round = 0; round < 20; ++round) {
      absl::StatusOr<RecordFileWriter> writer =
          RecordFileWriter::Create(path, TestLayout());
      ASSERT_TRUE(writer.ok()) << writer.status();
      for (uint64_t i = 0; i < kRecords / 2; ++i) {
        ASSERT_TRUE(writer->AppendRaw(RecordBytes(i + 7)).ok());
      }
      ASSERT_TRUE(writer->Close().ok());
    }
  });
  for (int pass = 0; pass < 20; ++pass) ExpectRecordsAre(**ds, kRecords);
  rewriter.join();
  ExpectRecordsAre(**ds, kRecords);
  std::remove(path.c_str());
}

TEST(RecordFileWriter, LeavesNoTemporaryFileBesideThePathAfterClose) {
  const std::string path = TempPath("no_temporary.pwr");
  const std::string base = path.substr(path.find_last_of('/') + 1);
  WriteValidFile(path, 3);
  EXPECT_THAT(FilesStartingWith(base), ::testing::ElementsAre(base));
  std::remove(path.c_str());
}

// Lowers RLIMIT_FSIZE for its lifetime, with SIGXFSZ ignored: writes past
// the limit then fail with EFBIG, as writes to a full disk fail with ENOSPC.
class FileSizeLimit {
 public:
  explicit FileSizeLimit(rlim_t bytes) {
    ::getrlimit(RLIMIT_FSIZE, &old_limit_);
    struct sigaction ignore {};
    ignore.sa_handler = SIG_IGN;
    ::sigaction(SIGXFSZ, &ignore, &old_action_);
    struct rlimit limit = old_limit_;
    limit.rlim_cur = bytes;
    ok_ = ::setrlimit(RLIMIT_FSIZE, &limit) == 0;
  }
  ~FileSizeLimit() {
    ::setrlimit(RLIMIT_FSIZE, &old_limit_);
    ::sigaction(SIGXFSZ, &old_action_, nullptr);
  }
  bool ok() const { return ok_; }

 private:
  struct rlimit old_limit_ {};
  struct sigaction old_action_ {};
  bool ok_ = false;
};

TEST(RecordFileWriter,
     AFailedWriteLikeAFullDiskLeavesTheOldFileAndNoTemporaryFile) {
  const std::string path = TempPath("full_disk.pwr");
  const std::string base = path.substr(path.find_last_of('/') + 1);
  WriteValidFile(path, 10);
  absl::Status status;
  {
    FileSizeLimit limit(64 << 10);
    ASSERT_TRUE(limit.ok());
    absl::StatusOr<RecordFileWriter> writer =
        RecordFileWriter::Create(path, TestLayout());
    ASSERT_TRUE(writer.ok()) << writer.status();
    for (uint64_t i = 0; i < 2000 && status.ok(); ++i) {  // 152 KB > 64 KiB
      status = writer->AppendRaw(RecordBytes(i));
    }
    if (status.ok()) status = writer->Close();
  }
  EXPECT_FALSE(status.ok());
  EXPECT_THAT(status.message(), HasSubstr(path));
  EXPECT_THAT(status.message(), HasSubstr("File too large"));
  // Before the fix the path had been truncated in place and held a partial
  // file; now it still holds the old one, and the temporary file is gone.
  absl::StatusOr<std::shared_ptr<RecordFileDataset>> ds =
      RecordFileDataset::Open(path);
  ASSERT_TRUE(ds.ok()) << ds.status();
  ExpectRecordsAre(**ds, 10);
  EXPECT_THAT(FilesStartingWith(base), ::testing::ElementsAre(base));
  std::remove(path.c_str());
}

TEST(RecordFileWriter,
     DestroyingAnOpenWriterKeepsTheCompleteFileAndRemovesTheTemporaryFile) {
  const std::string path = TempPath("abandoned.pwr");
  const std::string base = path.substr(path.find_last_of('/') + 1);
  const std::vector<std::byte> old_bytes = WriteValidFile(path, 5);
  {
    // As an early return after a failed Append would leave it: before the
    // fix the destructor renamed this 2-record file over the 5-record one.
    absl::StatusOr<RecordFileWriter> writer =
        RecordFileWriter::Create(path, TestLayout());
    ASSERT_TRUE(writer.ok()) << writer.status();
    ASSERT_TRUE(writer->AppendRaw(RecordBytes(100)).ok());
    ASSERT_TRUE(writer->AppendRaw(RecordBytes(101)).ok());
  }
  EXPECT_EQ(ReadAll(path), old_bytes);
  absl::StatusOr<std::shared_ptr<RecordFileDataset>> ds =
      RecordFileDataset::Open(path);
  ASSERT_TRUE(ds.ok()) << ds.status();
  ExpectRecordsAre(**ds, 5);
  EXPECT_THAT(FilesStartingWith(base), ::testing::ElementsAre(base));
  std::remove(path.c_str());
}

TEST(RecordFileWriter,
     MoveAssigningOverAnOpenWriterKeepsItsCompleteFileAndRemovesItsTemporary) {
  const std::string path = TempPath("assigned_over.pwr");
  const std::string base = path.substr(path.find_last_of('/') + 1);
  const std::string other = TempPath("other_of_assigned_over.pwr");
  const std::vector<std::byte> old_bytes = WriteValidFile(path, 5);
  absl::StatusOr<RecordFileWriter> created =
      RecordFileWriter::Create(path, TestLayout());
  ASSERT_TRUE(created.ok()) << created.status();
  RecordFileWriter writer = *std::move(created);
  ASSERT_TRUE(writer.AppendRaw(RecordBytes(100)).ok());
  absl::StatusOr<RecordFileWriter> replacement =
      RecordFileWriter::Create(other, TestLayout());
  ASSERT_TRUE(replacement.ok()) << replacement.status();
  ASSERT_TRUE(replacement->AppendRaw(RecordBytes(0)).ok());
  writer = *std::move(replacement);  // abandons the writer of `path`
  EXPECT_EQ(ReadAll(path), old_bytes);
  EXPECT_THAT(FilesStartingWith(base), ::testing::ElementsAre(base));
  // The assigned writer is the one of `other`, and its Close() publishes.
  ASSERT_TRUE(writer.Close().ok());
  absl::StatusOr<std::shared_ptr<RecordFileDataset>> ds =
      RecordFileDataset::Open(other);
  ASSERT_TRUE(ds.ok()) << ds.status();
  ExpectRecordsAre(**ds, 1);
  std::remove(path.c_str());
  std::remove(other.c_str());
}

TEST(RecordFileWriter, RefusesAFifoAtThePathNamingItsType) {
  // Before the fix Create() succeeded and Close() renamed a regular file
  // over the FIFO.
  const std::string path = TempPath("writer_fifo.pwr");
  const std::string base = path.substr(path.find_last_of('/') + 1);
  ::unlink(path.c_str());
  ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0) << std::strerror(errno);
  absl::Status status = RecordFileWriter::Create(path, TestLayout()).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(status.message(), HasSubstr(path));
  EXPECT_THAT(status.message(), HasSubstr("a FIFO"));
  EXPECT_THAT(status.message(), HasSubstr("not a regular file"));
  struct stat st {};
  ASSERT_EQ(::lstat(path.c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
  EXPECT_THAT(FilesStartingWith(base), ::testing::ElementsAre(base));
  ::unlink(path.c_str());
}

TEST(RecordFileWriter, RefusesADirectoryAtThePathNamingItsType) {
  const std::string path = TempPath("writer_dir.pwr");
  const std::string base = path.substr(path.find_last_of('/') + 1);
  ::rmdir(path.c_str());
  ASSERT_EQ(::mkdir(path.c_str(), 0700), 0) << std::strerror(errno);
  absl::Status status = RecordFileWriter::Create(path, TestLayout()).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(status.message(), HasSubstr(path));
  EXPECT_THAT(status.message(), HasSubstr("a directory"));
  EXPECT_THAT(FilesStartingWith(base), ::testing::ElementsAre(base));
  ::rmdir(path.c_str());
}

TEST(RecordFileWriter, ASymlinkToARegularFileIsReplacedItselfNotItsTarget) {
  // As the readers do, the writer accepts a link to a regular file; Close()
  // renames the new file over the link, and the link's target keeps its
  // records.
  const std::string target = TempPath("link_target.pwr");
  const std::string path = TempPath("link.pwr");
  const std::vector<std::byte> old_bytes = WriteValidFile(target, 5);
  ::unlink(path.c_str());
  ASSERT_EQ(::symlink(target.c_str(), path.c_str()), 0) << std::strerror(errno);
  absl::StatusOr<RecordFileWriter> writer =
      RecordFileWriter::Create(path, TestLayout());
  ASSERT_TRUE(writer.ok()) << writer.status();
  ASSERT_TRUE(writer->AppendRaw(RecordBytes(0)).ok());
  ASSERT_TRUE(writer->Close().ok());
  struct stat st {};
  ASSERT_EQ(::lstat(path.c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
  EXPECT_EQ(ReadAll(target), old_bytes);
  absl::StatusOr<std::shared_ptr<RecordFileDataset>> ds =
      RecordFileDataset::Open(path);
  ASSERT_TRUE(ds.ok()) << ds.status();
  ExpectRecordsAre(**ds, 1);
  std::remove(path.c_str());
  std::remove(target.c_str());
}

TEST(RecordFileWriter, RefusesASymlinkToAFifoNamingBoth) {
  const std::string fifo = TempPath("link_fifo_target");
  const std::string path = TempPath("link_to_fifo.pwr");
  ::unlink(fifo.c_str());
  ::unlink(path.c_str());
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0) << std::strerror(errno);
  ASSERT_EQ(::symlink(fifo.c_str(), path.c_str()), 0) << std::strerror(errno);
  absl::Status status = RecordFileWriter::Create(path, TestLayout()).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(status.message(), HasSubstr("a symbolic link to a FIFO"));
  ::unlink(path.c_str());
  ::unlink(fifo.c_str());
}

TEST(RecordFileDataset,
     ReadOfAFileTruncatedInPlaceIsDataLossNamingFileAndRecord) {
  const std::string path = TempPath("truncated_under_reader.pwr");
  const std::vector<std::byte> bytes = WriteValidFile(path, 100);
  absl::StatusOr<std::shared_ptr<RecordFileDataset>> ds =
      RecordFileDataset::Open(path);
  ASSERT_TRUE(ds.ok()) << ds.status();
  // Someone else truncates the mapped file in place: the header and two
  // records are left. (Before the fix: zeros inside the last page, SIGBUS
  // past it.)
  const size_t header_bytes = bytes.size() - 100 * kTestRecordBytes;
  ASSERT_EQ(::truncate(path.c_str(),
                       static_cast<off_t>(header_bytes + 2 * kTestRecordBytes)),
            0);
  absl::StatusOr<BatchLayout> batch = BatchLayout::Create((*ds)->layout(), 1);
  ASSERT_TRUE(batch.ok());
  std::vector<std::byte> slot(batch->slot_bytes());
  SampleView view(*batch, slot.data(), 0, 0);
  EXPECT_TRUE((*ds)->Read(1, view).ok());
  for (int64_t index : {2, 50, 99}) {
    absl::Status status = (*ds)->Read(index, view);
    EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << status;
    EXPECT_THAT(status.message(), HasSubstr(path));
    EXPECT_THAT(status.message(), HasSubstr(absl::StrCat("record ", index)));
    EXPECT_THAT(status.message(),
                HasSubstr(absl::StrCat(
                    "bytes [", header_bytes + index * kTestRecordBytes)));
    EXPECT_THAT(status.message(), HasSubstr("truncated"));
  }
  std::remove(path.c_str());
}

TEST(RecordFileDataset,
     OpensAndReadsASparseOneTebibyteFileOfAbout2To40Records) {
  // One u8 a record: a 1 TiB file holds 2^40 - 64 records. Sparse: it takes
  // a few KiB of disk.
  const std::string path = TempPath("one_tebibyte.pwr");
  absl::StatusOr<SampleLayout> layout = SampleLayout::Create(
      {{.name = "b", .dtype = DType::kUInt8, .shape = {}}});
  ASSERT_TRUE(layout.ok());
  constexpr uint64_t kFileBytes = uint64_t{1} << 40;
  const size_t header_bytes = SerializeRecordFileHeader(*layout, 1).size();
  const uint64_t count = kFileBytes - header_bytes;
  const std::vector<std::byte> header =
      SerializeRecordFileHeader(*layout, count);
  WriteAll(path, header);
  if (::truncate(path.c_str(), static_cast<off_t>(kFileBytes)) != 0) {
    const int error = errno;
    std::remove(path.c_str());
    GTEST_SKIP() << "this filesystem cannot hold a sparse 1 TiB file at "
                 << path << ": " << std::strerror(error);
  }
  // Two records far apart, past every 32-bit offset.
  const uint64_t far = count - 1;
  const uint64_t middle = (uint64_t{1} << 39) + 12345;
  {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
    ASSERT_GE(fd, 0);
    const unsigned char a = 0xA5, b = 0x5A;
    ASSERT_EQ(::pwrite(fd, &a, 1, static_cast<off_t>(header_bytes + far)), 1);
    ASSERT_EQ(::pwrite(fd, &b, 1, static_cast<off_t>(header_bytes + middle)),
              1);
    ::close(fd);
  }
  absl::StatusOr<std::shared_ptr<RecordFileDataset>> ds =
      RecordFileDataset::Open(path);
  if (!ds.ok()) {
    // A process whose address space cannot hold the mapping (RLIMIT_AS, a
    // sanitizer's layout) gets a clear error naming the size, not a crash.
    EXPECT_EQ(ds.status().code(), absl::StatusCode::kResourceExhausted)
        << ds.status();
    EXPECT_THAT(ds.status().message(), HasSubstr(absl::StrCat(kFileBytes)));
    std::remove(path.c_str());
    GTEST_SKIP() << "the mapping does not fit here: " << ds.status();
  }
  EXPECT_EQ((*ds)->size(), static_cast<int64_t>(count));
  absl::StatusOr<BatchLayout> batch = BatchLayout::Create((*ds)->layout(), 1);
  ASSERT_TRUE(batch.ok());
  std::vector<std::byte> slot(batch->slot_bytes());
  SampleView view(*batch, slot.data(), 0, 0);
  ASSERT_TRUE((*ds)->Read(static_cast<int64_t>(far), view).ok());
  EXPECT_EQ(view.field_as<uint8_t>(0)[0], 0xA5);
  ASSERT_TRUE((*ds)->Read(static_cast<int64_t>(middle), view).ok());
  EXPECT_EQ(view.field_as<uint8_t>(0)[0], 0x5A);
  ASSERT_TRUE((*ds)->Read(0, view).ok());
  EXPECT_EQ(view.field_as<uint8_t>(0)[0], 0);  // a hole reads as zero
  EXPECT_EQ((*ds)->Read(static_cast<int64_t>(count), view).code(),
            absl::StatusCode::kOutOfRange);
  std::remove(path.c_str());
}

// Issue 18 item 6b: a truncation between the size check and the copy out
// of the mapping killed the process with SIGBUS; reads go through preadv.
TEST(RecordFileDeathTest, TruncatingTheFileWhileReadsRunNeverKillsIt) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const std::string path = TempPath("truncated_while_read.pwr");
  const std::vector<std::byte> bytes = WriteValidFile(path, 50000);
  EXPECT_EXIT(
      ReadWhileTruncating(RecordFileDataset::Open(path), path,
                          static_cast<off_t>(bytes.size()), {.stride = 7919}),
      ::testing::ExitedWithCode(0), "");
  std::remove(path.c_str());
}

}  // namespace
}  // namespace pinwheel
