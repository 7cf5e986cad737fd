// LaunchEnvironment: rank, world size and local rank from the variables of
// torchrun, Open MPI, MPICH (PMI) and Slurm; garbage, incomplete sets,
// rank >= world size and disagreeing launchers are InvalidArgument naming
// the variable and its value. And the builder's distributed(env): eight
// loaders, one per rank, together read the dataset exactly once per epoch.
#include "loader/launch_environment.h"

#include <cstdint>
#include <cstdlib>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "loader/loader.h"
#include "loader/loader_builder.h"
#include "tests/support/drain_epoch.h"
#include "tests/support/skip_without_gpu.h"
#include "tests/support/test_datasets.h"
#include "transfer/device.h"

namespace pinwheel {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using testing_support::PatternDataset;

LaunchEnvironment Parsed(const std::map<std::string, std::string>& vars) {
  absl::StatusOr<LaunchEnvironment> env =
      LaunchEnvironment::FromVariables(vars);
  EXPECT_TRUE(env.ok()) << env.status();
  return env.value_or(LaunchEnvironment{.launcher = "parse failed"});
}

absl::Status Error(const std::map<std::string, std::string>& vars) {
  return LaunchEnvironment::FromVariables(vars).status();
}

TEST(LaunchEnvironment, WithoutALauncherIsRankZeroOfOne) {
  const LaunchEnvironment env = Parsed({{"HOME", "/root"}});
  EXPECT_EQ(env.launcher, "none");
  EXPECT_EQ(env.rank, 0);
  EXPECT_EQ(env.world_size, 1);
  EXPECT_EQ(env.local_rank, 0);
}

TEST(LaunchEnvironment, ReadsTorchrun) {
  const LaunchEnvironment env =
      Parsed({{"RANK", "5"}, {"WORLD_SIZE", "16"}, {"LOCAL_RANK", "1"}});
  EXPECT_EQ(env.launcher, "torchrun");
  EXPECT_EQ(env.rank, 5);
  EXPECT_EQ(env.world_size, 16);
  EXPECT_EQ(env.local_rank, 1);
  EXPECT_EQ(env.ToString(), "rank 5 of 16 (local rank 1, torchrun)");
}

TEST(LaunchEnvironment, ReadsTheRanksOnThisNodeWhereTheLauncherSaysSo) {
  EXPECT_EQ(Parsed({{"RANK", "5"},
                    {"WORLD_SIZE", "16"},
                    {"LOCAL_RANK", "1"},
                    {"LOCAL_WORLD_SIZE", "8"}})
                .local_world_size,
            8);
  EXPECT_EQ(Parsed({{"OMPI_COMM_WORLD_RANK", "3"},
                    {"OMPI_COMM_WORLD_SIZE", "4"},
                    {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                    {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}})
                .local_world_size,
            2);
  EXPECT_EQ(Parsed({{"SLURM_PROCID", "7"},
                    {"SLURM_NTASKS", "8"},
                    {"SLURM_LOCALID", "3"},
                    {"SLURM_NTASKS_PER_NODE", "4"}})
                .local_world_size,
            4);
  // Unknown, never an error: it only sizes advice.
  EXPECT_EQ(Parsed({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "0"}})
                .local_world_size,
            0);
  EXPECT_EQ(Parsed({{"RANK", "1"},
                    {"WORLD_SIZE", "2"},
                    {"LOCAL_RANK", "1"},
                    {"LOCAL_WORLD_SIZE", "1"}})
                .local_world_size,
            0);
  EXPECT_EQ(Parsed({{"RANK", "0"},
                    {"WORLD_SIZE", "2"},
                    {"LOCAL_RANK", "0"},
                    {"LOCAL_WORLD_SIZE", "two"}})
                .local_world_size,
            0);
}

TEST(LaunchEnvironment, GpuIndexIsTheLocalRankAmongTheNodesGpus) {
  const LaunchEnvironment env =
      Parsed({{"RANK", "6"}, {"WORLD_SIZE", "16"}, {"LOCAL_RANK", "2"}});
  EXPECT_EQ(env.GpuIndexAmong(8).value_or(-9), 2);
  EXPECT_EQ(env.GpuIndexAmong(3).value_or(-9), 2);
  EXPECT_EQ(env.GpuIndexAmong(1).value_or(-9), 0)
      << "one GPU shown: CUDA_VISIBLE_DEVICES gave this rank its own";
  EXPECT_EQ(env.GpuIndexAmong(0).value_or(-9), -1) << "the host";
  const absl::Status status = env.GpuIndexAmong(2).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(status.message(),
              AllOf(HasSubstr("local rank 2"), HasSubstr("shows 2 GPUs")));
}

TEST(LaunchEnvironment, ReadsOpenMpi) {
  const LaunchEnvironment env = Parsed({{"OMPI_COMM_WORLD_RANK", "3"},
                                        {"OMPI_COMM_WORLD_SIZE", "4"},
                                        {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}});
  EXPECT_EQ(env.launcher, "openmpi");
  EXPECT_EQ(env.rank, 3);
  EXPECT_EQ(env.world_size, 4);
  EXPECT_EQ(env.local_rank, 1);
}

TEST(LaunchEnvironment, ReadsMpichWithEitherLocalRankVariable) {
  LaunchEnvironment env =
      Parsed({{"PMI_RANK", "2"}, {"PMI_SIZE", "3"}, {"MPI_LOCALRANKID", "0"}});
  EXPECT_EQ(env.launcher, "pmi");
  EXPECT_EQ(env.rank, 2);
  EXPECT_EQ(env.world_size, 3);
  EXPECT_EQ(env.local_rank, 0);
  env = Parsed({{"PMI_RANK", "2"}, {"PMI_SIZE", "3"}, {"PMI_LOCAL_RANK", "2"}});
  EXPECT_EQ(env.local_rank, 2);
}

TEST(LaunchEnvironment, ReadsSlurm) {
  const LaunchEnvironment env = Parsed(
      {{"SLURM_PROCID", "7"}, {"SLURM_NTASKS", "8"}, {"SLURM_LOCALID", "3"}});
  EXPECT_EQ(env.launcher, "slurm");
  EXPECT_EQ(env.rank, 7);
  EXPECT_EQ(env.world_size, 8);
  EXPECT_EQ(env.local_rank, 3);
}

TEST(LaunchEnvironment, MpirunInsideAnSbatchScriptFollowsMpirunNotSlurm) {
  const LaunchEnvironment env = Parsed({{"SLURM_PROCID", "0"},
                                        {"SLURM_NTASKS", "1"},
                                        {"SLURM_LOCALID", "0"},
                                        {"OMPI_COMM_WORLD_RANK", "6"},
                                        {"OMPI_COMM_WORLD_SIZE", "8"},
                                        {"OMPI_COMM_WORLD_LOCAL_RANK", "2"}});
  EXPECT_EQ(env.launcher, "openmpi");
  EXPECT_EQ(env.rank, 6);
  EXPECT_EQ(env.world_size, 8);
}

TEST(LaunchEnvironment, AcceptsLaunchersThatAgree) {
  const LaunchEnvironment env = Parsed({{"RANK", "1"},
                                        {"WORLD_SIZE", "2"},
                                        {"LOCAL_RANK", "1"},
                                        {"OMPI_COMM_WORLD_RANK", "1"},
                                        {"OMPI_COMM_WORLD_SIZE", "2"},
                                        {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}});
  EXPECT_EQ(env.rank, 1);
  EXPECT_EQ(env.world_size, 2);
}

TEST(LaunchEnvironment, RejectsLaunchersThatDisagreeNamingBoth) {
  const absl::Status status = Error({{"RANK", "0"},
                                     {"WORLD_SIZE", "2"},
                                     {"LOCAL_RANK", "0"},
                                     {"OMPI_COMM_WORLD_RANK", "3"},
                                     {"OMPI_COMM_WORLD_SIZE", "4"},
                                     {"OMPI_COMM_WORLD_LOCAL_RANK", "3"}});
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(),
              AllOf(HasSubstr("conflicting launchers"), HasSubstr("RANK=0"),
                    HasSubstr("OMPI_COMM_WORLD_RANK=3"),
                    HasSubstr("OMPI_COMM_WORLD_SIZE=4")));
}

TEST(LaunchEnvironment, RejectsGarbageNamingTheVariableAndValue) {
  struct Case {
    std::map<std::string, std::string> vars;
    std::string variable_and_value;
  };
  const std::vector<Case> cases = {
      {{{"RANK", "one"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "0"}},
       "RANK='one'"},
      {{{"RANK", "-1"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "0"}}, "RANK='-1'"},
      {{{"RANK", "0"}, {"WORLD_SIZE", "0"}, {"LOCAL_RANK", "0"}},
       "WORLD_SIZE='0'"},
      {{{"RANK", "0"}, {"WORLD_SIZE", "2 "}, {"LOCAL_RANK", "0"}},
       "WORLD_SIZE='2 '"},
      {{{"RANK", "0"}, {"WORLD_SIZE", "99999999999"}, {"LOCAL_RANK", "0"}},
       "WORLD_SIZE='99999999999'"},
      {{{"PMI_RANK", "0"}, {"PMI_SIZE", "2"}, {"MPI_LOCALRANKID", "x"}},
       "MPI_LOCALRANKID='x'"},
      {{{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", ""}, {"SLURM_LOCALID", "0"}},
       "SLURM_NTASKS=''"},
  };
  for (const Case& c : cases) {
    const absl::Status status = Error(c.vars);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument)
        << c.variable_and_value;
    EXPECT_THAT(status.message(), HasSubstr(c.variable_and_value));
  }
}

TEST(LaunchEnvironment, RejectsRankAtOrAboveTheWorldSize) {
  absl::Status status = Error({{"OMPI_COMM_WORLD_RANK", "4"},
                               {"OMPI_COMM_WORLD_SIZE", "4"},
                               {"OMPI_COMM_WORLD_LOCAL_RANK", "0"}});
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), AllOf(HasSubstr("OMPI_COMM_WORLD_RANK='4'"),
                                      HasSubstr("OMPI_COMM_WORLD_SIZE='4'")));
  status = Error({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "2"}});
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("LOCAL_RANK='2'"));
}

TEST(LaunchEnvironment, RejectsAnIncompleteSetNamingWhatIsMissing) {
  absl::Status status = Error({{"RANK", "1"}, {"LOCAL_RANK", "1"}});
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(),
              AllOf(HasSubstr("torchrun"), HasSubstr("RANK='1'"),
                    HasSubstr("WORLD_SIZE not set")));
  status = Error({{"PMI_RANK", "1"}, {"PMI_SIZE", "2"}});
  EXPECT_THAT(status.message(),
              HasSubstr("MPI_LOCALRANKID or PMI_LOCAL_RANK not set"));
}

TEST(LaunchEnvironment, LocalDeviceIsTheHostWithoutGpus) {
  if (Device::CudaDeviceCount() > 0) {
    GTEST_SKIP() << "this machine has a GPU: the host fallback is not tested";
  }
  const LaunchEnvironment env =
      Parsed({{"RANK", "3"}, {"WORLD_SIZE", "4"}, {"LOCAL_RANK", "3"}});
  absl::StatusOr<Device> device = env.LocalDevice();
  ASSERT_TRUE(device.ok()) << device.status();
  EXPECT_EQ(*device, Device::Host());
}

TEST(LaunchEnvironment, LocalDeviceIsCudaLocalRank_CUDA) {
  SKIP_WITHOUT_GPU("GPU case");
  const int gpus = Device::CudaDeviceCount();
  for (int local = 0; local < gpus; ++local) {
    LaunchEnvironment env{.launcher = "test",
                          .rank = local,
                          .world_size = gpus + 1,
                          .local_rank = local};
    absl::StatusOr<Device> device = env.LocalDevice();
    ASSERT_TRUE(device.ok()) << device.status();
    EXPECT_EQ(device->ToString(), absl::StrCat("cuda:", local));
  }
  if (gpus > 1) {
    LaunchEnvironment env{.launcher = "test",
                          .rank = gpus,
                          .world_size = gpus + 1,
                          .local_rank = gpus};
    EXPECT_EQ(env.LocalDevice().status().code(),
              absl::StatusCode::kFailedPrecondition);
  }
}

// Returns every index rank `rank` of `world` reads in `epochs` epochs, one
// vector per epoch, through a loader built with distributed(env).
std::vector<std::vector<int64_t>> IndicesOfRank(
    const std::shared_ptr<PatternDataset>& dataset, int rank, int world,
    int epochs) {
  const LaunchEnvironment env =
      Parsed({{"OMPI_COMM_WORLD_RANK", std::to_string(rank)},
              {"OMPI_COMM_WORLD_SIZE", std::to_string(world)},
              {"OMPI_COMM_WORLD_LOCAL_RANK", std::to_string(rank % 2)}});
  absl::StatusOr<Loader> loader = LoaderBuilder(dataset)
                                      .batch_size(7)
                                      .shuffle(/*seed=*/11)
                                      .num_workers(1)
                                      .device(Device::Host())
                                      .distributed(env)
                                      .Build();
  EXPECT_TRUE(loader.ok()) << loader.status();
  if (!loader.ok()) return {};
  const int b = loader->layout().sample().FieldIndex("b");
  std::vector<std::vector<int64_t>> out(epochs);
  for (int epoch = 0; epoch < epochs; ++epoch) {
    const testing_support::DrainedEpoch drained = testing_support::DrainEpoch(
        *loader, {.on_batch = [&](const DeviceBatch& batch) {
          EXPECT_TRUE(batch.WaitOnHost().ok());
          const auto* values = batch.field(b).data_as<const int64_t>();
          for (int64_t i = 0; i < batch.size(); ++i) {
            out[epoch].push_back((values[i] - 1) / 7);  // b = index * 7 + 1
          }
        }});
    EXPECT_TRUE(drained.status.ok()) << drained.status;
  }
  return out;
}

TEST(LaunchEnvironment, EightRanksTogetherReadTheDatasetExactlyOncePerEpoch) {
  constexpr int kWorld = 8;
  constexpr int kEpochs = 3;
  constexpr int64_t kSize = 8 * 37;  // divisible: no padding, nothing dropped
  auto dataset = std::make_shared<PatternDataset>(kSize);
  std::vector<std::vector<int64_t>> seen(kEpochs);
  std::vector<int64_t> first_of_rank0;
  for (int rank = 0; rank < kWorld; ++rank) {
    std::vector<std::vector<int64_t>> mine =
        IndicesOfRank(dataset, rank, kWorld, kEpochs);
    ASSERT_EQ(mine.size(), static_cast<size_t>(kEpochs));
    for (int epoch = 0; epoch < kEpochs; ++epoch) {
      EXPECT_EQ(mine[epoch].size(), static_cast<size_t>(kSize / kWorld))
          << "rank " << rank << " epoch " << epoch;
      seen[epoch].insert(seen[epoch].end(), mine[epoch].begin(),
                         mine[epoch].end());
    }
    if (rank == 0) first_of_rank0 = mine[0];
  }
  for (int epoch = 0; epoch < kEpochs; ++epoch) {
    std::vector<int64_t> counts(kSize, 0);
    for (int64_t index : seen[epoch]) {
      ASSERT_GE(index, 0);
      ASSERT_LT(index, kSize);
      ++counts[index];
    }
    for (int64_t i = 0; i < kSize; ++i) {
      ASSERT_EQ(counts[i], 1) << "index " << i << " in epoch " << epoch;
    }
  }
  // Shuffled: rank 0 does not read 0, 8, 16, ... in order.
  std::vector<int64_t> strided;
  for (int64_t i = 0; i < kSize; i += kWorld) strided.push_back(i);
  EXPECT_NE(first_of_rank0, strided);
}

TEST(LaunchEnvironment, BuilderReportsABadLauncherVariableFromBuild) {
  ASSERT_EQ(setenv("OMPI_COMM_WORLD_RANK", "zero", 1), 0);
  ASSERT_EQ(setenv("OMPI_COMM_WORLD_SIZE", "2", 1), 0);
  ASSERT_EQ(setenv("OMPI_COMM_WORLD_LOCAL_RANK", "0", 1), 0);
  absl::StatusOr<Loader> loader =
      LoaderBuilder(std::make_shared<PatternDataset>(10))
          .device(Device::Host())
          .distributed_from_launcher()
          .Build();
  unsetenv("OMPI_COMM_WORLD_RANK");
  unsetenv("OMPI_COMM_WORLD_SIZE");
  unsetenv("OMPI_COMM_WORLD_LOCAL_RANK");
  EXPECT_EQ(loader.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(loader.status().message(),
              AllOf(HasSubstr("LoaderBuilder: distributed"),
                    HasSubstr("OMPI_COMM_WORLD_RANK='zero'")));
}

TEST(LaunchEnvironment, BuilderTakesRankAndWorldFromTheLauncher) {
  ASSERT_EQ(setenv("RANK", "1", 1), 0);
  ASSERT_EQ(setenv("WORLD_SIZE", "2", 1), 0);
  ASSERT_EQ(setenv("LOCAL_RANK", "1", 1), 0);
  LoaderBuilder builder(std::make_shared<PatternDataset>(10));
  builder.device(Device::Host()).distributed_from_launcher();
  unsetenv("RANK");
  unsetenv("WORLD_SIZE");
  unsetenv("LOCAL_RANK");
  EXPECT_EQ(builder.options().rank, 1);
  EXPECT_EQ(builder.options().world_size, 2);
  EXPECT_EQ(builder.options().device, Device::Host())
      << "device() set first wins";
  absl::StatusOr<Loader> loader = builder.Build();
  ASSERT_TRUE(loader.ok()) << loader.status();
  EXPECT_EQ(loader->batches_per_epoch(), 5);  // 10 samples / 2 ranks, batch 1
}

}  // namespace
}  // namespace pinwheel
