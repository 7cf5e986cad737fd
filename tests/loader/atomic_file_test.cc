// Tests of WriteFileAtomically and PublishFile: a file is replaced whole,
// no temporary file is left behind, and failures name the file and leave the
// old contents in place.
#include "loader/atomic_file.h"

#include <csignal>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <sys/resource.h>
#include <unistd.h>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pinwheel {
namespace {

using ::testing::HasSubstr;

class AtomicFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::path(::testing::TempDir()) /
           absl::StrCat(
               "atomic_file_test_", ::getpid(), "_",
               ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  static std::string Contents(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

  std::filesystem::path dir_;
};

TEST_F(AtomicFileTest, ReplacesTheFileWholeAndLeavesNoTemporaryFile) {
  const std::string path = (dir_ / "state.bin").string();
  ASSERT_TRUE(WriteFileAtomically(path, "old contents").ok());
  const std::string bytes("new\0contents", 12);
  ASSERT_TRUE(WriteFileAtomically(path, bytes).ok());
  EXPECT_EQ(Contents(path), bytes);
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
}

TEST_F(AtomicFileTest, OverwritesAStaleTemporaryFileOfAKilledWriter) {
  const std::string path = (dir_ / "state.bin").string();
  { std::ofstream(path + ".tmp") << "half a checkpoint from a killed run"; }
  ASSERT_TRUE(WriteFileAtomically(path, "whole").ok());
  EXPECT_EQ(Contents(path), "whole");
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
}

TEST_F(AtomicFileTest, AStaleTemporarySymlinkIsNotWrittenThrough) {
  // Before the fix open(path.tmp, O_TRUNC) followed the link: the victim
  // was overwritten, and `path` became a link to it.
  const std::string path = (dir_ / "state.bin").string();
  const std::string victim = (dir_ / "victim").string();
  { std::ofstream(victim) << "precious"; }
  ASSERT_EQ(::symlink(victim.c_str(), (path + ".tmp").c_str()), 0);
  ASSERT_TRUE(WriteFileAtomically(path, "new bytes").ok());
  EXPECT_EQ(Contents(victim), "precious");
  EXPECT_EQ(Contents(path), "new bytes");
  EXPECT_FALSE(std::filesystem::is_symlink(path));
}

TEST_F(AtomicFileTest, AStaleTemporaryHardLinkIsNotWrittenThrough) {
  const std::string path = (dir_ / "state.bin").string();
  const std::string victim = (dir_ / "victim").string();
  { std::ofstream(victim) << "precious"; }
  ASSERT_EQ(::link(victim.c_str(), (path + ".tmp").c_str()), 0);
  ASSERT_TRUE(WriteFileAtomically(path, "new bytes").ok());
  EXPECT_EQ(Contents(victim), "precious");
  EXPECT_EQ(Contents(path), "new bytes");
  EXPECT_EQ(std::filesystem::hard_link_count(victim), 1u);
}

TEST_F(AtomicFileTest, AFailedWriteRemovesTheTemporaryFileAndKeepsTheOld) {
  const std::string path = (dir_ / "state.bin").string();
  ASSERT_TRUE(WriteFileAtomically(path, "old contents").ok());
  // RLIMIT_FSIZE with SIGXFSZ ignored: the write fails with EFBIG, as one
  // to a full disk fails with ENOSPC.
  struct rlimit old_limit {};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old_limit), 0);
  struct sigaction ignore {};
  struct sigaction old_action {};
  ignore.sa_handler = SIG_IGN;
  ASSERT_EQ(::sigaction(SIGXFSZ, &ignore, &old_action), 0);
  struct rlimit limit = old_limit;
  limit.rlim_cur = 4096;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &limit), 0);
  const absl::Status s = WriteFileAtomically(path, std::string(65536, 'x'));
  ::setrlimit(RLIMIT_FSIZE, &old_limit);
  ::sigaction(SIGXFSZ, &old_action, nullptr);
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr(path + ".tmp"));
  EXPECT_EQ(Contents(path), "old contents");
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir_)) {
    names.push_back(entry.path().filename().string());
  }
  EXPECT_THAT(names, ::testing::ElementsAre("state.bin"));
}

TEST_F(AtomicFileTest, AMissingDirectoryIsNotFoundNamingTheTemporaryFile) {
  const std::string path = (dir_ / "no such dir" / "state.bin").string();
  absl::Status s = WriteFileAtomically(path, "x");
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound) << s;
  EXPECT_THAT(s.message(), HasSubstr(path + ".tmp"));
}

TEST_F(AtomicFileTest,
       AFailedRenameKeepsTheOldTargetAndRemovesTheTemporaryFile) {
  // A non-empty directory at `path`: rename() of a file over it fails.
  const std::string path = (dir_ / "occupied").string();
  std::filesystem::create_directories(dir_ / "occupied" / "inside");
  const std::string tmp = (dir_ / "new.tmp").string();
  { std::ofstream(tmp) << "new"; }
  absl::Status s = PublishFile(tmp, path);
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(s.message(),
              HasSubstr(absl::StrCat("cannot rename ", tmp, " to ", path)));
  EXPECT_FALSE(std::filesystem::exists(tmp));
  EXPECT_TRUE(std::filesystem::is_directory(dir_ / "occupied" / "inside"));
}

TEST_F(AtomicFileTest, PublishesIntoTheCurrentDirectoryWhenThePathHasNoSlash) {
  const std::filesystem::path before = std::filesystem::current_path();
  std::filesystem::current_path(dir_);
  const absl::Status s = WriteFileAtomically("here.bin", "bytes");
  std::filesystem::current_path(before);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(Contents((dir_ / "here.bin").string()), "bytes");
}

}  // namespace
}  // namespace pinwheel
