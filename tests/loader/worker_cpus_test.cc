// Tests of Note [Open MPI's default binding is widened]
// (loader/worker_cpus.h): the CPU lists, the CPUs a cgroup allows and a
// core's hardware threads read from a fake /proc and sysfs, the rule's
// every condition (WidenDefaultBinding), and a real loader built under
// Open MPI's variables with the calling thread narrowed to one CPU: its
// workers read on the wider share while the caller keeps its one CPU, and
// keep_launcher_binding keeps them there too. A suite of its own: oneTBB's
// threads are first started while the mask is narrowed.
#include "loader/worker_cpus.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <memory>
#include <sched.h>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

#include "loader/cpu_budget.h"
#include "loader/launch_environment.h"
#include "loader/loader.h"
#include "loader/loader_builder.h"
#include "tests/support/drain_epoch.h"
#include "tests/support/fake_cgroup.h"
#include "tests/support/one_cpu.h"
#include "tests/support/test_datasets.h"
#include "transfer/device.h"

namespace pinwheel {
namespace {

using ::pinwheel::testing_support::FakeCgroup;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr char kV2MountInfo[] =
    "30 22 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime - cgroup2 "
    "cgroup2 rw,nsdelegate\n";
constexpr char kV1MountInfo[] =
    "33 31 0:30 / /sys/fs/cgroup/cpuset rw,relatime - cgroup cgroup "
    "rw,cpuset\n";

std::vector<int> Range(int first, int last) {
  std::vector<int> cpus;
  for (int cpu = first; cpu <= last; ++cpu) cpus.push_back(cpu);
  return cpus;
}

TEST(ParseCpuList, ReadsRangesAndSinglesAndRefusesTheRest) {
  EXPECT_EQ(ParseCpuList("0-3,8,10-11\n"),
            std::vector<int>({0, 1, 2, 3, 8, 10, 11}));
  EXPECT_EQ(ParseCpuList("5,1,1"), std::vector<int>({1, 5}));
  EXPECT_EQ(ParseCpuList(""), std::vector<int>{});
  EXPECT_EQ(ParseCpuList("3-1"), std::nullopt);
  EXPECT_EQ(ParseCpuList("a"), std::nullopt);
  EXPECT_EQ(ParseCpuList("1,,2"), std::nullopt);
  EXPECT_EQ(ParseCpuList("-1"), std::nullopt);
  EXPECT_EQ(CpuListText({0, 1, 2, 3, 8, 10, 11}), "0-3,8,10-11");
}

// Sources reading `fake`: 32 CPUs online, the mask one core.
CpuBudgetSources Sources(const FakeCgroup& fake) {
  return {.proc_root = absl::StrCat(fake.root(), "/proc"),
          .fs_root = fake.root(),
          .affinity = std::vector<int>{1},
          .online_cpus = 32,
          .openmpi_binding_policy = ""};
}

TEST(AllowedCpus, AV2CpusetIsReadAtTheNearestCgroupThatHasOne) {
  FakeCgroup fake("allowed_v2");
  fake.Write("proc/self/cgroup", "0::/job/step\n");
  fake.Write("proc/self/mountinfo", kV2MountInfo);
  fake.Write("sys/fs/cgroup/job/cpuset.cpus.effective", "8-15\n");
  fake.Write("sys/devices/system/cpu/online", "0-31\n");
  EXPECT_EQ(AllowedCpus(Sources(fake)), Range(8, 15));
}

TEST(AllowedCpus, AV1CpusetIsReadUnderItsController) {
  FakeCgroup fake("allowed_v1");
  fake.Write("proc/self/cgroup", "4:cpuset:/docker/abc\n");
  fake.Write("proc/self/mountinfo", kV1MountInfo);
  fake.Write("sys/fs/cgroup/cpuset/docker/abc/cpuset.cpus", "0-3\n");
  EXPECT_EQ(AllowedCpus(Sources(fake)), Range(0, 3));
}

TEST(AllowedCpus, WithoutACpusetTheOnlineCpusAndThenTheirCount) {
  FakeCgroup fake("allowed_online");
  fake.Write("sys/devices/system/cpu/online", "0-5\n");
  EXPECT_EQ(AllowedCpus(Sources(fake)), Range(0, 5));
  FakeCgroup empty("allowed_nothing");
  EXPECT_EQ(AllowedCpus(Sources(empty)), Range(0, 31));
}

TEST(CoreSiblings, ReadsTheCoresThreadsOrStandsAlone) {
  FakeCgroup fake("siblings");
  fake.Write("sys/devices/system/cpu/cpu1/topology/thread_siblings_list",
             "1,17\n");
  EXPECT_THAT(CoreSiblings(1, Sources(fake)), ElementsAre(1, 17));
  EXPECT_THAT(CoreSiblings(2, Sources(fake)), ElementsAre(2));
}

// A budget as ReadCpuBudget() leaves it under Open MPI's default binding:
// one CPU of `online`.
CpuBudget OneCoreBudget(const std::string& mask, int cpus, int online = 32) {
  CpuBudget budget;
  budget.cpus = cpus;
  budget.affinity_cpus = cpus;
  budget.affinity_list = mask;
  budget.online_cpus = online;
  budget.limited_by = std::string(kCpuLimitAffinity);
  return budget;
}

LaunchEnvironment OpenMpi(int local_rank, int local_ranks, int world = 2) {
  return {.launcher = "openmpi",
          .rank = local_rank,
          .world_size = world,
          .local_rank = local_rank,
          .local_world_size = local_ranks};
}

class WidenDefaultBindingTest : public ::testing::Test {
 protected:
  WidenDefaultBindingTest() : fake_("widen") {
    fake_.Write("sys/devices/system/cpu/online", "0-31\n");
  }
  CpuBudgetSources sources() const { return Sources(fake_); }
  FakeCgroup fake_;
};

TEST_F(WidenDefaultBindingTest, EachOfTwoRanksGetsItsHalfOfTheNode) {
  const CpuBudget rank0 =
      WidenDefaultBinding(OneCoreBudget("0", 1), OpenMpi(0, 2), sources());
  const CpuBudget rank1 =
      WidenDefaultBinding(OneCoreBudget("1", 1), OpenMpi(1, 2), sources());
  // Cores 0 and 1 stay with the ranks' training loops.
  EXPECT_EQ(rank0.worker_cpu_list, "2-16");
  EXPECT_EQ(rank1.worker_cpu_list, "17-31");
  EXPECT_EQ(rank1.cpus, 16) << "its share and its own core";
  EXPECT_EQ(rank1.limited_by, kCpuLimitRankShare);
  EXPECT_EQ(WorkersFromCpus(rank1), 15);
  EXPECT_THAT(rank1.ToString(),
              AllOf(HasSubstr("16 CPUs for the loader's threads on CPUs "
                              "17-31, this rank's share of the 32 CPUs its "
                              "cgroup allows among 2 ranks (less the cores "
                              "Open MPI binds the ranks to)"),
                    HasSubstr("affinity mask 1 of 32 online")));
  EXPECT_THAT(WidenedBindingLine(rank1, OpenMpi(1, 2)),
              AllOf(HasSubstr("pinwheel: Open MPI bound rank 1 of 2"),
                    HasSubstr("to CPU 1 (its default at two ranks or fewer)"),
                    HasSubstr("run on CPUs 17-31"),
                    HasSubstr("mpirun --map-by slot:PE=16 --bind-to core"),
                    HasSubstr("keep_launcher_binding = true")));
  EXPECT_EQ(CpuOversubscription(rank1, 15, OpenMpi(1, 2)), "");
}

TEST_F(WidenDefaultBindingTest, OneRankGetsTheWholeNode) {
  const CpuBudget budget =
      WidenDefaultBinding(OneCoreBudget("0", 1), OpenMpi(0, 1, 1), sources());
  EXPECT_EQ(budget.worker_cpu_list, "0-31");
  EXPECT_EQ(budget.cpus, 32);
}

TEST_F(WidenDefaultBindingTest, AHyperthreadedCoreIsOneCore) {
  fake_.Write("sys/devices/system/cpu/cpu0/topology/thread_siblings_list",
              "0,16\n");
  fake_.Write("sys/devices/system/cpu/cpu1/topology/thread_siblings_list",
              "1,17\n");
  const CpuBudget budget =
      WidenDefaultBinding(OneCoreBudget("1,17", 2), OpenMpi(1, 2), sources());
  EXPECT_EQ(budget.worker_cpu_list, "18-31") << "less cores 0,16 and 1,17";
  EXPECT_EQ(budget.cpus, 16);
}

TEST_F(WidenDefaultBindingTest, TheShareStaysInsideTheCgroupsCpuset) {
  fake_.Write("proc/self/cgroup", "0::/job\n");
  fake_.Write("proc/self/mountinfo", kV2MountInfo);
  fake_.Write("sys/fs/cgroup/job/cpuset.cpus.effective", "8-15\n");
  const CpuBudget budget =
      WidenDefaultBinding(OneCoreBudget("9", 1), OpenMpi(1, 2), sources());
  EXPECT_EQ(budget.worker_cpu_list, "13-15") << "of 10-15, less 8 and 9";
  EXPECT_EQ(budget.cpus, 4);
}

TEST_F(WidenDefaultBindingTest, AQuotaStillLimitsTheCpusCounted) {
  CpuBudget quota = OneCoreBudget("1", 1);
  quota.quota_cpus = 4;
  quota.cpus = 1;  // the mask, below the quota
  CpuBudget budget = WidenDefaultBinding(quota, OpenMpi(1, 2), sources());
  EXPECT_EQ(budget.worker_cpu_list, "17-31");
  EXPECT_EQ(budget.cpus, 16) << "the quota of 4 was above the mask's 1";
  quota.limited_by = std::string(kCpuLimitQuota);
  budget = WidenDefaultBinding(quota, OpenMpi(1, 2), sources());
  EXPECT_EQ(budget.worker_cpu_list, "17-31");
  EXPECT_EQ(budget.cpus, 1);
  EXPECT_EQ(budget.limited_by, kCpuLimitQuota);
}

TEST_F(WidenDefaultBindingTest, KeepsWhatTheUserChoseOrAnotherLauncherSet) {
  const CpuBudget one_core = OneCoreBudget("1", 1);
  // Several cores (--map-by slot:PE=4): a choice.
  EXPECT_EQ(
      WidenDefaultBinding(OneCoreBudget("4-7", 4), OpenMpi(1, 2), sources())
          .worker_cpu_list,
      "");
  // `mpirun --bind-to core`: the same mask, asked for.
  CpuBudgetSources asked = sources();
  asked.openmpi_binding_policy = "core";
  EXPECT_EQ(WidenDefaultBinding(one_core, OpenMpi(1, 2), asked).worker_cpu_list,
            "");
  // More than two ranks: Open MPI binds to a package, not a core.
  EXPECT_EQ(WidenDefaultBinding(one_core, OpenMpi(1, 4, 4), sources())
                .worker_cpu_list,
            "");
  for (const char* launcher : {"torchrun", "slurm", "pmi", "none"}) {
    LaunchEnvironment env = OpenMpi(1, 2);
    env.launcher = launcher;
    EXPECT_EQ(WidenDefaultBinding(one_core, env, sources()).worker_cpu_list, "")
        << launcher;
  }
  // The whole machine: nothing to widen.
  CpuBudget machine = OneCoreBudget("0-31", 32);
  machine.limited_by = std::string(kCpuLimitMachine);
  EXPECT_EQ(
      WidenDefaultBinding(machine, OpenMpi(0, 1, 1), sources()).worker_cpu_list,
      "");
  // A share no wider than the core.
  FakeCgroup tiny("widen_tiny");
  tiny.Write("sys/devices/system/cpu/online", "0-1\n");
  EXPECT_EQ(WidenDefaultBinding(one_core, OpenMpi(1, 2), Sources(tiny))
                .worker_cpu_list,
            "");
  EXPECT_EQ(WidenedBindingLine(one_core, OpenMpi(1, 2)), "");
}

// --- A real loader under Open MPI's variables, narrowed to one CPU. ---

// Sets Open MPI's variables for rank 0 of 1 on this node; unsets them when
// it goes out of scope.
class OpenMpiVariables {
 public:
  OpenMpiVariables() {
    for (const auto& [name, value] : kVariables) setenv(name, value, 1);
  }
  ~OpenMpiVariables() {
    for (const auto& [name, value] : kVariables) unsetenv(name);
  }
  OpenMpiVariables(const OpenMpiVariables&) = delete;
  OpenMpiVariables& operator=(const OpenMpiVariables&) = delete;

 private:
  static constexpr std::pair<const char*, const char*> kVariables[] = {
      {"OMPI_COMM_WORLD_RANK", "0"},
      {"OMPI_COMM_WORLD_SIZE", "1"},
      {"OMPI_COMM_WORLD_LOCAL_RANK", "0"},
      {"OMPI_COMM_WORLD_LOCAL_SIZE", "1"}};
};

int CallingThreadCpus() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return -1;
  return CPU_COUNT(&set);
}

// Reads one epoch of `keep`'s loader; returns the fewest and the most CPUs
// a reading thread's mask held, and the loader's stats.
struct Observed {
  int fewest = 1 << 20;
  int most = 0;
  LoaderStats stats;
};
Observed ReadAnEpoch(bool keep) {
  auto dataset = std::make_shared<testing_support::PatternDataset>(64);
  std::atomic<int> fewest{1 << 20};
  std::atomic<int> most{0};
  dataset->set_hook([&](int64_t) {
    const int cpus = CallingThreadCpus();
    int seen = fewest.load();
    while (cpus < seen && !fewest.compare_exchange_weak(seen, cpus)) {
    }
    seen = most.load();
    while (cpus > seen && !most.compare_exchange_weak(seen, cpus)) {
    }
    return absl::OkStatus();
  });
  Observed observed;
  absl::StatusOr<Loader> loader = LoaderBuilder(dataset)
                                      .batch_size(8)
                                      .num_workers(2)
                                      .device(Device::Host())
                                      .keep_launcher_binding(keep)
                                      .warn_cpu_oversubscription(false)
                                      .Build();
  EXPECT_TRUE(loader.ok()) << loader.status();
  if (!loader.ok()) return observed;
  const testing_support::DrainedEpoch drained =
      testing_support::DrainEpoch(*loader, {});
  EXPECT_TRUE(drained.status.ok()) << drained.status;
  observed.fewest = fewest.load();
  observed.most = most.load();
  observed.stats = loader->stats();
  return observed;
}

TEST(WidenedLoader, ItsWorkersReadOnTheShareWhileTheCallerKeepsItsCpu) {
  const std::vector<int> allowed = AllowedCpus();
  if (allowed.size() < 2) {
    GTEST_SKIP() << "this machine lets the process use " << allowed.size()
                 << " CPU: nothing to widen onto";
  }
  testing_support::OneCpu one_cpu;
  ASSERT_TRUE(one_cpu.narrowed());
  OpenMpiVariables open_mpi;
  // Kept first: oneTBB starts its threads here, inside the one CPU (a
  // thread started by one on the share would inherit the share).
  const Observed kept = ReadAnEpoch(/*keep=*/true);
  EXPECT_EQ(kept.stats.cpu_budget.worker_cpu_list, "");
  EXPECT_EQ(kept.stats.cpu_budget.cpus, 1);
  EXPECT_EQ(kept.most, 1) << "every read ran on the caller's one CPU";

  const Observed widened = ReadAnEpoch(/*keep=*/false);
  EXPECT_EQ(CallingThreadCpus(), 1) << "the caller keeps its binding";
  EXPECT_EQ(widened.stats.cpu_budget.worker_cpu_list, CpuListText(allowed));
  EXPECT_EQ(widened.stats.cpu_budget.limited_by, kCpuLimitRankShare);
  EXPECT_THAT(widened.stats.cpu_warning,
              HasSubstr("pinwheel: Open MPI bound rank 0 of 1"));
  EXPECT_EQ(widened.fewest, static_cast<int>(allowed.size()))
      << "every read ran on the share";
}

}  // namespace
}  // namespace pinwheel
