// CaseDir: a fresh, empty folder of the running test case, for the files a
// case writes (shards, image folders), removed with the fixture.
//
// Example:
//   class TarShardsTest : public ::testing::Test {
//    protected:
//     const CaseDir dir_{"tar_shards_"};
//   };
//   TEST_F(TarShardsTest, ...) { WriteFile(dir_.path() / "a.tar", ...); }
//
// Not thread-safe (one per case, made on the case's thread).
#ifndef PINWHEEL_TESTS_SUPPORT_CASE_DIR_H_
#define PINWHEEL_TESTS_SUPPORT_CASE_DIR_H_

#include <filesystem>
#include <gtest/gtest.h>
#include <string>
#include <unistd.h>

namespace pinwheel::testing_support {

class CaseDir {
 public:
  // Makes <::testing::TempDir()>/<prefix><the running case's name>_<pid>,
  // empty (whatever an earlier run left there is removed first); the pid
  // keeps two runs of one suite side by side apart.
  // REQUIRES: a test case is running (a fixture member qualifies).
  explicit CaseDir(const std::string& prefix)
      : path_(std::filesystem::path(::testing::TempDir()) /
              (prefix +
               ::testing::UnitTest::GetInstance()->current_test_info()->name() +
               "_" + std::to_string(::getpid()))) {
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~CaseDir() { std::filesystem::remove_all(path_); }
  CaseDir(const CaseDir&) = delete;
  CaseDir& operator=(const CaseDir&) = delete;

  const std::filesystem::path& path() const { return path_; }

 private:
  const std::filesystem::path path_;
};

}  // namespace pinwheel::testing_support

#endif  // PINWHEEL_TESTS_SUPPORT_CASE_DIR_H_
