#include "loader/token_window_dataset.h"

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <iterator>
#include <limits>
#include <memory>
#include <set>
#include <string>
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

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing_support::ReadWhileTruncating;

std::string TempPath(const std::string& name) {
  return absl::StrCat(::testing::TempDir(), "/token_window_test_", getpid(),
                      "_", name);
}

void WriteBytes(const std::string& path, const void* data, size_t bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(static_cast<const char*>(data),
            static_cast<std::streamsize>(bytes));
  ASSERT_TRUE(out.good()) << path;
}

// Writes `tokens` as T and returns them widened, as the dataset should.
template <typename T>
std::vector<int64_t> WriteTokens(const std::string& path, int64_t count) {
  std::vector<T> tokens(count);
  std::vector<int64_t> widened(count);
  for (int64_t i = 0; i < count; ++i) {
    // Spread over T's whole range, both halves: catches sign or zero
    // extension done wrong.
    const uint64_t pattern = static_cast<uint64_t>(i) * 0x9E3779B97F4A7C15ull;
    T value;
    std::memcpy(&value, &pattern, sizeof(T));
    tokens[i] = value;
    widened[i] = static_cast<int64_t>(value);
  }
  WriteBytes(path, tokens.data(), tokens.size() * sizeof(T));
  return widened;
}

struct Width {
  const char* name;
  int token_bytes;
  bool signed_tokens;
  DType window_dtype;  // of the "tokens" field in the kWindow output
};

// Writes `count` tokens of `width` to `path`; returns them widened.
std::vector<int64_t> WriteTokensOfWidth(const std::string& path,
                                        const Width& width, int64_t count) {
  switch (width.token_bytes) {
    case 1:
      return width.signed_tokens ? WriteTokens<int8_t>(path, count)
                                 : WriteTokens<uint8_t>(path, count);
    case 2:
      return width.signed_tokens ? WriteTokens<int16_t>(path, count)
                                 : WriteTokens<uint16_t>(path, count);
    case 4:
      return width.signed_tokens ? WriteTokens<int32_t>(path, count)
                                 : WriteTokens<uint32_t>(path, count);
    default:
      return WriteTokens<int64_t>(path, count);
  }
}

// Returns the whole file's bytes.
std::vector<std::byte> ReadFileBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> chars((std::istreambuf_iterator<char>(in)),
                          std::istreambuf_iterator<char>());
  std::vector<std::byte> bytes(chars.size());
  std::memcpy(bytes.data(), chars.data(), chars.size());
  return bytes;
}

class TokenWindowWidth : public ::testing::TestWithParam<Width> {};

TEST_P(TokenWindowWidth, InputIsTheFilesTokensWidenedAndTargetIsShiftedByOne) {
  const Width width = GetParam();
  const std::string path = TempPath(absl::StrCat(width.name, ".bin"));
  const int64_t kTokens = 4099;
  std::vector<int64_t> want;
  switch (width.token_bytes) {
    case 1:
      want = width.signed_tokens ? WriteTokens<int8_t>(path, kTokens)
                                 : WriteTokens<uint8_t>(path, kTokens);
      break;
    case 2:
      want = width.signed_tokens ? WriteTokens<int16_t>(path, kTokens)
                                 : WriteTokens<uint16_t>(path, kTokens);
      break;
    case 4:
      want = width.signed_tokens ? WriteTokens<int32_t>(path, kTokens)
                                 : WriteTokens<uint32_t>(path, kTokens);
      break;
    default:
      want = WriteTokens<int64_t>(path, kTokens);
      break;
  }
  // Two blocks of 16 and a tail of 5; and 18 blocks and a tail of 13, long
  // enough for streaming stores (Note [streaming stores into the slot]),
  // which the first sample's input takes (aligned) and its target does not
  // (301 x 8 bytes after it).
  for (const int64_t kSeqLen : {int64_t{37}, int64_t{301}}) {
    SCOPED_TRACE(absl::StrCat("seq_len ", kSeqLen));
    absl::StatusOr<std::shared_ptr<TokenWindowDataset>> ds =
        TokenWindowDataset::Open(path, {.token_bytes = width.token_bytes,
                                        .signed_tokens = width.signed_tokens,
                                        .seq_len = kSeqLen,
                                        .windows = 50,
                                        .seed = 7});
    ASSERT_TRUE(ds.ok()) << ds.status();
    EXPECT_EQ((*ds)->tokens(), kTokens);
    EXPECT_EQ((*ds)->size(), 50);
    ASSERT_EQ((*ds)->layout().num_fields(), 2);
    EXPECT_EQ((*ds)->layout().fields()[0].name, "input");
    EXPECT_EQ((*ds)->layout().fields()[1].name, "target");

    absl::StatusOr<BatchLayout> batch = BatchLayout::Create((*ds)->layout(), 2);
    ASSERT_TRUE(batch.ok()) << batch.status();
    std::vector<std::byte> slot(batch->slot_bytes());
    for (int64_t i = 0; i < (*ds)->size(); ++i) {
      const int64_t position = i % 2;
      SampleView view(*batch, slot.data(), position, i);
      ASSERT_TRUE((*ds)->Read(i, view).ok());
      const int64_t start = (*ds)->WindowStart(i);
      ASSERT_GE(start, 0);
      ASSERT_LE(start, kTokens - kSeqLen - 1);
      const absl::Span<int64_t> input = view.field_as<int64_t>(0);
      const absl::Span<int64_t> target = view.field_as<int64_t>(1);
      ASSERT_EQ(input.size(), static_cast<size_t>(kSeqLen));
      ASSERT_EQ(target.size(), static_cast<size_t>(kSeqLen));
      for (int64_t k = 0; k < kSeqLen; ++k) {
        ASSERT_EQ(input[k], want[start + k])
            << "window " << i << " token " << k;
        ASSERT_EQ(target[k], want[start + k + 1])
            << "window " << i << " token " << k;
      }
    }
  }
  std::remove(path.c_str());
}

// Every token width the dataset reads, for the parameterised suites.
const auto kEveryWidth = ::testing::Values(
    Width{"u8", 1, false, DType::kUInt8}, Width{"i8", 1, true, DType::kInt8},
    Width{"u16", 2, false, DType::kUInt16},
    Width{"i16", 2, true, DType::kInt16},
    Width{"u32", 4, false, DType::kUInt32},
    Width{"i32", 4, true, DType::kInt32},
    Width{"i64", 8, false, DType::kInt64});

std::string WidthName(const ::testing::TestParamInfo<Width>& info) {
  return std::string(info.param.name);
}

INSTANTIATE_TEST_SUITE_P(EachTokenWidth, TokenWindowWidth, kEveryWidth,
                         WidthName);

// --- TokenOutput::kWindow (issue 12) -----------------------------------------

class TokenWindowOutput : public ::testing::TestWithParam<Width> {};

TEST_P(TokenWindowOutput, TheTokensFieldIsTheFilesBytesInTheFilesDtype) {
  const Width width = GetParam();
  const std::string path =
      TempPath(absl::StrCat("window_", width.name, ".bin"));
  const int64_t kTokens = 4099;
  WriteTokensOfWidth(path, width, kTokens);
  const std::vector<std::byte> file = ReadFileBytes(path);
  ASSERT_EQ(file.size(), static_cast<size_t>(kTokens * width.token_bytes));
  const int64_t kSeqLen = 37;
  absl::StatusOr<std::shared_ptr<TokenWindowDataset>> ds =
      TokenWindowDataset::Open(path, {.token_bytes = width.token_bytes,
                                      .signed_tokens = width.signed_tokens,
                                      .seq_len = kSeqLen,
                                      .windows = 50,
                                      .seed = 7,
                                      .output = TokenOutput::kWindow});
  ASSERT_TRUE(ds.ok()) << ds.status();
  ASSERT_EQ((*ds)->layout().num_fields(), 1);
  const FieldSpec& field = (*ds)->layout().fields()[0];
  EXPECT_EQ(field.name, "tokens");
  EXPECT_EQ(field.dtype, width.window_dtype) << DTypeName(field.dtype);
  EXPECT_THAT(field.shape, ElementsAre(kSeqLen + 1));
  EXPECT_EQ((*ds)->layout().sample_bytes(),
            static_cast<size_t>((kSeqLen + 1) * width.token_bytes));

  absl::StatusOr<BatchLayout> batch = BatchLayout::Create((*ds)->layout(), 3);
  ASSERT_TRUE(batch.ok()) << batch.status();
  std::vector<std::byte> slot(batch->slot_bytes());
  const size_t window_bytes = field.bytes();
  for (int64_t i = 0; i < (*ds)->size(); ++i) {
    SampleView view(*batch, slot.data(), i % 3, i);
    ASSERT_TRUE((*ds)->Read(i, view).ok()) << i;
    const absl::Span<std::byte> tokens = view.field(0);
    ASSERT_EQ(tokens.size(), window_bytes);
    const size_t offset =
        static_cast<size_t>((*ds)->WindowStart(i) * width.token_bytes);
    ASSERT_EQ(std::memcmp(tokens.data(), file.data() + offset, window_bytes), 0)
        << "window " << i;
  }
  std::remove(path.c_str());
}

// widened(p) for a pointer to one token of `width` in a window field.
int64_t WidenOne(const Width& width, const std::byte* p) {
  switch (width.token_bytes) {
    case 1: {
      uint8_t v;
      std::memcpy(&v, p, 1);
      return width.signed_tokens ? static_cast<int8_t>(v) : int64_t{v};
    }
    case 2: {
      uint16_t v;
      std::memcpy(&v, p, 2);
      return width.signed_tokens ? static_cast<int16_t>(v) : int64_t{v};
    }
    case 4: {
      uint32_t v;
      std::memcpy(&v, p, 4);
      return width.signed_tokens ? static_cast<int32_t>(v) : int64_t{v};
    }
    default: {
      int64_t v;
      std::memcpy(&v, p, 8);
      return v;
    }
  }
}

TEST_P(TokenWindowOutput,
       InputAndTargetAreTheSameIndexsWindowShiftedAndWidened) {
  const Width width = GetParam();
  const std::string path = TempPath(absl::StrCat("both_", width.name, ".bin"));
  WriteTokensOfWidth(path, width, 5000);
  TokenWindowOptions options = {.token_bytes = width.token_bytes,
                                .signed_tokens = width.signed_tokens,
                                .seq_len = 21,
                                .seed = 3};
  absl::StatusOr<std::shared_ptr<TokenWindowDataset>> widened =
      TokenWindowDataset::Open(path, options);
  options.output = TokenOutput::kWindow;
  absl::StatusOr<std::shared_ptr<TokenWindowDataset>> windows =
      TokenWindowDataset::Open(path, options);
  ASSERT_TRUE(widened.ok()) << widened.status();
  ASSERT_TRUE(windows.ok()) << windows.status();
  ASSERT_EQ((*widened)->size(), (*windows)->size());
  absl::StatusOr<BatchLayout> wide_batch =
      BatchLayout::Create((*widened)->layout(), 1);
  absl::StatusOr<BatchLayout> window_batch =
      BatchLayout::Create((*windows)->layout(), 1);
  ASSERT_TRUE(wide_batch.ok() && window_batch.ok());
  std::vector<std::byte> wide_slot(wide_batch->slot_bytes());
  std::vector<std::byte> window_slot(window_batch->slot_bytes());
  for (int64_t i = 0; i < (*windows)->size(); i += 7) {
    ASSERT_EQ((*widened)->WindowStart(i), (*windows)->WindowStart(i)) << i;
    SampleView wide(*wide_batch, wide_slot.data(), 0, i);
    SampleView window(*window_batch, window_slot.data(), 0, i);
    ASSERT_TRUE((*widened)->Read(i, wide).ok());
    ASSERT_TRUE((*windows)->Read(i, window).ok());
    const absl::Span<int64_t> input = wide.field_as<int64_t>(0);
    const absl::Span<int64_t> target = wide.field_as<int64_t>(1);
    const std::byte* tokens = window.field(0).data();
    const size_t tb = static_cast<size_t>(width.token_bytes);
    for (size_t k = 0; k < input.size(); ++k) {
      ASSERT_EQ(input[k], WidenOne(width, tokens + k * tb))
          << "window " << i << " token " << k;
      ASSERT_EQ(target[k], WidenOne(width, tokens + (k + 1) * tb))
          << "window " << i << " token " << k;
    }
  }
  std::remove(path.c_str());
}

INSTANTIATE_TEST_SUITE_P(EachTokenWidth, TokenWindowOutput, kEveryWidth,
                         WidthName);

TEST(TokenWindowDataset, RejectsAnOutputThatIsNoTokenOutputNamingIt) {
  const std::string path = TempPath("bad_output.bin");
  WriteTokens<uint16_t>(path, 100);
  for (int value : {2, -1, 77}) {
    absl::Status status =
        TokenWindowDataset::Open(
            path, {.seq_len = 4, .output = static_cast<TokenOutput>(value)})
            .status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    EXPECT_THAT(status.message(), HasSubstr(absl::StrCat("output ", value)));
    EXPECT_THAT(status.message(), HasSubstr("kWindow"));
    EXPECT_THAT(status.message(), HasSubstr(path));
  }
  std::remove(path.c_str());
}

TEST(TokenWindowDataset, WindowOutputReadIntoAnotherLayoutIsInvalidArgument) {
  const std::string path = TempPath("window_wrong_view.bin");
  WriteTokens<uint16_t>(path, 1000);
  absl::StatusOr<std::shared_ptr<TokenWindowDataset>> widened =
      TokenWindowDataset::Open(path, {.seq_len = 9});
  absl::StatusOr<std::shared_ptr<TokenWindowDataset>> windows =
      TokenWindowDataset::Open(path,
                               {.seq_len = 9, .output = TokenOutput::kWindow});
  ASSERT_TRUE(widened.ok() && windows.ok());
  absl::StatusOr<BatchLayout> wide_batch =
      BatchLayout::Create((*widened)->layout(), 1);
  absl::StatusOr<BatchLayout> window_batch =
      BatchLayout::Create((*windows)->layout(), 1);
  ASSERT_TRUE(wide_batch.ok() && window_batch.ok());
  std::vector<std::byte> slot(wide_batch->slot_bytes() +
                              window_batch->slot_bytes());
  SampleView wide(*wide_batch, slot.data(), 0, 0);
  SampleView window(*window_batch, slot.data(), 0, 0);
  EXPECT_EQ((*windows)->Read(0, wide).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*widened)->Read(0, window).code(),
            absl::StatusCode::kInvalidArgument);
  std::remove(path.c_str());
}

TEST(TokenWindowDataset, WindowOutputOfAFileTruncatedInPlaceIsDataLoss) {
  const std::string path = TempPath("window_truncated.bin");
  WriteTokens<uint16_t>(path, 100000);
  absl::StatusOr<std::shared_ptr<TokenWindowDataset>> ds =
      TokenWindowDataset::Open(
          path,
          {.seq_len = 9, .windows = 1000, .output = TokenOutput::kWindow});
  ASSERT_TRUE(ds.ok()) << ds.status();
  ASSERT_EQ(::truncate(path.c_str(), 2), 0);
  absl::StatusOr<BatchLayout> batch = BatchLayout::Create((*ds)->layout(), 1);
  ASSERT_TRUE(batch.ok());
  std::vector<std::byte> slot(batch->slot_bytes());
  SampleView view(*batch, slot.data(), 0, 0);
  for (int64_t index : {0, 1, 999}) {
    absl::Status status = (*ds)->Read(index, view);
    EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << status;
    EXPECT_THAT(status.message(), HasSubstr(path));
    EXPECT_THAT(status.message(), HasSubstr(absl::StrCat("window ", index)));
    EXPECT_THAT(status.message(), HasSubstr("now has 2 bytes"));
  }
  std::remove(path.c_str());
}

TEST(TokenWindowDataset, WindowOutputChecksTheFileLikeTheWidenedOutput) {
  const std::string odd = TempPath("window_odd.bin");
  const std::vector<uint8_t> bytes(2001);
  WriteBytes(odd, bytes.data(), bytes.size());
  EXPECT_EQ(
      TokenWindowDataset::Open(
          odd, {.token_bytes = 2, .seq_len = 4, .output = TokenOutput::kWindow})
          .status()
          .code(),
      absl::StatusCode::kDataLoss);
  const std::string short_file = TempPath("window_short.bin");
  WriteTokens<uint16_t>(short_file, 8);
  EXPECT_EQ(TokenWindowDataset::Open(
                short_file, {.seq_len = 8, .output = TokenOutput::kWindow})
                .status()
                .code(),
            absl::StatusCode::kDataLoss);
  std::remove(odd.c_str());
  std::remove(short_file.c_str());
}

TEST(TokenWindowDataset, WindowStartsAreTheSameForTheSameSeed) {
  const std::string path = TempPath("determinism.bin");
  WriteTokens<uint16_t>(path, 10000);
  const TokenWindowOptions options = {.seq_len = 16, .seed = 42};
  absl::StatusOr<std::shared_ptr<TokenWindowDataset>> a =
      TokenWindowDataset::Open(path, options);
  absl::StatusOr<std::shared_ptr<TokenWindowDataset>> b =
      TokenWindowDataset::Open(path, options);
  TokenWindowOptions other = options;
  other.seed = 43;
  absl::StatusOr<std::shared_ptr<TokenWindowDataset>> c =
      TokenWindowDataset::Open(path, other);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  int differ = 0;
  for (int64_t i = 0; i < (*a)->size(); ++i) {
    EXPECT_EQ((*a)->WindowStart(i), (*b)->WindowStart(i)) << i;
    EXPECT_EQ((*a)->WindowStart(i), (*a)->WindowStart(i)) << i;
    differ += (*a)->WindowStart(i) != (*c)->WindowStart(i);
  }
  // Another seed gives other windows (all but a chance few).
  EXPECT_GT(differ, (*a)->size() * 9 / 10);
  std::remove(path.c_str());
}

// The values come from an independent Python model of the documented
// algorithm (SplitMix64 keyed by (seed, index), Lemire's bounded draw), so
// a change of the window of any index — which would silently change every
// user's data order — fails here.
TEST(TokenWindowDataset, WindowStartsMatchTheReferenceAlgorithm) {
  const std::string path = TempPath("reference.bin");
  WriteTokens<uint8_t>(path, 1004);  // 1000 possible starts for seq_len 4.
  absl::StatusOr<std::shared_ptr<TokenWindowDataset>> ds =
      TokenWindowDataset::Open(path,
                               {.token_bytes = 1, .seq_len = 4, .seed = 0});
  ASSERT_TRUE(ds.ok()) << ds.status();
  std::vector<int64_t> starts;
  for (int64_t i = 0; i < 6; ++i) starts.push_back((*ds)->WindowStart(i));
  EXPECT_THAT(starts, ElementsAre(652, 368, 392, 737, 626, 979));
  std::remove(path.c_str());
}

TEST(TokenWindowDataset, WindowStartsReachBothEndsOfTheFile) {
  const std::string path = TempPath("ends.bin");
  WriteTokens<uint16_t>(path, 10);
  // 10 tokens, seq_len 7: the starts are 0, 1 and 2.
  absl::StatusOr<std::shared_ptr<TokenWindowDataset>> ds =
      TokenWindowDataset::Open(path, {.seq_len = 7, .windows = 200});
  ASSERT_TRUE(ds.ok()) << ds.status();
  std::set<int64_t> seen;
  for (int64_t i = 0; i < (*ds)->size(); ++i) {
    seen.insert((*ds)->WindowStart(i));
  }
  EXPECT_THAT(seen, ElementsAre(0, 1, 2));
  std::remove(path.c_str());
}

TEST(TokenWindowDataset, AFileOfExactlyOneWindowHasOneStart) {
  const std::string path = TempPath("one_window.bin");
  const std::vector<int64_t> want = WriteTokens<uint16_t>(path, 9);
  absl::StatusOr<std::shared_ptr<TokenWindowDataset>> ds =
      TokenWindowDataset::Open(path, {.seq_len = 8});
  ASSERT_TRUE(ds.ok()) << ds.status();
  ASSERT_EQ((*ds)->size(), 1);
  EXPECT_EQ((*ds)->WindowStart(0), 0);
  absl::StatusOr<BatchLayout> batch = BatchLayout::Create((*ds)->layout(), 1);
  ASSERT_TRUE(batch.ok());
  std::vector<std::byte> slot(batch->slot_bytes());
  SampleView view(*batch, slot.data(), 0, 0);
  ASSERT_TRUE((*ds)->Read(0, view).ok());
  EXPECT_EQ(view.field_as<int64_t>(1)[7], want[8]);
  std::remove(path.c_str());
}

TEST(TokenWindowDataset, DefaultWindowCountIsTokensOverSeqLenPlusOne) {
  const std::string path = TempPath("default_windows.bin");
  WriteTokens<uint16_t>(path, 1000);
  absl::StatusOr<std::shared_ptr<TokenWindowDataset>> ds =
      TokenWindowDataset::Open(path, {.seq_len = 9});
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_EQ((*ds)->size(), 100);
  std::remove(path.c_str());
}

TEST(TokenWindowDataset, RejectsNonExistentPath) {
  const std::string path = TempPath("missing.bin");
  absl::StatusOr<std::shared_ptr<TokenWindowDataset>> ds =
      TokenWindowDataset::Open(path, {});
  ASSERT_FALSE(ds.ok());
  EXPECT_EQ(ds.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(ds.status().message(), HasSubstr(path));
}

TEST(TokenWindowDataset, RejectsFileSizeThatIsNotAMultipleOfTheTokenWidth) {
  const std::string path = TempPath("odd_size.bin");
  const std::vector<uint8_t> bytes(2001);
  WriteBytes(path, bytes.data(), bytes.size());
  absl::StatusOr<std::shared_ptr<TokenWindowDataset>> ds =
      TokenWindowDataset::Open(path, {.token_bytes = 2, .seq_len = 4});
  ASSERT_FALSE(ds.ok());
  EXPECT_EQ(ds.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(ds.status().message(), HasSubstr(path));
  EXPECT_THAT(ds.status().message(), HasSubstr("2001"));
  std::remove(path.c_str());
}

TEST(TokenWindowDataset, RejectsFileWithFewerTokensThanOneWindow) {
  const std::string path = TempPath("short.bin");
  WriteTokens<uint16_t>(path, 8);
  absl::StatusOr<std::shared_ptr<TokenWindowDataset>> ds =
      TokenWindowDataset::Open(path, {.seq_len = 8});
  ASSERT_FALSE(ds.ok());
  EXPECT_EQ(ds.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(ds.status().message(), HasSubstr("holds 8 tokens"));
  EXPECT_THAT(ds.status().message(), HasSubstr("seq_len + 1 = 9"));
  std::remove(path.c_str());
}

TEST(TokenWindowDataset, RejectsEmptyFile) {
  const std::string path = TempPath("empty.bin");
  WriteBytes(path, "", 0);
  absl::StatusOr<std::shared_ptr<TokenWindowDataset>> ds =
      TokenWindowDataset::Open(path, {.seq_len = 8});
  ASSERT_FALSE(ds.ok());
  EXPECT_EQ(ds.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(ds.status().message(), HasSubstr("holds 0 tokens"));
  std::remove(path.c_str());
}

TEST(TokenWindowDataset, RejectsBadOptions) {
  const std::string path = TempPath("options.bin");
  WriteTokens<uint16_t>(path, 100);
  const TokenWindowOptions bad[] = {
      {.token_bytes = 3, .seq_len = 4},
      {.token_bytes = 0, .seq_len = 4},
      {.seq_len = 0},
      {.seq_len = -5},
      {.seq_len = 4, .windows = -1},
      {.seq_len = int64_t{1} << 40},  // A sample far above 1 GiB.
      {.seq_len = std::numeric_limits<int64_t>::max(),
       .output = TokenOutput::kWindow},  // seq_len + 1 would overflow
      {.seq_len = 4, .output = static_cast<TokenOutput>(2)},
  };
  for (const TokenWindowOptions& options : bad) {
    absl::StatusOr<std::shared_ptr<TokenWindowDataset>> ds =
        TokenWindowDataset::Open(path, options);
    ASSERT_FALSE(ds.ok());
    EXPECT_EQ(ds.status().code(), absl::StatusCode::kInvalidArgument)
        << ds.status();
  }
  std::remove(path.c_str());
}

TEST(TokenWindowDataset, ReadReportsAnIndexOutOfRange) {
  const std::string path = TempPath("range.bin");
  WriteTokens<uint16_t>(path, 100);
  absl::StatusOr<std::shared_ptr<TokenWindowDataset>> ds =
      TokenWindowDataset::Open(path, {.seq_len = 9});
  ASSERT_TRUE(ds.ok());
  absl::StatusOr<BatchLayout> batch = BatchLayout::Create((*ds)->layout(), 1);
  ASSERT_TRUE(batch.ok());
  std::vector<std::byte> slot(batch->slot_bytes());
  SampleView view(*batch, slot.data(), 0, 10);
  EXPECT_EQ((*ds)->Read(10, view).code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ((*ds)->Read(-1, view).code(), absl::StatusCode::kOutOfRange);
  std::remove(path.c_str());
}

// --- Faults from the outside audit (issue 9) ---------------------------------

TEST(TokenWindowDataset, RejectsAFifoWithoutBlockingNamingItsType) {
  // Before the fix open() waited for a writer of the FIFO forever; this runs
  // on the test thread, so a hang is ctest's timeout.
  const std::string path = TempPath("fifo.bin");
  ::unlink(path.c_str());
  ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0) << std::strerror(errno);
  absl::Status status = TokenWindowDataset::Open(path, {.seq_len = 4}).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(status.message(), HasSubstr(path));
  EXPECT_THAT(status.message(), HasSubstr("FIFO"));
  ::unlink(path.c_str());
}

TEST(TokenWindowDataset,
     AWindowCountOf2To62OrInt64MaxOpensAndReadsItsLastWindow) {
  const std::string path = TempPath("huge_window_count.bin");
  const std::vector<int64_t> want = WriteTokens<uint16_t>(path, 1000);
  for (int64_t windows :
       {int64_t{1} << 62, std::numeric_limits<int64_t>::max()}) {
    absl::StatusOr<std::shared_ptr<TokenWindowDataset>> ds =
        TokenWindowDataset::Open(path, {.seq_len = 9, .windows = windows});
    ASSERT_TRUE(ds.ok()) << ds.status();
    EXPECT_EQ((*ds)->size(), windows);
    absl::StatusOr<BatchLayout> batch = BatchLayout::Create((*ds)->layout(), 1);
    ASSERT_TRUE(batch.ok());
    std::vector<std::byte> slot(batch->slot_bytes());
    SampleView view(*batch, slot.data(), 0, 0);
    for (int64_t index : {int64_t{0}, windows / 2, windows - 1}) {
      ASSERT_TRUE((*ds)->Read(index, view).ok()) << index;
      const int64_t start = (*ds)->WindowStart(index);
      ASSERT_GE(start, 0);
      ASSERT_LE(start, 1000 - 10);
      EXPECT_EQ(view.field_as<int64_t>(0)[0], want[start]);
      EXPECT_EQ(view.field_as<int64_t>(1)[8], want[start + 9]);
    }
    EXPECT_EQ((*ds)->Read(windows, view).code(), absl::StatusCode::kOutOfRange);
  }
  std::remove(path.c_str());
}

TEST(TokenWindowDataset, TwoTo62WindowsOverASparseOneTebibyteFileOpenAndRead) {
  const std::string path = TempPath("one_tebibyte.bin");
  constexpr uint64_t kFileBytes = uint64_t{1} << 40;  // 2^39 u16 tokens
  WriteBytes(path, "", 0);
  if (::truncate(path.c_str(), static_cast<off_t>(kFileBytes)) != 0) {
    const int error = errno;
    std::remove(path.c_str());
    GTEST_SKIP() << "this filesystem cannot hold a sparse 1 TiB file at "
                 << path << ": " << std::strerror(error);
  }
  constexpr int64_t kWindows = int64_t{1} << 62;
  absl::StatusOr<std::shared_ptr<TokenWindowDataset>> ds =
      TokenWindowDataset::Open(path, {.seq_len = 8, .windows = kWindows});
  if (!ds.ok()) {
    // A process whose address space cannot hold the mapping gets a clear
    // error naming the size, not a crash.
    EXPECT_EQ(ds.status().code(), absl::StatusCode::kResourceExhausted)
        << ds.status();
    EXPECT_THAT(ds.status().message(), HasSubstr(absl::StrCat(kFileBytes)));
    std::remove(path.c_str());
    GTEST_SKIP() << "the mapping does not fit here: " << ds.status();
  }
  EXPECT_EQ((*ds)->size(), kWindows);
  EXPECT_EQ((*ds)->tokens(), int64_t{1} << 39);
  // Put a known window where the last index starts (far past 4 GiB).
  const int64_t start = (*ds)->WindowStart(kWindows - 1);
  const uint16_t tokens[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(
        ::pwrite(fd, tokens, sizeof(tokens), static_cast<off_t>(start) * 2),
        static_cast<ssize_t>(sizeof(tokens)));
    ::close(fd);
  }
  absl::StatusOr<BatchLayout> batch = BatchLayout::Create((*ds)->layout(), 1);
  ASSERT_TRUE(batch.ok());
  std::vector<std::byte> slot(batch->slot_bytes());
  SampleView view(*batch, slot.data(), 0, 0);
  ASSERT_TRUE((*ds)->Read(kWindows - 1, view).ok());
  EXPECT_THAT(view.field_as<int64_t>(0), ElementsAre(1, 2, 3, 4, 5, 6, 7, 8));
  EXPECT_THAT(view.field_as<int64_t>(1), ElementsAre(2, 3, 4, 5, 6, 7, 8, 9));
  ASSERT_TRUE((*ds)->Read(kWindows / 3, view).ok());
  std::remove(path.c_str());
}

TEST(TokenWindowDataset,
     ReadOfAFileTruncatedInPlaceIsDataLossNamingFileAndWindow) {
  const std::string path = TempPath("truncated_under_reader.bin");
  WriteTokens<uint16_t>(path, 100000);  // 200 KB: many pages
  absl::StatusOr<std::shared_ptr<TokenWindowDataset>> ds =
      TokenWindowDataset::Open(path, {.seq_len = 9, .windows = 1000});
  ASSERT_TRUE(ds.ok()) << ds.status();
  // Someone else truncates the mapped file in place. (Before the fix: SIGBUS
  // for every window past the first page.)
  ASSERT_EQ(::truncate(path.c_str(), 2), 0);
  absl::StatusOr<BatchLayout> batch = BatchLayout::Create((*ds)->layout(), 1);
  ASSERT_TRUE(batch.ok());
  std::vector<std::byte> slot(batch->slot_bytes());
  SampleView view(*batch, slot.data(), 0, 0);
  for (int64_t index : {0, 1, 999}) {
    absl::Status status = (*ds)->Read(index, view);
    EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << status;
    EXPECT_THAT(status.message(), HasSubstr(path));
    EXPECT_THAT(status.message(), HasSubstr(absl::StrCat("window ", index)));
    EXPECT_THAT(status.message(),
                HasSubstr(absl::StrCat("bytes [", (*ds)->WindowStart(index) * 2,
                                       ", ")));
    EXPECT_THAT(status.message(), HasSubstr("now has 2 bytes"));
  }
  std::remove(path.c_str());
}

// Issue 18 item 6b: the size check before the copy out of the mapping
// left a window: a truncation between the two killed the process with
// SIGBUS. Reads go through pread now; the child survives.
TEST(TokenWindowDatasetDeathTest, TruncatingTheFileWhileReadsRunNeverKillsIt) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const std::string path = TempPath("truncated_while_read.bin");
  constexpr int64_t kTokens = 1 << 20;  // 2 MiB of u16
  WriteTokens<uint16_t>(path, kTokens);
  EXPECT_EXIT(
      ReadWhileTruncating(
          TokenWindowDataset::Open(path, {.seq_len = 1 << 14, .windows = 4096}),
          path, kTokens * 2, {.pause = std::chrono::microseconds(50)}),
      ::testing::ExitedWithCode(0), "");
  std::remove(path.c_str());
}

}  // namespace
}  // namespace pinwheel
