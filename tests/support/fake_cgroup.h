// FakeCgroup: a scratch cgroup filesystem and /proc/self/cgroup of a test's
// own, for ReadMemoryLimits (pinning/host_memory_limits.h).
//
// Example:
//   FakeCgroup fake("v2");
//   fake.Write("proc/self/cgroup", "0::/job\n");
//   fake.Write("sys/fs/cgroup/job/memory.max", "4294967296\n");
//   const MemoryLimits limits = ReadMemoryLimits(fake.Sources(8 * kGiB));
#ifndef PINWHEEL_TESTS_SUPPORT_FAKE_CGROUP_H_
#define PINWHEEL_TESTS_SUPPORT_FAKE_CGROUP_H_

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <string>
#include <unistd.h>

#include "absl/strings/str_cat.h"

#include "pinning/host_memory_limits.h"

namespace pinwheel::testing_support {

// Owns a directory under the test's temporary directory, named after the
// process and `name`, removed on destruction. Not thread-safe.
class FakeCgroup {
 public:
  explicit FakeCgroup(const std::string& name)
      : root_(absl::StrCat(::testing::TempDir(), "/fake_cgroup_", getpid(), "_",
                           name)) {
    std::filesystem::remove_all(root_);
    std::filesystem::create_directories(root_);
  }
  ~FakeCgroup() { std::filesystem::remove_all(root_); }
  FakeCgroup(const FakeCgroup&) = delete;
  FakeCgroup& operator=(const FakeCgroup&) = delete;

  // Writes `text` to <root>/<relative>, creating its directories.
  void Write(const std::string& relative, const std::string& text) {
    const std::filesystem::path path = std::filesystem::path(root_) / relative;
    std::filesystem::create_directories(path.parent_path());
    std::ofstream(path) << text;
  }

  // Returns sources that read the fake files, with `physical` bytes of RAM.
  MemoryLimitSources Sources(uint64_t physical) const {
    return {.cgroup_root = absl::StrCat(root_, "/sys/fs/cgroup"),
            .proc_self_cgroup = absl::StrCat(root_, "/proc/self/cgroup"),
            .physical_bytes = physical};
  }
  std::string root() const { return root_; }

 private:
  std::string root_;
};

}  // namespace pinwheel::testing_support

#endif  // PINWHEEL_TESTS_SUPPORT_FAKE_CGROUP_H_
