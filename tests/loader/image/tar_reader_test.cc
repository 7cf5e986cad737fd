#include "loader/image/tar_reader.h"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include "tests/loader/image/test_tars.h"

namespace pinwheel {
namespace {

using ::pinwheel::testing::TarBuilder;
using ::testing::HasSubstr;

// Returns the names of every member, or the first error.
absl::StatusOr<std::vector<std::string>> Names(
    const std::vector<std::byte>& tar) {
  std::vector<std::string> names;
  uint64_t offset = 0;
  for (;;) {
    absl::StatusOr<std::optional<TarMember>> m =
        ReadTarMember(tar, offset, "t.tar");
    if (!m.ok()) return m.status();
    if (!m->has_value()) return names;
    names.push_back((*m)->name);
    offset = (*m)->next_offset;
  }
}

// Rewrites the checksum of the header at `at` after an edit.
void Reseal(std::vector<std::byte>& tar, size_t at) {
  for (size_t i = 148; i < 156; ++i) tar[at + i] = std::byte{' '};
  unsigned sum = 0;
  for (size_t i = 0; i < 512; ++i) sum += static_cast<unsigned>(tar[at + i]);
  char field[8];
  std::snprintf(field, sizeof(field), "%06o", sum);
  for (size_t i = 0; i < 7; ++i)
    tar[at + 148 + i] = static_cast<std::byte>(field[i]);
}

TEST(TarReader, ReadsMembersInOrder) {
  const std::vector<std::byte> tar = TarBuilder()
                                         .Add("a/1.jpg", std::string(700, 'x'))
                                         .Add("a/1.cls", "3\n")
                                         .Add("a/", "", '5')
                                         .Finish();
  absl::StatusOr<std::optional<TarMember>> m = ReadTarMember(tar, 0, "t.tar");
  ASSERT_TRUE(m.ok() && m->has_value()) << m.status();
  EXPECT_EQ((*m)->name, "a/1.jpg");
  EXPECT_EQ((*m)->size, 700u);
  EXPECT_EQ((*m)->data_offset, 512u);
  EXPECT_EQ((*m)->next_offset, 512u + 1024);
  EXPECT_TRUE((*m)->is_regular_file());
  absl::StatusOr<std::vector<std::string>> names = Names(tar);
  ASSERT_TRUE(names.ok()) << names.status();
  EXPECT_EQ(*names, (std::vector<std::string>{"a/1.jpg", "a/1.cls", "a/"}));
}

TEST(TarReader, TakesGnuLongNamesAndPaxPaths) {
  const std::string long_name = std::string(150, 'n') + ".jpg";
  const std::string record = "27 path=pax/dir/sample.cls\n";
  const std::vector<std::byte> tar =
      TarBuilder()
          .Add("././@LongLink", long_name + '\0', 'L')
          .Add("truncated", "data")
          .Add("PaxHeader", record, 'x')
          .Add("short", "1")
          .Finish();
  absl::StatusOr<std::vector<std::string>> names = Names(tar);
  ASSERT_TRUE(names.ok()) << names.status();
  EXPECT_EQ(*names,
            (std::vector<std::string>{long_name, "pax/dir/sample.cls"}));
}

TEST(TarReader, AcceptsAnArchiveWithoutEndBlocks) {
  std::vector<std::byte> tar = TarBuilder().Add("x.cls", "1").Finish();
  tar.resize(1024);
  absl::StatusOr<std::vector<std::string>> names = Names(tar);
  ASSERT_TRUE(names.ok()) << names.status();
  EXPECT_EQ(names->size(), 1u);
}

TEST(TarReader, NamesATruncatedHeader) {
  std::vector<std::byte> tar =
      TarBuilder().Add("x.cls", "1").Add("y.cls", "2").Finish();
  tar.resize(1024 + 100);
  absl::StatusOr<std::vector<std::string>> names = Names(tar);
  EXPECT_EQ(names.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(names.status().message(), HasSubstr("t.tar"));
  EXPECT_THAT(names.status().message(), HasSubstr("offset 1024"));
  EXPECT_THAT(names.status().message(), HasSubstr("cut short"));
}

TEST(TarReader, NamesABadChecksum) {
  std::vector<std::byte> tar = TarBuilder().Add("x.jpg", "1").Finish();
  tar[3] = std::byte{'!'};  // the name changes; the checksum does not
  absl::StatusOr<std::vector<std::string>> names = Names(tar);
  EXPECT_EQ(names.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(names.status().message(), HasSubstr("checksum"));
  EXPECT_THAT(names.status().message(), HasSubstr("x.j!g"));
}

TEST(TarReader, NamesASizeFieldThatLies) {
  std::vector<std::byte> tar = TarBuilder().Add("big.jpg", "12345").Finish();
  const char huge[] = "77777777777";  // 8 GiB - 1 in a 2 KiB archive
  for (size_t i = 0; i < 11; ++i)
    tar[124 + i] = static_cast<std::byte>(huge[i]);
  Reseal(tar, 0);
  absl::StatusOr<std::vector<std::string>> names = Names(tar);
  EXPECT_EQ(names.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(names.status().message(), HasSubstr("big.jpg"));
  EXPECT_THAT(names.status().message(), HasSubstr("past the end"));
  // GNU base-256 with every bit set.
  for (size_t i = 124; i < 136; ++i) tar[i] = std::byte{0xff};
  tar[124] = std::byte{0xbf};
  Reseal(tar, 0);
  EXPECT_EQ(Names(tar).status().code(), absl::StatusCode::kDataLoss);
  // Not a number.
  tar[124] = std::byte{'9'};
  Reseal(tar, 0);
  EXPECT_THAT(Names(tar).status().message(), HasSubstr("not a number"));
}

TEST(TarReader, NamesAMemberCutShortByTheEndOfTheFile) {
  std::vector<std::byte> tar =
      TarBuilder().Add("cut.jpg", std::string(2000, 'x')).Finish();
  tar.resize(512 + 1000);
  absl::StatusOr<std::vector<std::string>> names = Names(tar);
  EXPECT_EQ(names.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(names.status().message(), HasSubstr("cut.jpg"));
  EXPECT_THAT(names.status().message(), HasSubstr("claims 2000 bytes"));
}

TEST(TarReader, RefusesNonTarBytes) {
  std::vector<std::byte> png(600, std::byte{0x42});
  EXPECT_THAT(Names(png).status().message(), HasSubstr("checksum"));
  EXPECT_EQ(ReadTarMember(png, 7, "t.tar").status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(TarReader, NamesALongNameWithoutAMember) {
  std::vector<std::byte> tar =
      TarBuilder()
          .Add("././@LongLink", std::string("x.jpg") + '\0', 'L')
          .Finish();
  EXPECT_THAT(Names(tar).status().message(), HasSubstr("extension header"));
}

}  // namespace
}  // namespace pinwheel
