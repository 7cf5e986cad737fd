// NUMA placement: the decision on made-up machines (one node, a GPU on
// node 1 of 2, no libtbbbind, a node sysfs does not know), this machine's
// own answer, and a loader built with it.
#include "loader/numa_placement.h"

#include <atomic>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <memory>
#include <optional>
#include <thread>

#include "oneapi/tbb/parallel_for.h"

#include "loader/internal/numa.h"
#include "loader/loader.h"
#include "loader/loader_builder.h"
#include "tests/support/drain_epoch.h"
#include "tests/support/test_datasets.h"

namespace pinwheel {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

TEST(NumaPlacement, OneNodeIsNothingToDo) {
  const NumaPlacement p = DecideNumaPlacement({.device = "cuda:0",
                                               .nodes = {0},
                                               .bindable_nodes = {0},
                                               .device_node = 0});
  EXPECT_EQ(p.node, -1);
  EXPECT_EQ(p.description, "NUMA placement: one node, nothing to do");
}

TEST(NumaPlacement, BindsToTheGpusNodeOnATwoNodeMachine) {
  const NumaPlacement p = DecideNumaPlacement({.device = "cuda:1",
                                               .nodes = {0, 1},
                                               .bindable_nodes = {0, 1},
                                               .device_node = 1});
  EXPECT_EQ(p.node, 1);
  EXPECT_EQ(p.description,
            "NUMA placement: workers and pinned slots on node 1 of 2 "
            "(cuda:1's node)");
}

TEST(NumaPlacement, DoesNotBindWhenOneTbbCannot) {
  const NumaPlacement p = DecideNumaPlacement({.device = "cuda:0",
                                               .nodes = {0, 1},
                                               .bindable_nodes = {},
                                               .device_node = 0});
  EXPECT_EQ(p.node, -1);
  EXPECT_THAT(p.description, HasSubstr("libtbbbind"));
  EXPECT_THAT(p.description, HasSubstr("not placed"));
}

TEST(NumaPlacement, DoesNotBindWhenTheGpusNodeIsUnknown) {
  for (int node : {-1, 7}) {
    const NumaPlacement p = DecideNumaPlacement({.device = "cuda:3",
                                                 .nodes = {0, 1},
                                                 .bindable_nodes = {0, 1},
                                                 .device_node = node});
    EXPECT_EQ(p.node, -1) << node;
    EXPECT_THAT(p.description, HasSubstr("cuda:3's node is unknown"));
  }
}

TEST(NumaPlacement, HostBackendIsNeverBound) {
  const NumaPlacement p = DecideNumaPlacement(
      {.device = "host", .nodes = {0, 1}, .bindable_nodes = {0, 1}});
  EXPECT_EQ(p.node, -1);
  EXPECT_THAT(p.description, HasSubstr("host backend"));
  EXPECT_EQ(DecideNumaPlacement({.device = "host", .nodes = {0}}).description,
            "NUMA placement: one node, nothing to do");
  EXPECT_EQ(Device::Host().NumaNode(), -1);
  EXPECT_EQ(DetectNumaTopology(Device::Host()).device_node, -1);
}

TEST(NumaPlacement, ThisMachineGetsAnAnswerThatSaysWhatItDid) {
  const Device device = Device::FirstGpuOrHost();
  const NumaTopology topology = DetectNumaTopology(device);
  ASSERT_FALSE(topology.nodes.empty());
  const NumaPlacement& p = NumaPlacementFor(device);
  EXPECT_THAT(p.description, StartsWith("NUMA placement: "));
  if (topology.nodes.size() == 1) {
    EXPECT_EQ(p.description, "NUMA placement: one node, nothing to do");
    EXPECT_EQ(p.node, -1);
  }
  EXPECT_EQ(&p, &NumaPlacementFor(device)) << "remembered";
}

TEST(NumaPlacement, UnboundPlacementRunsOnTheCallingThread) {
  const std::thread::id caller = std::this_thread::get_id();
  std::optional<std::thread::id> ran_on;
  internal::RunOnNumaNode({.node = -1},
                          [&] { ran_on = std::this_thread::get_id(); });
  EXPECT_EQ(ran_on, caller);
  std::unique_ptr<tbb::task_arena> arena =
      internal::MakeWorkerArena({.node = -1}, 3);
  EXPECT_EQ(arena->max_concurrency(), 3);
}

// Bound to this machine's first node; on a one-node machine this still
// proves the constrained arena and RunOnNumaNode work end to end.
TEST(NumaPlacement, BoundToANodeStillRunsEverything) {
#ifdef PINWHEEL_NUMA_BINDING_DISABLED
  GTEST_SKIP() << "sanitizer build: oneTBB's libtbbbind cannot be loaded "
                  "(RTLD_DEEPBIND), so nothing is bound";
#endif
  const NumaTopology topology = DetectNumaTopology(Device::Host());
  const NumaPlacement bound{.node = topology.nodes.front()};
  int ran = 0;
  internal::RunOnNumaNode(bound, [&] { ++ran; });
  EXPECT_EQ(ran, 1);
  std::unique_ptr<tbb::task_arena> arena = internal::MakeWorkerArena(bound, 2);
  std::atomic<int> sum{0};
  arena->execute([&] { tbb::parallel_for(0, 100, [&](int i) { sum += i; }); });
  EXPECT_EQ(sum.load(), 4950);
}

TEST(NumaPlacement, LoaderBuildsAndRunsWithThisMachinesPlacement) {
  absl::StatusOr<Loader> loader =
      LoaderBuilder(std::make_shared<testing_support::PatternDataset>(40))
          .batch_size(8)
          .num_workers(2)
          .device(Device::FirstGpuOrHost())
          .Build();
  ASSERT_TRUE(loader.ok()) << loader.status();
  const testing_support::DrainedEpoch epoch =
      testing_support::DrainEpoch(*loader);
  ASSERT_TRUE(epoch.status.ok()) << epoch.status;
  EXPECT_EQ(epoch.batches.size(), 5u);
}

}  // namespace
}  // namespace pinwheel
