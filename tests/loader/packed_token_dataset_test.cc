// PackedTokenDataset: rows packed from whole documents (split only when
// longer than seq_len), targets and positions never crossing documents,
// cu_seqlens at the piece boundaries, the same rows from an EOS id or an
// offsets file, exact resume through the loader, and bad inputs named.
#include "loader/packed_token_dataset.h"

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <unistd.h>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

#include "loader/dataset.h"
#include "loader/loader.h"
#include "loader/loader_builder.h"
#include "loader/loader_checkpoint.h"
#include "loader/sampler.h"
#include "tests/support/drain_epoch.h"
#include "transfer/device.h"

namespace pinwheel {
namespace {

using ::testing::HasSubstr;
using testing_support::DrainEpoch;

constexpr int64_t kEos = 9;
constexpr int64_t kSeqLen = 8;
// Document lengths (each ends with the EOS token): 20 and 8 and 9 are
// longer than or equal to a row; the rest pack together.
const std::vector<int64_t> kLengths = {3, 5, 1, 20, 4, 8, 2, 2, 9, 6, 7, 1};

std::string TempPath(const std::string& name) {
  return absl::StrCat(::testing::TempDir(), "/packed_token_test_", getpid(),
                      "_", name);
}

// Removes every file WriteFile() wrote when the test program ends.
class ScratchFiles : public ::testing::Environment {
 public:
  static std::vector<std::string>& paths() {
    static std::vector<std::string> paths;
    return paths;
  }
  void TearDown() override {
    for (const std::string& path : paths()) std::remove(path.c_str());
  }
};
const ::testing::Environment* const kScratchFiles =
    ::testing::AddGlobalTestEnvironment(new ScratchFiles);

template <typename T>
std::string WriteFile(const std::string& name, const std::vector<T>& values) {
  const std::string path = TempPath(name);
  ScratchFiles::paths().push_back(path);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(values.data()),
            static_cast<std::streamsize>(values.size() * sizeof(T)));
  return path;
}

// Token j of document d: 100 * (d + 1) + j, its last the EOS.
std::vector<uint16_t> Tokens(std::vector<uint64_t>* offsets) {
  std::vector<uint16_t> tokens;
  offsets->assign(1, 0);
  for (size_t d = 0; d < kLengths.size(); ++d) {
    for (int64_t j = 0; j + 1 < kLengths[d]; ++j) {
      tokens.push_back(static_cast<uint16_t>(100 * (d + 1) + j));
    }
    tokens.push_back(kEos);
    offsets->push_back(tokens.size());
  }
  return tokens;
}

// One row read back.
struct Row {
  std::vector<int64_t> input, target, positions, documents;
  std::vector<int32_t> cu_seqlens;
};

Row ReadRow(const PackedTokenDataset& dataset, int64_t index) {
  absl::StatusOr<BatchLayout> layout = BatchLayout::Create(dataset.layout(), 1);
  EXPECT_TRUE(layout.ok());
  std::vector<std::byte> slot(layout->slot_bytes());
  SampleView view(*layout, slot.data(), 0, index);
  EXPECT_TRUE(dataset.Read(index, view).ok());
  auto copy = [&](int f, auto* out) {
    using T = typename std::remove_pointer_t<decltype(out)>::value_type;
    auto span = view.field_as<T>(f);
    out->assign(span.begin(), span.end());
  };
  Row row;
  copy(0, &row.input);
  copy(1, &row.target);
  copy(2, &row.positions);
  copy(3, &row.documents);
  copy(4, &row.cu_seqlens);
  return row;
}

std::shared_ptr<PackedTokenDataset> OpenEos() {
  std::vector<uint64_t> offsets;
  const std::string path = WriteFile("eos.bin", Tokens(&offsets));
  absl::StatusOr<std::shared_ptr<PackedTokenDataset>> dataset =
      PackedTokenDataset::Open(
          path, {.token_bytes = 2, .seq_len = kSeqLen, .eos_id = kEos});
  EXPECT_TRUE(dataset.ok()) << dataset.status();
  return dataset.ok() ? *dataset : nullptr;
}

TEST(PackedTokenDataset, RowsNeverMixPositionsOrTargetsAcrossDocuments) {
  std::shared_ptr<PackedTokenDataset> dataset = OpenEos();
  ASSERT_NE(dataset, nullptr);
  EXPECT_EQ(dataset->documents(), 12);
  // Every token of every document read exactly once, in order.
  std::map<int64_t, std::vector<int64_t>> seen;  // document -> tokens
  std::map<int64_t, int64_t> rows_of;            // document -> rows it is in
  for (int64_t r = 0; r < dataset->size(); ++r) {
    const Row row = ReadRow(*dataset, r);
    ASSERT_EQ(row.input.size(), 8u);
    int64_t piece = 0;
    for (size_t i = 0; i < row.input.size(); ++i) {
      const int64_t d = row.documents[i];
      if (d < 0) {  // padding, to the end of the row
        EXPECT_EQ(row.input[i], 0);
        EXPECT_EQ(row.target[i], -100);
        if (i > 0 && row.documents[i - 1] >= 0) {  // the first padding
          EXPECT_EQ(row.cu_seqlens[static_cast<size_t>(piece)],
                    static_cast<int32_t>(i));
        }
        continue;
      }
      const bool starts =
          i == 0 || row.documents[i - 1] != d || row.positions[i] == 0;
      if (starts) {
        EXPECT_EQ(row.cu_seqlens[static_cast<size_t>(piece)],
                  static_cast<int32_t>(i))
            << "row " << r << ": a piece starts at " << i;
        ++piece;
        if (i == 0 || row.documents[i - 1] != d) ++rows_of[d];
        EXPECT_EQ(row.positions[i], 0);
      } else {
        EXPECT_EQ(row.positions[i], row.positions[i - 1] + 1);
        EXPECT_EQ(row.documents[i - 1], d) << "a position crossed documents";
      }
      seen[d].push_back(row.input[i]);
      // The target is the document's next token, or ignored at its end.
      const int64_t j = static_cast<int64_t>(seen[d].size()) - 1;
      const int64_t length = kLengths[static_cast<size_t>(d)];
      const int64_t next = j + 1 == length - 1 ? kEos : 100 * (d + 1) + j + 1;
      EXPECT_EQ(row.target[i], j + 1 < length ? next : -100)
          << "row " << r << " column " << i;
    }
    for (size_t k = static_cast<size_t>(piece) + 1; k < row.cu_seqlens.size();
         ++k) {
      EXPECT_EQ(row.cu_seqlens[k], row.cu_seqlens[k - 1])
          << "past the last piece cu_seqlens repeats the filled length";
    }
  }
  for (size_t d = 0; d < kLengths.size(); ++d) {
    const auto& tokens = seen[static_cast<int64_t>(d)];
    ASSERT_EQ(static_cast<int64_t>(tokens.size()), kLengths[d]) << d;
    for (int64_t j = 0; j + 1 < kLengths[d]; ++j) {
      EXPECT_EQ(tokens[static_cast<size_t>(j)], 100 * (d + 1) + j);
    }
    // A document that fits a row is never split.
    const int64_t min_rows = (kLengths[d] + kSeqLen - 1) / kSeqLen;
    EXPECT_EQ(rows_of[static_cast<int64_t>(d)], min_rows)
        << "document " << d << " of " << kLengths[d] << " tokens";
  }
}

TEST(PackedTokenDataset, PacksGreedilyInFileOrder) {
  std::shared_ptr<PackedTokenDataset> dataset = OpenEos();
  ASSERT_NE(dataset, nullptr);
  // 3+5 | 1 | 20 split 8, 8, 4: 8 | 8 | 4+4 | 8 | 2+2 | 9 split 8, 1: 8 |
  // 1+6 | 7+1
  const std::vector<std::vector<int32_t>> expected = {
      {0, 3, 8}, {0, 1},    {0, 8}, {0, 8},    {0, 4, 8},
      {0, 8},    {0, 2, 4}, {0, 8}, {0, 1, 7}, {0, 7, 8}};
  ASSERT_EQ(dataset->size(), static_cast<int64_t>(expected.size()));
  for (int64_t r = 0; r < dataset->size(); ++r) {
    const Row row = ReadRow(*dataset, r);
    const auto& want = expected[static_cast<size_t>(r)];
    EXPECT_EQ(std::vector<int32_t>(row.cu_seqlens.begin(),
                                   row.cu_seqlens.begin() + want.size()),
              want)
        << "row " << r;
  }
}

TEST(PackedTokenDataset, AnOffsetsFileGivesTheSameRowsAsTheEosId) {
  std::shared_ptr<PackedTokenDataset> eos = OpenEos();
  ASSERT_NE(eos, nullptr);
  std::vector<uint64_t> offsets;
  const std::vector<uint16_t> tokens = Tokens(&offsets);
  const std::string path = WriteFile("offsets_tokens.bin", tokens);
  const std::string index = WriteFile("offsets.idx", offsets);
  auto by_offsets = PackedTokenDataset::Open(
      path, {.token_bytes = 2, .seq_len = kSeqLen, .offsets_path = index});
  ASSERT_TRUE(by_offsets.ok()) << by_offsets.status();
  ASSERT_EQ((*by_offsets)->size(), eos->size());
  for (int64_t r = 0; r < eos->size(); ++r) {
    const Row a = ReadRow(*eos, r);
    const Row b = ReadRow(**by_offsets, r);
    EXPECT_EQ(a.input, b.input);
    EXPECT_EQ(a.target, b.target);
    EXPECT_EQ(a.positions, b.positions);
    EXPECT_EQ(a.documents, b.documents);
    EXPECT_EQ(a.cu_seqlens, b.cu_seqlens);
  }
}

TEST(PackedTokenDataset, EmptyDocumentsAreSkippedAndNotCounted) {
  // Issue 35: offsets 0, 0, 0, 3, 3, 5, 5, 9 are 7 documents of which 3
  // hold tokens; documents() said 7.
  const std::vector<uint16_t> tokens = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  const std::vector<uint64_t> offsets = {0, 0, 0, 3, 3, 5, 5, 9};
  const std::string path = WriteFile("empties.bin", tokens);
  const std::string index = WriteFile("empties.idx", offsets);
  auto dataset = PackedTokenDataset::Open(
      path, {.token_bytes = 2, .seq_len = 4, .offsets_path = index});
  ASSERT_TRUE(dataset.ok()) << dataset.status();
  EXPECT_EQ((*dataset)->documents(), 3);
  EXPECT_EQ((*dataset)->tokens(), 9);
  // document_ids keep the file's numbering (offsets entry d): 2, 4, 6.
  std::set<int64_t> ids;
  for (int64_t r = 0; r < (*dataset)->size(); ++r) {
    for (int64_t id : ReadRow(**dataset, r).documents) {
      if (id >= 0) ids.insert(id);
    }
  }
  EXPECT_EQ(ids, (std::set<int64_t>{2, 4, 6}));
}

TEST(PackedTokenDataset, AFileTruncatedInPlaceIsDataLossNamingTheRange) {
  // Issue 35, item 2's rule for every file read while it may change: the
  // rows are read with pread, so a truncation is a DataLoss naming the file
  // and the byte range (the mapping it replaced could raise SIGBUS).
  std::vector<uint64_t> offsets;
  const std::string path = WriteFile("shrinks.bin", Tokens(&offsets));
  auto dataset = PackedTokenDataset::Open(
      path, {.token_bytes = 2, .seq_len = kSeqLen, .eos_id = kEos});
  ASSERT_TRUE(dataset.ok()) << dataset.status();
  ASSERT_GE((*dataset)->size(), 3);
  std::filesystem::resize_file(path, 10);
  absl::StatusOr<BatchLayout> layout =
      BatchLayout::Create((*dataset)->layout(), 1);
  ASSERT_TRUE(layout.ok());
  std::vector<std::byte> slot(layout->slot_bytes());
  SampleView view(*layout, slot.data(), 0, 0);
  const absl::Status s = (*dataset)->Read((*dataset)->size() - 1, view);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_THAT(s.message(), HasSubstr(path));
  EXPECT_THAT(s.message(), HasSubstr("needs bytes ["));
  EXPECT_THAT(s.message(), HasSubstr("now has 10 bytes"));
}

TEST(PackedTokenDataset, ResumesExactlyThroughTheLoader) {
  std::shared_ptr<PackedTokenDataset> dataset = OpenEos();
  ASSERT_NE(dataset, nullptr);
  auto build = [&](int rank, int world) {
    LoaderBuilder builder(dataset);
    builder.batch_size(2)
        .shuffle(5)
        .distributed(rank, world)
        .num_workers(2)
        .device(Device::Host());
    return builder;
  };
  absl::StatusOr<Loader> whole = build(0, 1).Build();
  ASSERT_TRUE(whole.ok()) << whole.status();
  const std::vector<int64_t> expected = DrainEpoch(*whole).indices();
  for (int64_t k = 0; k <= 5; ++k) {
    absl::StatusOr<Loader> first = build(0, 1).Build();
    ASSERT_TRUE(first.ok());
    std::vector<int64_t> got;
    for (int64_t b = 0; b < k; ++b) {
      auto next = first->Next();
      ASSERT_TRUE(next.ok() && next->has_value());
      EXPECT_EQ((*next)->field(0).shape, (std::vector<int64_t>{2, 8}));
      for (int64_t i : (*next)->sample_indices()) got.push_back(i);
    }
    absl::StatusOr<LoaderCheckpoint> checkpoint = first->Checkpoint();
    ASSERT_TRUE(checkpoint.ok());
    absl::StatusOr<Loader> second = build(0, 1).resume(*checkpoint).Build();
    ASSERT_TRUE(second.ok());
    for (int64_t i : DrainEpoch(*second).indices()) got.push_back(i);
    EXPECT_EQ(got, expected) << "resumed after " << k;
  }
}

TEST(PackedTokenDataset, ResumesOnTwoRanksWithTheRestOfTheEpochOnce) {
  std::shared_ptr<PackedTokenDataset> dataset = OpenEos();
  ASSERT_NE(dataset, nullptr);
  ASSERT_EQ(dataset->size(), 10);
  auto build = [&](int rank, int world) {
    LoaderBuilder builder(dataset);
    builder.batch_size(2)
        .shuffle(5)
        .distributed(rank, world)
        .num_workers(1)
        .device(Device::Host());
    return builder;
  };
  absl::StatusOr<Loader> one = build(0, 1).Build();
  ASSERT_TRUE(one.ok());
  for (int b = 0; b < 2; ++b) ASSERT_TRUE(one->Next().ok());
  absl::StatusOr<LoaderCheckpoint> checkpoint = one->Checkpoint();
  ASSERT_TRUE(checkpoint.ok());
  ASSERT_EQ(checkpoint->position, 4);
  std::multiset<int64_t> rest;
  for (int rank = 0; rank < 2; ++rank) {
    absl::StatusOr<Loader> loader = build(rank, 2).resume(*checkpoint).Build();
    ASSERT_TRUE(loader.ok()) << loader.status();
    for (int64_t i : DrainEpoch(*loader).indices()) rest.insert(i);
  }
  const std::vector<int64_t> order = Permutation(10, 5, 0);
  EXPECT_EQ(rest, std::multiset<int64_t>(order.begin() + 4, order.end()));
}

TEST(PackedTokenDataset, RejectsBadOptionsAndOffsetsNamingThem) {
  std::vector<uint64_t> offsets;
  const std::string path = WriteFile("bad_tokens.bin", Tokens(&offsets));
  struct Case {
    PackedTokenOptions options;
    absl::StatusCode code;
    const char* says;
  };
  std::vector<uint64_t> not_zero = offsets;
  not_zero[0] = 1;
  std::vector<uint64_t> decreasing = offsets;
  decreasing[3] = decreasing[2] - 1;
  std::vector<uint64_t> short_end = offsets;
  short_end.back() -= 1;
  const std::vector<Case> cases = {
      {{.seq_len = 8}, absl::StatusCode::kInvalidArgument, "exactly one"},
      {{.seq_len = 8, .eos_id = 9, .offsets_path = "x"},
       absl::StatusCode::kInvalidArgument,
       "exactly one"},
      {{.seq_len = 0, .eos_id = 9},
       absl::StatusCode::kInvalidArgument,
       "'seq_len' = 0"},
      {{.token_bytes = 3, .eos_id = 9},
       absl::StatusCode::kInvalidArgument,
       "'token_bytes' = 3"},
      {{.token_bytes = 2, .eos_id = 70000},
       absl::StatusCode::kInvalidArgument,
       "'eos_id' = 70000"},
      {{.offsets_path = WriteFile("nz.idx", not_zero)},
       absl::StatusCode::kDataLoss,
       "entry 0 = 1"},
      {{.offsets_path = WriteFile("dec.idx", decreasing)},
       absl::StatusCode::kDataLoss,
       "entry 3 ="},
      {{.offsets_path = WriteFile("end.idx", short_end)},
       absl::StatusCode::kDataLoss,
       "entry 12 ="},
      {{.offsets_path = WriteFile("odd.idx", std::vector<uint8_t>{0, 0, 0})},
       absl::StatusCode::kDataLoss,
       "3 bytes"},
  };
  for (const Case& c : cases) {
    auto dataset = PackedTokenDataset::Open(path, c.options);
    ASSERT_FALSE(dataset.ok()) << c.says;
    EXPECT_EQ(dataset.status().code(), c.code) << dataset.status();
    EXPECT_THAT(dataset.status().message(), HasSubstr(c.says));
  }
}

}  // namespace
}  // namespace pinwheel
