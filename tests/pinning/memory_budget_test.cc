#include "pinning/memory_budget.h"

#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pinwheel {
namespace {

using ::testing::HasSubstr;

constexpr uint64_t kGiB = uint64_t{1} << 30;

// A scratch cgroup filesystem and /proc/self/cgroup of the test's own.
class FakeCgroup {
 public:
  explicit FakeCgroup(const std::string& name)
      : root_(absl::StrCat(::testing::TempDir(), "/memory_budget_test_",
                           getpid(), "_", name)) {
    std::filesystem::remove_all(root_);
    std::filesystem::create_directories(root_);
  }
  ~FakeCgroup() { std::filesystem::remove_all(root_); }

  // Writes `text` to <root>/<relative>, creating its directories.
  void Write(const std::string& relative, const std::string& text) {
    const std::filesystem::path path = std::filesystem::path(root_) / relative;
    std::filesystem::create_directories(path.parent_path());
    std::ofstream(path) << text;
  }

  MemoryLimitSources Sources(uint64_t physical) const {
    return {.cgroup_root = absl::StrCat(root_, "/sys/fs/cgroup"),
            .proc_self_cgroup = absl::StrCat(root_, "/proc/self/cgroup"),
            .physical_bytes = physical};
  }
  std::string root() const { return root_; }

 private:
  std::string root_;
};

TEST(AdmitHostMemory, RingAndPoolThatEachFitButTogetherExceedRamAreResourceExhausted) {
  // Before this check the ring and the pool were each compared with RAM
  // alone: 6 GiB + 6 GiB on an 8 GiB machine passed both and was then
  // touched page by page.
  const MemoryLimits limits{.physical_bytes = 8 * kGiB};
  const HostMemoryPlan ring_alone{.ring_slots = 3, .slot_bytes = 2 * kGiB};
  const HostMemoryPlan pool_alone{.pool_buffers = 3,
                                  .pool_buffer_bytes = 2 * kGiB};
  EXPECT_TRUE(AdmitHostMemory(ring_alone, limits).ok());
  EXPECT_TRUE(AdmitHostMemory(pool_alone, limits).ok());

  absl::Status status = AdmitHostMemory(
      {.ring_slots = 3, .slot_bytes = 2 * kGiB, .pool_buffers = 3,
       .pool_buffer_bytes = 2 * kGiB},
      limits);
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted) << status;
  EXPECT_THAT(status.message(),
              HasSubstr("pinned ring of prefetch = 3 × 2147483648 bytes = "
                        "6442450944 bytes"));
  EXPECT_THAT(status.message(),
              HasSubstr("device buffer pool in host memory (host backend) of "
                        "device_buffers = 3 × 2147483648 bytes = 6442450944 "
                        "bytes"));
  EXPECT_THAT(status.message(), HasSubstr("12884901888 bytes (12288 MiB) in all"));
  EXPECT_THAT(status.message(),
              HasSubstr("physical memory 8589934592 bytes (8192 MiB)"));
}

TEST(AdmitHostMemory, TheRingIsDescribedInTheLoadersOptionsWhenGiven) {
  absl::Status status = AdmitHostMemory(
      {.ring_slots = 4, .slot_bytes = kGiB, .batch_size = 64,
       .sample_bytes = 16 << 20},
      MemoryLimits{.physical_bytes = 2 * kGiB});
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted) << status;
  EXPECT_THAT(status.message(),
              HasSubstr("pinned ring of prefetch = 4 × 1073741824 bytes "
                        "(batch_size 64 × 16777216 bytes per sample) = "
                        "4294967296 bytes"));
  EXPECT_THAT(status.message(), HasSubstr("lower prefetch, batch_size or "
                                          "device_buffers"));
}

TEST(AdmitHostMemory, APlanExactlyAtTheLimitIsAdmitted) {
  const MemoryLimits limits{.physical_bytes = 8 * kGiB};
  EXPECT_TRUE(AdmitHostMemory({.ring_slots = 2, .slot_bytes = 2 * kGiB,
                               .pool_buffers = 2, .pool_buffer_bytes = 2 * kGiB},
                              limits)
                  .ok());
}

TEST(AdmitHostMemory, SlotsAreCountedRoundedUpToAPageAsTheRingAllocatesThem) {
  // 2 slots of 4097 bytes take 2 × 8192 bytes.
  const MemoryLimits limits{.physical_bytes = 16383};
  absl::Status status =
      AdmitHostMemory({.ring_slots = 2, .slot_bytes = 4097}, limits);
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted) << status;
  EXPECT_THAT(status.message(), HasSubstr("prefetch = 2 × 8192 bytes (4097 "
                                          "rounded up to a multiple of 4096)"));
}

TEST(AdmitHostMemory, AnOverflowingPlanIsResourceExhaustedNotAWrappedSum) {
  absl::Status status = AdmitHostMemory(
      {.ring_slots = 1024, .slot_bytes = SIZE_MAX / 2}, MemoryLimits{});
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted) << status;
  EXPECT_THAT(status.message(), HasSubstr("overflows 64 bits"));
}

TEST(AdmitHostMemory, WithNoLimitKnownEverythingIsAdmitted) {
  EXPECT_TRUE(
      AdmitHostMemory({.ring_slots = 4, .slot_bytes = 64 * kGiB}, MemoryLimits{})
          .ok());
}

TEST(ReadMemoryLimits, ACgroupV2LimitBelowRamIsTheLimitHitAndNamesItsFile) {
  FakeCgroup fake("v2");
  fake.Write("proc/self/cgroup", "0::/job/trainer\n");
  fake.Write("sys/fs/cgroup/job/trainer/memory.max", "4294967296\n");
  const MemoryLimits limits = ReadMemoryLimits(fake.Sources(64 * kGiB));
  ASSERT_TRUE(limits.cgroup_bytes.has_value());
  EXPECT_EQ(*limits.cgroup_bytes, 4 * kGiB);
  const std::string file =
      absl::StrCat(fake.root(), "/sys/fs/cgroup/job/trainer/memory.max");
  EXPECT_EQ(limits.cgroup_file, file);

  // Each part alone fits 4 GiB; their sum does not.
  EXPECT_TRUE(AdmitHostMemory({.ring_slots = 3, .slot_bytes = kGiB}, limits).ok());
  EXPECT_TRUE(AdmitHostMemory({.pool_buffers = 2, .pool_buffer_bytes = kGiB},
                              limits)
                  .ok());
  absl::Status status =
      AdmitHostMemory({.ring_slots = 3, .slot_bytes = kGiB, .pool_buffers = 2,
                       .pool_buffer_bytes = kGiB},
                      limits);
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted) << status;
  EXPECT_THAT(status.message(),
              HasSubstr(absl::StrCat("the cgroup memory limit 4294967296 bytes "
                                     "(4096 MiB) of ",
                                     file)));
  EXPECT_THAT(status.message(), HasSubstr("5368709120 bytes (5120 MiB) in all"));
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
  EXPECT_TRUE(AdmitHostMemory({.ring_slots = 2, .slot_bytes = 3 * kGiB}, limits)
                  .ok());
}

TEST(ReadMemoryLimits, ACgroupV1MemoryLimitIsReadAndItsUnlimitedValueIsNoLimit) {
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

TEST(ReadMemoryLimits, ACgroupLimitAboveRamLeavesRamAsTheLimitHit) {
  FakeCgroup fake("above_ram");
  fake.Write("proc/self/cgroup", "0::/\n");
  fake.Write("sys/fs/cgroup/memory.max", "17179869184\n");  // 16 GiB
  const MemoryLimits limits = ReadMemoryLimits(fake.Sources(8 * kGiB));
  absl::Status status =
      AdmitHostMemory({.ring_slots = 3, .slot_bytes = 3 * kGiB}, limits);
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted) << status;
  EXPECT_THAT(status.message(), HasSubstr("physical memory"));
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
