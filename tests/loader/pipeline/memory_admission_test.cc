// Tests of AdmitHostMemory: the ring and the pool are checked together
// against the smallest of RAM and the cgroup limit, the message speaks the
// loader's option names, and the limits read from a (fake) cgroup are the
// ones the admission names.
#include "loader/pipeline/memory_admission.h"

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include "pinning/host_memory_limits.h"
#include "tests/support/fake_cgroup.h"

namespace pinwheel {
namespace {

using ::pinwheel::internal::AdmitHostMemory;
using ::pinwheel::internal::HostMemoryPlan;
using ::pinwheel::testing_support::FakeCgroup;
using ::testing::HasSubstr;

constexpr uint64_t kGiB = uint64_t{1} << 30;

TEST(AdmitHostMemory,
     RingAndPoolThatEachFitButTogetherExceedRamAreResourceExhausted) {
  // Before this check the ring and the pool were each compared with RAM
  // alone: 6 GiB + 6 GiB on an 8 GiB machine passed both and was then
  // touched page by page.
  const MemoryLimits limits{.physical_bytes = 8 * kGiB};
  const HostMemoryPlan ring_alone{.ring_slots = 3, .slot_bytes = 2 * kGiB};
  const HostMemoryPlan pool_alone{.pool_buffers = 3,
                                  .pool_buffer_bytes = 2 * kGiB};
  EXPECT_TRUE(AdmitHostMemory(ring_alone, limits).ok());
  EXPECT_TRUE(AdmitHostMemory(pool_alone, limits).ok());

  absl::Status status = AdmitHostMemory({.ring_slots = 3,
                                         .slot_bytes = 2 * kGiB,
                                         .pool_buffers = 3,
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
  EXPECT_THAT(status.message(),
              HasSubstr("12884901888 bytes (12288 MiB) in all"));
  EXPECT_THAT(status.message(),
              HasSubstr("physical memory 8589934592 bytes (8192 MiB)"));
}

TEST(AdmitHostMemory, TheRingIsDescribedInTheLoadersOptionsWhenGiven) {
  absl::Status status =
      AdmitHostMemory({.ring_slots = 4,
                       .slot_bytes = kGiB,
                       .batch_size = 64,
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
  EXPECT_TRUE(AdmitHostMemory({.ring_slots = 2,
                               .slot_bytes = 2 * kGiB,
                               .pool_buffers = 2,
                               .pool_buffer_bytes = 2 * kGiB},
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
  EXPECT_TRUE(AdmitHostMemory({.ring_slots = 4, .slot_bytes = 64 * kGiB},
                              MemoryLimits{})
                  .ok());
}

// --- With the limits ReadMemoryLimits finds in a fake cgroup ---------------

TEST(AdmitHostMemory, ACgroupV2LimitBelowRamIsTheLimitHitAndNamesItsFile) {
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
  EXPECT_TRUE(
      AdmitHostMemory({.ring_slots = 3, .slot_bytes = kGiB}, limits).ok());
  EXPECT_TRUE(
      AdmitHostMemory({.pool_buffers = 2, .pool_buffer_bytes = kGiB}, limits)
          .ok());
  absl::Status status = AdmitHostMemory({.ring_slots = 3,
                                         .slot_bytes = kGiB,
                                         .pool_buffers = 2,
                                         .pool_buffer_bytes = kGiB},
                                        limits);
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted) << status;
  EXPECT_THAT(status.message(),
              HasSubstr(absl::StrCat("the cgroup memory limit 4294967296 bytes "
                                     "(4096 MiB) of ",
                                     file)));
  EXPECT_THAT(status.message(),
              HasSubstr("5368709120 bytes (5120 MiB) in all"));
}

TEST(AdmitHostMemory, AbsentCgroupFilesMeanNoLimit) {
  FakeCgroup fake("absent");
  // No /proc/self/cgroup at all.
  EXPECT_FALSE(ReadMemoryLimits(fake.Sources(8 * kGiB)).cgroup_bytes);
  // A membership whose directory has no limit file.
  fake.Write("proc/self/cgroup", "0::/nowhere\n");
  const MemoryLimits limits = ReadMemoryLimits(fake.Sources(8 * kGiB));
  EXPECT_FALSE(limits.cgroup_bytes.has_value());
  EXPECT_TRUE(
      AdmitHostMemory({.ring_slots = 2, .slot_bytes = 3 * kGiB}, limits).ok());
}

TEST(AdmitHostMemory, ACgroupLimitAboveRamLeavesRamAsTheLimitHit) {
  FakeCgroup fake("above_ram");
  fake.Write("proc/self/cgroup", "0::/\n");
  fake.Write("sys/fs/cgroup/memory.max", "17179869184\n");  // 16 GiB
  const MemoryLimits limits = ReadMemoryLimits(fake.Sources(8 * kGiB));
  absl::Status status =
      AdmitHostMemory({.ring_slots = 3, .slot_bytes = 3 * kGiB}, limits);
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted) << status;
  EXPECT_THAT(status.message(), HasSubstr("physical memory"));
}

}  // namespace
}  // namespace pinwheel
