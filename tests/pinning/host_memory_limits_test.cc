// Tests of ReadMemoryLimits: cgroup v1 and v2 limits, their ancestors, "max"
// and v1's "unlimited", absent files, and this machine's RAM. (The admission
// that uses them: tests/loader/pipeline/memory_admission_test.cc.)
#include "pinning/host_memory_limits.h"

#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include "tests/support/fake_cgroup.h"

namespace pinwheel {
namespace {

using ::pinwheel::testing_support::FakeCgroup;
using ::testing::HasSubstr;

constexpr uint64_t kGiB = uint64_t{1} << 30;

TEST(ReadMemoryLimits, ACgroupV2LimitBelowRamIsReadAndNamesItsFile) {
  FakeCgroup fake("v2");
  fake.Write("proc/self/cgroup", "0::/job/trainer\n");
  fake.Write("sys/fs/cgroup/job/trainer/memory.max", "4294967296\n");
  const MemoryLimits limits = ReadMemoryLimits(fake.Sources(64 * kGiB));
  ASSERT_TRUE(limits.cgroup_bytes.has_value());
  EXPECT_EQ(*limits.cgroup_bytes, 4 * kGiB);
  const std::string file =
      absl::StrCat(fake.root(), "/sys/fs/cgroup/job/trainer/memory.max");
  EXPECT_EQ(limits.cgroup_file, file);
}

TEST(ReadMemoryLimits, ACgroupV2MaxMeansNoLimit) {
  FakeCgroup fake("v2_max");
  fake.Write("proc/self/cgroup", "0::/job\n");
  fake.Write("sys/fs/cgroup/job/memory.max", "max\n");
  const MemoryLimits limits = ReadMemoryLimits(fake.Sources(8 * kGiB));
  EXPECT_FALSE(limits.cgroup_bytes.has_value());
  EXPECT_EQ(limits.physical_bytes, 8 * kGiB);
}

TEST(ReadMemoryLimits, AnAncestorsSmallerLimitCounts) {
  FakeCgroup fake("v2_ancestor");
  fake.Write("proc/self/cgroup", "0::/a/b/c\n");
  fake.Write("sys/fs/cgroup/a/b/c/memory.max", "max\n");
  fake.Write("sys/fs/cgroup/a/b/memory.max", "2147483648\n");
  fake.Write("sys/fs/cgroup/a/memory.max", "3221225472\n");
  const MemoryLimits limits = ReadMemoryLimits(fake.Sources(8 * kGiB));
  ASSERT_TRUE(limits.cgroup_bytes.has_value());
  EXPECT_EQ(*limits.cgroup_bytes, 2 * kGiB);
  EXPECT_THAT(limits.cgroup_file, HasSubstr("/a/b/memory.max"));
}

TEST(ReadMemoryLimits, AbsentCgroupFilesMeanNoLimit) {
  FakeCgroup fake("absent");
  // No /proc/self/cgroup at all.
  EXPECT_FALSE(ReadMemoryLimits(fake.Sources(8 * kGiB)).cgroup_bytes);
  // A membership whose directory has no limit file.
  fake.Write("proc/self/cgroup", "0::/nowhere\n");
  const MemoryLimits limits = ReadMemoryLimits(fake.Sources(8 * kGiB));
  EXPECT_FALSE(limits.cgroup_bytes.has_value());
}

TEST(ReadMemoryLimits,
     ACgroupV1MemoryLimitIsReadAndItsUnlimitedValueIsNoLimit) {
  FakeCgroup fake("v1");
  fake.Write("proc/self/cgroup",
             "9:name=systemd:/\n4:cpu,memory:/docker/abc\n1:cpu:/\n");
  fake.Write("sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes",
             "1073741824\n");
  fake.Write("sys/fs/cgroup/memory/memory.limit_in_bytes",
             "9223372036854771712\n");
  MemoryLimits limits = ReadMemoryLimits(fake.Sources(8 * kGiB));
  ASSERT_TRUE(limits.cgroup_bytes.has_value());
  EXPECT_EQ(*limits.cgroup_bytes, kGiB);
  EXPECT_THAT(limits.cgroup_file,
              HasSubstr("memory/docker/abc/memory.limit_in_bytes"));

  fake.Write("sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes",
             "9223372036854771712\n");
  limits = ReadMemoryLimits(fake.Sources(8 * kGiB));
  EXPECT_FALSE(limits.cgroup_bytes.has_value());
}

TEST(ReadMemoryLimits, OnThisMachineFindsThePhysicalMemory) {
  const MemoryLimits limits = ReadMemoryLimits();
  ASSERT_TRUE(limits.physical_bytes.has_value());
  EXPECT_GT(*limits.physical_bytes, 0u);
  if (limits.cgroup_bytes) {
    EXPECT_FALSE(limits.cgroup_file.empty());
  }
}

}  // namespace
}  // namespace pinwheel
