#include "loader/storage/local_file_store.h"

#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include "loader/storage/open_object_store.h"
#include "tests/loader/storage/storage_test_files.h"

namespace pinwheel {
namespace {

using ::testing::HasSubstr;
using testing_support::PatternBytes;
using testing_support::TempDir;
using testing_support::WritePatternFile;

TEST(LocalFileStore, ReadsRangesOfPathsAndFileUrls) {
  TempDir dir("local_file_store_test");
  WritePatternFile(dir.path(), "a.bin", 5000);
  const std::string path = (dir.path() / "a.bin").string();
  auto store = OpenObjectStore(path);
  ASSERT_TRUE(store.ok());
  EXPECT_EQ(*(*store)->Size(path), 5000);
  EXPECT_EQ(*(*store)->Size("file://" + path), 5000);
  std::vector<std::byte> a(100), b(4000);
  const RangeRead reads[] = {{path, 10, absl::MakeSpan(a)},
                             {"file://" + path, 1000, absl::MakeSpan(b)}};
  ASSERT_TRUE((*store)->Read(reads).ok());
  EXPECT_EQ(a, PatternBytes("a.bin", 10, 100));
  EXPECT_EQ(b, PatternBytes("a.bin", 1000, 4000));
}

TEST(LocalFileStore, MissingFilesAndRangesPastTheEndAreNamed) {
  TempDir dir("local_file_store_test2");
  WritePatternFile(dir.path(), "a.bin", 50);
  const std::string path = (dir.path() / "a.bin").string();
  LocalFileStore store;
  EXPECT_EQ(store.Size(path + "x").status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(store.Size(dir.path().string()).status().code(),
            absl::StatusCode::kInvalidArgument);
  std::vector<std::byte> out(10);
  const RangeRead read = {path, 45, absl::MakeSpan(out)};
  const absl::Status status = store.Read({&read, 1});
  EXPECT_EQ(status.code(), absl::StatusCode::kOutOfRange);
  EXPECT_THAT(status.message(), HasSubstr(path));
  EXPECT_THAT(status.message(), HasSubstr("50 bytes"));
}

}  // namespace
}  // namespace pinwheel
