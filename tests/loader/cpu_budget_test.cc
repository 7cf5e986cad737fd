// Tests of ReadCpuBudget: the calling thread's affinity mask (narrowed with
// sched_setaffinity and restored), cgroup v2 cpu.max and v1
// cpu.cfs_quota_us / cpu.cfs_period_us found through a fake
// /proc/self/cgroup and /proc/self/mountinfo ("max", -1, fractional
// quotas, ancestors, a mounted subtree, missing and garbled files); and the
// line CpuOversubscription() says, per launcher. (What Build() does with
// them: tests/loader/loader_builder_test.cc.)
#include "loader/cpu_budget.h"

#include <cstdio>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

#include "tests/support/fake_cgroup.h"

namespace pinwheel {
namespace {

using ::pinwheel::testing_support::FakeCgroup;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

// The mountinfo lines of a cgroup v2 machine, and of a v1 (hybrid) one.
constexpr char kV2MountInfo[] =
    "22 1 0:21 / / rw,relatime - overlay overlay rw\n"
    "30 22 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime - cgroup2 "
    "cgroup2 rw,nsdelegate\n";
constexpr char kV1MountInfo[] =
    "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
    "32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime shared:9 - cgroup "
    "cgroup rw,cpu,cpuacct\n"
    "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup "
    "rw,memory\n"
    "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";

// Sources reading `fake`, with eight CPUs online, all allowed.
CpuBudgetSources Sources(const FakeCgroup& fake) {
  return {.proc_root = absl::StrCat(fake.root(), "/proc"),
          .fs_root = fake.root(),
          .affinity = std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7},
          .online_cpus = 8};
}

TEST(ReadCpuBudget, ACgroupV2QuotaIsFoundThroughMountinfoAndRoundedUp) {
  FakeCgroup fake("cpu_v2");
  fake.Write("proc/self/cgroup", "0::/job/trainer\n");
  fake.Write("proc/self/mountinfo", kV2MountInfo);
  fake.Write("sys/fs/cgroup/job/trainer/cpu.max", "150000 100000\n");
  const CpuBudget budget = ReadCpuBudget(Sources(fake));
  EXPECT_DOUBLE_EQ(budget.quota_cpus, 1.5);
  EXPECT_EQ(budget.cpus, 2);
  EXPECT_EQ(budget.limited_by, kCpuLimitQuota);
  EXPECT_EQ(budget.quota_file,
            absl::StrCat(fake.root(), "/sys/fs/cgroup/job/trainer/cpu.max"));
  EXPECT_EQ(budget.quota_text, "150000 100000");
  EXPECT_EQ(budget.unread, "");
  EXPECT_THAT(budget.ToString(),
              AllOf(HasSubstr("2 CPUs, set by the cgroup quota 1.5 CPUs"),
                    HasSubstr("affinity mask 0-7 of 8 online")));
}

TEST(ReadCpuBudget, ACgroupV2MaxIsNoQuota) {
  FakeCgroup fake("cpu_v2_max");
  fake.Write("proc/self/cgroup", "0::/job\n");
  fake.Write("proc/self/mountinfo", kV2MountInfo);
  fake.Write("sys/fs/cgroup/job/cpu.max", "max 100000\n");
  const CpuBudget budget = ReadCpuBudget(Sources(fake));
  EXPECT_EQ(budget.quota_cpus, 0);
  EXPECT_EQ(budget.cpus, 8);
  EXPECT_EQ(budget.limited_by, kCpuLimitMachine);
  EXPECT_THAT(budget.ToString(), HasSubstr("no cgroup CPU quota"));
}

TEST(ReadCpuBudget, AFractionalQuotaBelowOneCpuIsOneCpu) {
  FakeCgroup fake("cpu_v2_half");
  fake.Write("proc/self/cgroup", "0::/\n");
  fake.Write("proc/self/mountinfo", kV2MountInfo);
  fake.Write("sys/fs/cgroup/cpu.max", "50000 100000\n");
  const CpuBudget budget = ReadCpuBudget(Sources(fake));
  EXPECT_DOUBLE_EQ(budget.quota_cpus, 0.5);
  EXPECT_EQ(budget.cpus, 1);
  EXPECT_EQ(budget.limited_by, kCpuLimitQuota);
}

TEST(ReadCpuBudget, AnAncestorsSmallerQuotaCounts) {
  FakeCgroup fake("cpu_v2_ancestor");
  fake.Write("proc/self/cgroup", "0::/a/b/c\n");
  fake.Write("proc/self/mountinfo", kV2MountInfo);
  fake.Write("sys/fs/cgroup/a/b/c/cpu.max", "max 100000\n");
  fake.Write("sys/fs/cgroup/a/b/cpu.max", "300000 100000\n");
  fake.Write("sys/fs/cgroup/a/cpu.max", "600000 100000\n");
  const CpuBudget budget = ReadCpuBudget(Sources(fake));
  EXPECT_DOUBLE_EQ(budget.quota_cpus, 3);
  EXPECT_EQ(budget.cpus, 3);
  EXPECT_THAT(budget.quota_file, HasSubstr("/sys/fs/cgroup/a/b/cpu.max"));
}

TEST(ReadCpuBudget, AQuotaAboveTheAffinityMaskLeavesTheMaskInCharge) {
  FakeCgroup fake("cpu_v2_wide");
  fake.Write("proc/self/cgroup", "0::/job\n");
  fake.Write("proc/self/mountinfo", kV2MountInfo);
  fake.Write("sys/fs/cgroup/job/cpu.max", "400000 100000\n");
  CpuBudgetSources sources = Sources(fake);
  sources.affinity = std::vector<int>{3, 2};
  const CpuBudget budget = ReadCpuBudget(sources);
  EXPECT_DOUBLE_EQ(budget.quota_cpus, 4);
  EXPECT_EQ(budget.cpus, 2);
  EXPECT_EQ(budget.limited_by, kCpuLimitAffinity);
  EXPECT_EQ(budget.affinity_list, "2-3");
}

TEST(ReadCpuBudget, ACgroupV1CfsQuotaIsReadOnAHybridMachine) {
  FakeCgroup fake("cpu_v1");
  fake.Write("proc/self/cgroup",
             "9:name=systemd:/\n4:memory:/docker/abc\n"
             "2:cpu,cpuacct:/docker/abc\n0::/\n");
  fake.Write("proc/self/mountinfo", kV1MountInfo);
  fake.Write("sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_quota_us",
             "250000\n");
  fake.Write("sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_period_us",
             "100000\n");
  fake.Write("sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us", "-1\n");
  fake.Write("sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us", "100000\n");
  const CpuBudget budget = ReadCpuBudget(Sources(fake));
  EXPECT_DOUBLE_EQ(budget.quota_cpus, 2.5);
  EXPECT_EQ(budget.cpus, 3);
  EXPECT_EQ(budget.limited_by, kCpuLimitQuota);
  EXPECT_THAT(budget.quota_file,
              HasSubstr("cpu,cpuacct/docker/abc/cpu.cfs_quota_us"));
  EXPECT_EQ(budget.quota_text, "250000 / 100000");
}

TEST(ReadCpuBudget, ACgroupV1QuotaOfMinusOneIsNoQuota) {
  FakeCgroup fake("cpu_v1_none");
  fake.Write("proc/self/cgroup", "2:cpu,cpuacct:/\n");
  fake.Write("proc/self/mountinfo", kV1MountInfo);
  fake.Write("sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us", "-1\n");
  fake.Write("sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us", "100000\n");
  const CpuBudget budget = ReadCpuBudget(Sources(fake));
  EXPECT_EQ(budget.quota_cpus, 0);
  EXPECT_EQ(budget.cpus, 8);
  EXPECT_EQ(budget.unread, "");
}

// A container without a cgroup namespace mounts its own subtree: mountinfo's
// root field is the subtree, /proc/self/cgroup the full path.
TEST(ReadCpuBudget, AMountedSubtreeIsReadAtItsMountPoint) {
  FakeCgroup fake("cpu_v1_subtree");
  fake.Write("proc/self/cgroup", "3:cpu:/docker/abc\n");
  fake.Write("proc/self/mountinfo",
             "40 31 0:30 /docker/abc /sys/fs/cgroup/cpu ro,nosuid - cgroup "
             "cgroup rw,cpu\n");
  fake.Write("sys/fs/cgroup/cpu/cpu.cfs_quota_us", "200000\n");
  fake.Write("sys/fs/cgroup/cpu/cpu.cfs_period_us", "100000\n");
  const CpuBudget budget = ReadCpuBudget(Sources(fake));
  EXPECT_DOUBLE_EQ(budget.quota_cpus, 2);
  EXPECT_EQ(budget.cpus, 2);
}

TEST(ReadCpuBudget, AMountPointWithAnEscapedSpaceIsFound) {
  FakeCgroup fake("cpu_v2_space");
  fake.Write("proc/self/cgroup", "0::/job\n");
  fake.Write("proc/self/mountinfo",
             "30 22 0:26 / /cg\\040root rw - cgroup2 cgroup2 rw\n");
  fake.Write("cg root/job/cpu.max", "100000 100000\n");
  const CpuBudget budget = ReadCpuBudget(Sources(fake));
  EXPECT_DOUBLE_EQ(budget.quota_cpus, 1);
  EXPECT_EQ(budget.cpus, 1);
}

TEST(ReadCpuBudget, MissingFilesMeanNoQuotaAndAMissingMountinfoIsNamed) {
  FakeCgroup fake("cpu_missing");
  // No /proc/self/cgroup: not Linux, or no cgroups.
  CpuBudget budget = ReadCpuBudget(Sources(fake));
  EXPECT_EQ(budget.quota_cpus, 0);
  EXPECT_EQ(budget.cpus, 8);
  EXPECT_EQ(budget.unread, "");
  // A membership without mountinfo: no quota, and the budget says why.
  fake.Write("proc/self/cgroup", "0::/job\n");
  budget = ReadCpuBudget(Sources(fake));
  EXPECT_EQ(budget.cpus, 8);
  EXPECT_THAT(budget.unread, HasSubstr("/proc/self/mountinfo is missing"));
  EXPECT_THAT(budget.ToString(), HasSubstr("[unread: "));
  // A cgroup without the cpu controller has no cpu.max: no quota.
  fake.Write("proc/self/mountinfo", kV2MountInfo);
  budget = ReadCpuBudget(Sources(fake));
  EXPECT_EQ(budget.quota_cpus, 0);
  EXPECT_EQ(budget.unread, "");
  // No cgroup filesystem mounted at all.
  fake.Write("proc/self/mountinfo",
             "22 1 0:21 / / rw,relatime - overlay overlay rw\n");
  budget = ReadCpuBudget(Sources(fake));
  EXPECT_EQ(budget.quota_cpus, 0);
}

TEST(ReadCpuBudget, GarbledQuotaFilesAreNamedWithWhatTheyHold) {
  FakeCgroup fake("cpu_garbled");
  fake.Write("proc/self/cgroup", "0::/job\n");
  fake.Write("proc/self/mountinfo", kV2MountInfo);
  for (const char* text : {"lots 100000\n", "100000 0\n", "1 2 3\n", "\n"}) {
    fake.Write("sys/fs/cgroup/job/cpu.max", text);
    const CpuBudget budget = ReadCpuBudget(Sources(fake));
    EXPECT_EQ(budget.quota_cpus, 0) << text;
    EXPECT_EQ(budget.cpus, 8) << text;
    EXPECT_THAT(budget.unread, AllOf(HasSubstr("/sys/fs/cgroup/job/cpu.max"),
                                     HasSubstr("is not 'max'")))
        << text;
  }
  FakeCgroup v1("cpu_garbled_v1");
  v1.Write("proc/self/cgroup", "2:cpu,cpuacct:/\n");
  v1.Write("proc/self/mountinfo", kV1MountInfo);
  v1.Write("sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us", "200000\n");
  CpuBudget budget = ReadCpuBudget(Sources(v1));
  EXPECT_EQ(budget.quota_cpus, 0);
  EXPECT_THAT(budget.unread, AllOf(HasSubstr("cpu.cfs_period_us is missing"),
                                   HasSubstr("'200000'")));
  v1.Write("sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us", "-5\n");
  budget = ReadCpuBudget(Sources(v1));
  EXPECT_THAT(budget.unread, HasSubstr("'-5' is not -1 or a positive number"));
}

// Restores the calling thread's affinity mask when it goes out of scope.
class AffinityRestorer {
 public:
  AffinityRestorer() {
    saved_ok_ = sched_getaffinity(0, sizeof(saved_), &saved_) == 0;
  }
  ~AffinityRestorer() {
    if (saved_ok_) sched_setaffinity(0, sizeof(saved_), &saved_);
  }
  AffinityRestorer(const AffinityRestorer&) = delete;
  AffinityRestorer& operator=(const AffinityRestorer&) = delete;
  bool ok() const { return saved_ok_; }
  // Returns the first CPU of the saved mask.
  int first() const {
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
      if (CPU_ISSET(cpu, &saved_)) return cpu;
    }
    return -1;
  }

 private:
  cpu_set_t saved_;
  bool saved_ok_ = false;
};

TEST(ReadCpuBudget, ANarrowedAffinityMaskIsReadFromTheCallingThread) {
  FakeCgroup fake("cpu_affinity");  // no cgroup files: the mask alone
  AffinityRestorer restorer;
  ASSERT_TRUE(restorer.ok());
  const int cpu = restorer.first();
  ASSERT_GE(cpu, 0);
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(cpu, &one);
  ASSERT_EQ(sched_setaffinity(0, sizeof(one), &one), 0);
  const CpuBudget budget =
      ReadCpuBudget({.proc_root = absl::StrCat(fake.root(), "/proc"),
                     .fs_root = fake.root(),
                     .online_cpus = 64});
  EXPECT_EQ(budget.affinity_cpus, 1);
  EXPECT_EQ(budget.affinity_list, absl::StrCat(cpu));
  EXPECT_EQ(budget.cpus, 1);
  EXPECT_EQ(budget.limited_by, kCpuLimitAffinity);
  EXPECT_THAT(budget.ToString(),
              HasSubstr(absl::StrCat("1 CPU, set by the affinity mask ", cpu,
                                     " of 64 online")));
}

TEST(ReadCpuBudget, ThisMachinesBudgetIsItsMaskAtMost) {
  cpu_set_t mask;
  ASSERT_EQ(sched_getaffinity(0, sizeof(mask), &mask), 0);
  const CpuBudget budget = ReadCpuBudget();
  EXPECT_EQ(budget.affinity_cpus, CPU_COUNT(&mask));
  EXPECT_GE(budget.cpus, 1);
  EXPECT_LE(budget.cpus, budget.affinity_cpus);
  EXPECT_EQ(budget.unread, "") << budget.ToString();
  std::printf("this machine: %s\n", budget.ToString().c_str());
}

TEST(WorkersFromCpus, LeavesOneCpuToTheConsumerAndStartsAtLeastOne) {
  CpuBudget budget;
  budget.cpus = 1;
  EXPECT_EQ(WorkersFromCpus(budget), 1);
  budget.cpus = 2;
  EXPECT_EQ(WorkersFromCpus(budget), 1);
  budget.cpus = 16;
  EXPECT_EQ(WorkersFromCpus(budget), 15);
  budget.cpus = 1000;
  EXPECT_EQ(WorkersFromCpus(budget), 256);
}

LaunchEnvironment Launcher(const std::string& name, int local_ranks = 0) {
  LaunchEnvironment env;
  env.launcher = name;
  env.local_world_size = local_ranks;
  return env;
}

// One CPU of 32, set by a launcher's binding.
CpuBudget BoundToOneCore() {
  return ReadCpuBudget({.proc_root = "/nonexistent",
                        .affinity = std::vector<int>{0},
                        .online_cpus = 32});
}

TEST(ShareAmongRanks, DividesTheWholeMachineAmongTheRanksOfTheNode) {
  const CpuBudget machine =
      ReadCpuBudget({.proc_root = "/nonexistent",
                     .affinity = std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9},
                     .online_cpus = 10});
  const CpuBudget shared = ShareAmongRanks(machine, 4);
  EXPECT_EQ(shared.shared_by, 4);
  EXPECT_EQ(shared.cpus, 2);
  EXPECT_THAT(shared.ToString(),
              HasSubstr("2 CPUs, a share of 10 CPUs among the 4 ranks on "
                        "this node (affinity mask 0-9 of 10 online"));
  EXPECT_EQ(WorkersFromCpus(shared), 1);
  EXPECT_THAT(CpuOversubscription(shared, 6, Launcher("torchrun", 4)),
              AllOf(HasSubstr("num_workers = 6 cannot run in parallel"),
                    HasSubstr("this node has 10 CPUs for 4 ranks"),
                    HasSubstr("num_workers <= 2")));
  EXPECT_EQ(ShareAmongRanks(machine, 40).cpus, 1);
  EXPECT_EQ(ShareAmongRanks(machine, 1).cpus, 10);
  EXPECT_EQ(ShareAmongRanks(machine, 0).shared_by, 1);
}

TEST(ShareAmongRanks, DividesAQuotaButNotARanksOwnMask) {
  FakeCgroup fake("cpu_share_quota");
  fake.Write("proc/self/cgroup", "0::/\n");
  fake.Write("proc/self/mountinfo", kV2MountInfo);
  fake.Write("sys/fs/cgroup/cpu.max", "600000 100000\n");
  const CpuBudget quota = ShareAmongRanks(ReadCpuBudget(Sources(fake)), 2);
  EXPECT_EQ(quota.shared_by, 2);
  EXPECT_EQ(quota.cpus, 3);
  EXPECT_THAT(quota.ToString(), HasSubstr("a share of 6 CPUs among the 2"));
  const CpuBudget own = ShareAmongRanks(BoundToOneCore(), 8);
  EXPECT_EQ(own.shared_by, 1);
  EXPECT_EQ(own.cpus, 1);
}

TEST(CpuOversubscription, IsEmptyWhenTheWorkersFit) {
  const CpuBudget budget = BoundToOneCore();
  EXPECT_EQ(CpuOversubscription(budget, 0, Launcher("openmpi")), "");
  EXPECT_EQ(CpuOversubscription(budget, 1, Launcher("openmpi")), "");
}

TEST(CpuOversubscription, NamesTheCpusTheirSourceAndOpenMpisFixOnOneLine) {
  const std::string line =
      CpuOversubscription(BoundToOneCore(), 8, Launcher("openmpi"));
  EXPECT_THAT(line, AllOf(HasSubstr("num_workers = 8 cannot run in parallel"),
                          HasSubstr("1 CPU, set by the affinity mask 0 of 32"),
                          HasSubstr("mpirun --map-by slot:PE=9 --bind-to core"),
                          HasSubstr("--report-bindings"),
                          HasSubstr("mpirun --bind-to none"),
                          HasSubstr("num_workers <= 1"),
                          HasSubstr("warn_cpu_oversubscription = false")));
  EXPECT_THAT(line, Not(HasSubstr("\n")));
}

TEST(CpuOversubscription, AsksForNoMoreThanTheRanksShareOfTheNode) {
  const CpuBudget budget = BoundToOneCore();  // 32 CPUs online
  EXPECT_THAT(CpuOversubscription(budget, 20, Launcher("openmpi", 2)),
              HasSubstr("--map-by slot:PE=16 --bind-to core"));
  EXPECT_THAT(CpuOversubscription(budget, 64, Launcher("slurm")),
              HasSubstr("srun --cpus-per-task=32"));
}

TEST(CpuOversubscription, GivesEachLauncherItsOwnFix) {
  const CpuBudget budget = BoundToOneCore();
  EXPECT_THAT(CpuOversubscription(budget, 4, Launcher("slurm")),
              HasSubstr("srun --cpus-per-task=5"));
  EXPECT_THAT(CpuOversubscription(budget, 4, Launcher("torchrun")),
              HasSubstr("torchrun does not bind"));
  EXPECT_THAT(CpuOversubscription(budget, 4, Launcher("pmi")),
              HasSubstr("mpiexec -bind-to core:5"));
  EXPECT_THAT(CpuOversubscription(budget, 4, Launcher("none")),
              HasSubstr("taskset, numactl"));
}

TEST(CpuOversubscription, AQuotaAsksForAWiderQuota) {
  FakeCgroup fake("cpu_warn_quota");
  fake.Write("proc/self/cgroup", "0::/\n");
  fake.Write("proc/self/mountinfo", kV2MountInfo);
  fake.Write("sys/fs/cgroup/cpu.max", "200000 100000\n");
  const CpuBudget budget = ReadCpuBudget(Sources(fake));
  const std::string line = CpuOversubscription(budget, 6, Launcher("torchrun"));
  EXPECT_THAT(line, AllOf(HasSubstr("2 CPUs, set by the cgroup quota"),
                          HasSubstr("docker run --cpus=7"),
                          Not(HasSubstr("torchrun does not bind"))));
}

}  // namespace
}  // namespace pinwheel
