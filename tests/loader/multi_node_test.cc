// A multi-node job on one machine: each rank is a process of its own
// (launch_rank_helper, started with posix_spawn) whose whole environment is
// the variables a 2-node torchrun or Slurm job sets for it, nothing
// inherited. Together the ranks read every sample of the epoch exactly
// once; each rank's local rank picks its device index; and a job
// checkpointed at 2 nodes x 2 ranks resumes on 1 x 2 and on 2 x 4 ranks,
// the samples before and after the checkpoint again covering the epoch
// exactly once (Note [exact resume], loader/loader_checkpoint.h).
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <map>
#include <spawn.h>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

#include "absl/strings/str_cat.h"

extern char** environ;

namespace pinwheel {
namespace {

using Environment = std::map<std::string, std::string>;

// The launcher's variables for rank `local` of node `node` in a job of
// `nodes` x `per_node` ranks.
using LauncherVariables = Environment (*)(int node, int local, int nodes,
                                          int per_node);

Environment Torchrun(int node, int local, int nodes, int per_node) {
  const int rank = node * per_node + local;
  const int world = nodes * per_node;
  return {{"RANK", absl::StrCat(rank)},
          {"WORLD_SIZE", absl::StrCat(world)},
          {"LOCAL_RANK", absl::StrCat(local)},
          {"LOCAL_WORLD_SIZE", absl::StrCat(per_node)},
          {"GROUP_RANK", absl::StrCat(node)},
          {"GROUP_WORLD_SIZE", absl::StrCat(nodes)},
          {"ROLE_RANK", absl::StrCat(rank)},
          {"ROLE_WORLD_SIZE", absl::StrCat(world)},
          {"ROLE_NAME", "default"},
          {"MASTER_ADDR", "node0.example"},
          {"MASTER_PORT", "29500"},
          {"TORCHELASTIC_RUN_ID", "multi-node-test"},
          {"TORCHELASTIC_RESTART_COUNT", "0"},
          {"TORCHELASTIC_MAX_RESTARTS", "0"},
          {"OMP_NUM_THREADS", "1"}};
}

Environment Slurm(int node, int local, int nodes, int per_node) {
  const int rank = node * per_node + local;
  const int world = nodes * per_node;
  return {{"SLURM_PROCID", absl::StrCat(rank)},
          {"SLURM_NTASKS", absl::StrCat(world)},
          {"SLURM_LOCALID", absl::StrCat(local)},
          {"SLURM_NODEID", absl::StrCat(node)},
          {"SLURM_NNODES", absl::StrCat(nodes)},
          {"SLURM_JOB_NUM_NODES", absl::StrCat(nodes)},
          {"SLURM_NTASKS_PER_NODE", absl::StrCat(per_node)},
          {"SLURM_TASKS_PER_NODE", absl::StrCat(per_node, "(x", nodes, ")")},
          {"SLURM_STEP_NUM_TASKS", absl::StrCat(world)},
          {"SLURM_JOB_ID", "4242"},
          {"SLURM_STEP_ID", "0"},
          {"SLURM_CPUS_PER_TASK", "1"},
          {"SLURM_NODELIST", absl::StrCat("node[0-", nodes - 1, "]")},
          {"SLURMD_NODENAME", absl::StrCat("node", node)},
          {"SLURM_CPU_BIND", "quiet,mask_cpu:0x1"}};
}

// What one rank read (launch_rank_helper's output file).
struct RankRead {
  std::string launcher;
  int rank = -1;
  int world = -1;
  int local_rank = -1;
  int local_world_size = -1;
  int gpu = -2;
  std::vector<int64_t> indices;
};

class MultiNodeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = absl::StrCat(
        ::testing::TempDir(), "/multi_node_", getpid(), "_",
        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string Path(const std::string& name) const {
    return absl::StrCat(dir_, "/", name);
  }

  // Runs a job of `nodes` x `per_node` ranks at once, each reading
  // `batches` batches (-1: the rest of the epoch) of `size` samples,
  // resuming from `resume` ("-": none) and writing a checkpoint to
  // `<tag>_checkpoint_<rank>` when `checkpoint`. Returns each rank's read,
  // in rank order; a rank that fails fails the test.
  std::vector<RankRead> RunJob(const std::string& tag,
                               LauncherVariables variables, int nodes,
                               int per_node, int64_t size, int64_t batch,
                               int64_t batches, const std::string& resume,
                               bool checkpoint) {
    struct Child {
      pid_t pid;
      std::string out;
    };
    std::vector<Child> children;
    for (int node = 0; node < nodes; ++node) {
      for (int local = 0; local < per_node; ++local) {
        const int rank = node * per_node + local;
        Environment env = variables(node, local, nodes, per_node);
        // Sanitizer builds need their options; nothing else is inherited.
        for (const char* keep : {"TSAN_OPTIONS", "ASAN_OPTIONS",
                                 "UBSAN_OPTIONS", "LD_LIBRARY_PATH"}) {
          if (const char* value = std::getenv(keep)) env[keep] = value;
        }
        std::vector<std::string> env_strings;
        for (const auto& [name, value] : env) {
          env_strings.push_back(absl::StrCat(name, "=", value));
        }
        const std::string out = Path(absl::StrCat(tag, "_rank_", rank));
        std::vector<std::string> args = {
            PINWHEEL_LAUNCH_RANK_HELPER,
            absl::StrCat(size),
            absl::StrCat(batch),
            absl::StrCat(batches),
            /*gpus per node=*/absl::StrCat(per_node),
            out,
            resume};
        if (checkpoint) {
          args.push_back(Path(absl::StrCat(tag, "_checkpoint_", rank)));
        }
        std::vector<char*> argv;
        for (std::string& a : args) argv.push_back(a.data());
        argv.push_back(nullptr);
        std::vector<char*> envp;
        for (std::string& e : env_strings) envp.push_back(e.data());
        envp.push_back(nullptr);
        pid_t pid = 0;
        const int err = posix_spawn(&pid, argv[0], nullptr, nullptr,
                                    argv.data(), envp.data());
        EXPECT_EQ(err, 0) << "posix_spawn " << argv[0];
        if (err == 0) children.push_back({pid, out});
      }
    }
    std::vector<RankRead> reads;
    for (const Child& child : children) {
      int status = 0;
      EXPECT_EQ(waitpid(child.pid, &status, 0), child.pid);
      EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
          << tag << ": " << child.out << " exited with status " << status;
      RankRead read;
      std::ifstream in(child.out);
      in >> read.launcher >> read.rank >> read.world >> read.local_rank >>
          read.local_world_size >> read.gpu;
      for (int64_t index; in >> index;) read.indices.push_back(index);
      reads.push_back(std::move(read));
    }
    return reads;
  }

  std::string dir_;
};

// Checks that the indices of `reads` together hold 0..size-1 exactly once.
void ExpectEachIndexOnce(const std::vector<std::vector<RankRead>>& jobs,
                         int64_t size) {
  std::vector<int> counts(size, 0);
  for (const std::vector<RankRead>& job : jobs) {
    for (const RankRead& read : job) {
      for (int64_t index : read.indices) {
        ASSERT_GE(index, 0);
        ASSERT_LT(index, size);
        ++counts[index];
      }
    }
  }
  for (int64_t i = 0; i < size; ++i) {
    ASSERT_EQ(counts[i], 1) << "index " << i;
  }
}

// Checks rank, world size, local rank and device index of each rank of a
// nodes x per_node job (each node said to show per_node GPUs).
void ExpectRanks(const std::vector<RankRead>& job, const std::string& launcher,
                 int nodes, int per_node) {
  ASSERT_EQ(job.size(), static_cast<size_t>(nodes * per_node));
  for (int rank = 0; rank < nodes * per_node; ++rank) {
    EXPECT_EQ(job[rank].launcher, launcher);
    EXPECT_EQ(job[rank].rank, rank);
    EXPECT_EQ(job[rank].world, nodes * per_node);
    EXPECT_EQ(job[rank].local_rank, rank % per_node);
    EXPECT_EQ(job[rank].local_world_size, per_node);
    EXPECT_EQ(job[rank].gpu, rank % per_node) << "LOCAL_RANK picks the GPU";
  }
}

constexpr int64_t kSize = 240;
constexpr int64_t kBatch = 5;

TEST_F(MultiNodeTest, TwoNodesOfTwoTorchrunRanksReadEverySampleOnce) {
  const std::vector<RankRead> job =
      RunJob("torchrun", Torchrun, 2, 2, kSize, kBatch, -1, "-", false);
  ExpectRanks(job, "torchrun", 2, 2);
  for (const RankRead& read : job) {
    EXPECT_EQ(read.indices.size(), static_cast<size_t>(kSize / 4));
  }
  ExpectEachIndexOnce({job}, kSize);
}

TEST_F(MultiNodeTest, TwoNodesOfTwoSlurmTasksReadEverySampleOnce) {
  const std::vector<RankRead> job =
      RunJob("slurm", Slurm, 2, 2, kSize, kBatch, -1, "-", false);
  ExpectRanks(job, "slurm", 2, 2);
  for (const RankRead& read : job) {
    EXPECT_EQ(read.indices.size(), static_cast<size_t>(kSize / 4));
  }
  ExpectEachIndexOnce({job}, kSize);
}

TEST_F(MultiNodeTest, TheSameSeedDealsTheSameShareWhateverTheLauncher) {
  const std::vector<RankRead> torchrun =
      RunJob("torchrun", Torchrun, 2, 2, kSize, kBatch, -1, "-", false);
  const std::vector<RankRead> slurm =
      RunJob("slurm", Slurm, 2, 2, kSize, kBatch, -1, "-", false);
  ASSERT_EQ(torchrun.size(), slurm.size());
  for (size_t rank = 0; rank < torchrun.size(); ++rank) {
    EXPECT_EQ(torchrun[rank].indices, slurm[rank].indices) << "rank " << rank;
  }
}

// 4 batches of 5 on each of 4 ranks: 80 of 240 positions before the
// checkpoint; the 160 left divide over 2 ranks and over 8.
TEST_F(MultiNodeTest, ACheckpointOfTwoByTwoResumesOnOneByTwoAndOnTwoByFour) {
  const std::vector<RankRead> before =
      RunJob("before", Torchrun, 2, 2, kSize, kBatch, 4, "-", true);
  ExpectRanks(before, "torchrun", 2, 2);
  for (const RankRead& read : before) {
    ASSERT_EQ(read.indices.size(), static_cast<size_t>(4 * kBatch));
  }
  // Any rank's checkpoint resumes the whole job (Note [exact resume]).
  const std::string checkpoint = Path("before_checkpoint_0");
  ASSERT_TRUE(std::filesystem::exists(checkpoint));

  const std::vector<RankRead> shrunk =
      RunJob("shrunk", Torchrun, 1, 2, kSize, kBatch, -1, checkpoint, false);
  ExpectRanks(shrunk, "torchrun", 1, 2);
  ExpectEachIndexOnce({before, shrunk}, kSize);

  const std::vector<RankRead> grown =
      RunJob("grown", Slurm, 2, 4, kSize, kBatch, -1, checkpoint, false);
  ExpectRanks(grown, "slurm", 2, 4);
  for (const RankRead& read : grown) {
    EXPECT_EQ(read.indices.size(), static_cast<size_t>(160 / 8));
  }
  ExpectEachIndexOnce({before, grown}, kSize);
}

}  // namespace
}  // namespace pinwheel
