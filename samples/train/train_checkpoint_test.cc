#include "samples/train/train_checkpoint.h"

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <unistd.h>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "gtest/gtest.h"

#include "loader/atomic_file.h"
#include "loader/loader_checkpoint.h"
#include "samples/train/mlp.h"

namespace pinwheel::train {
namespace {

TrainCheckpoint Example() {
  TrainCheckpoint c;
  c.shape = MlpShape{.inputs = 3, .hidden = 4, .classes = 2};
  c.seed = 99;
  c.batch_size = 8;
  c.world_size = 2;
  c.sgd = SgdOptions{.learning_rate = 0.25f, .momentum = 0.5f};
  c.epoch = 3;
  c.step = 41;
  c.batches_in_epoch = 5;
  c.loader.dataset_size = 100;
  c.loader.shuffle = true;
  c.loader.seed = 99;
  c.loader.batch_size = 8;
  c.loader.world_size = 2;
  c.loader.epoch = 2;
  c.loader.position = 80;
  const size_t n = ParameterLayout(c.shape).total;
  for (size_t i = 0; i < n; ++i) {
    c.model.parameters.push_back(0.5f * static_cast<float>(i) - 3.0f);
    c.model.velocity.push_back(-0.125f * static_cast<float>(i));
  }
  return c;
}

TEST(TrainCheckpoint, RoundTripsEveryField) {
  const TrainCheckpoint c = Example();
  absl::StatusOr<TrainCheckpoint> back =
      TrainCheckpoint::FromBytes(c.ToBytes());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->shape.inputs, 3);
  EXPECT_EQ(back->shape.hidden, 4);
  EXPECT_EQ(back->shape.classes, 2);
  EXPECT_EQ(back->seed, 99u);
  EXPECT_EQ(back->batch_size, 8);
  EXPECT_EQ(back->world_size, 2);
  EXPECT_EQ(back->sgd.learning_rate, 0.25f);
  EXPECT_EQ(back->sgd.momentum, 0.5f);
  EXPECT_EQ(back->epoch, 3);
  EXPECT_EQ(back->step, 41);
  EXPECT_EQ(back->batches_in_epoch, 5);
  EXPECT_EQ(back->loader, c.loader);
  EXPECT_EQ(back->model.parameters, c.model.parameters);
  EXPECT_EQ(back->model.velocity, c.model.velocity);
}

// A torn or damaged file is an error, never a crash or a wrong resume.
TEST(TrainCheckpoint, RefusesEveryTruncationAndEveryFlippedByte) {
  const std::string bytes = Example().ToBytes();
  for (size_t n = 0; n < bytes.size(); ++n) {
    EXPECT_FALSE(TrainCheckpoint::FromBytes(bytes.substr(0, n)).ok())
        << "the first " << n << " bytes were taken";
  }
  for (size_t i = 0; i < bytes.size(); ++i) {
    std::string flipped = bytes;
    flipped[i] = static_cast<char>(flipped[i] ^ 0x10);
    EXPECT_FALSE(TrainCheckpoint::FromBytes(flipped).ok()) << "byte " << i;
  }
}

TEST(TrainCheckpoint, ErrorsSayWhatIsWrong) {
  const std::string bytes = Example().ToBytes();
  absl::Status truncated =
      TrainCheckpoint::FromBytes(bytes.substr(0, 40)).status();
  EXPECT_EQ(truncated.code(), absl::StatusCode::kDataLoss);
  EXPECT_TRUE(absl::StrContains(truncated.message(), "truncated")) << truncated;
  std::string flipped = bytes;
  flipped[bytes.size() / 2] ^= 1;
  absl::Status corrupted = TrainCheckpoint::FromBytes(flipped).status();
  EXPECT_EQ(corrupted.code(), absl::StatusCode::kDataLoss);
  EXPECT_TRUE(absl::StrContains(corrupted.message(), "CRC-32C")) << corrupted;
  absl::Status foreign =
      TrainCheckpoint::FromBytes("PWLDCKPT and more bytes").status();
  EXPECT_EQ(foreign.code(), absl::StatusCode::kInvalidArgument);
  std::string newer = bytes;
  newer[8] = 2;  // version
  absl::Status version = TrainCheckpoint::FromBytes(newer).status();
  EXPECT_EQ(version.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(version.message(), "version 2")) << version;
}

class CheckpointFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("train_checkpoint_test_" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

TEST_F(CheckpointFileTest, WritesAtomicallyAndReadsBack) {
  const std::string path = (dir_ / kCheckpointFile).string();
  ASSERT_TRUE(WriteFileAtomically(path, "old contents").ok());
  const std::string bytes = Example().ToBytes();
  ASSERT_TRUE(WriteFileAtomically(path, bytes).ok());
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"))
      << "the temp file was renamed";
  std::ifstream in(path, std::ios::binary);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), bytes);
  absl::StatusOr<TrainCheckpoint> read = ReadTrainCheckpoint(dir_.string());
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->step, 41);
}

TEST_F(CheckpointFileTest, NamesTheFileWhenThereIsNoneOrItIsDamaged) {
  absl::Status missing = ReadTrainCheckpoint(dir_.string()).status();
  EXPECT_EQ(missing.code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(absl::StrContains(missing.message(), kCheckpointFile)) << missing;
  const std::string path = (dir_ / kCheckpointFile).string();
  const std::string bytes = Example().ToBytes();
  ASSERT_TRUE(
      WriteFileAtomically(path, bytes.substr(0, bytes.size() - 7)).ok());
  absl::Status torn = ReadTrainCheckpoint(dir_.string()).status();
  EXPECT_EQ(torn.code(), absl::StatusCode::kDataLoss);
  EXPECT_TRUE(absl::StrContains(torn.message(), path)) << torn;
}

TEST_F(CheckpointFileTest, FailsNamingTheFileWhenTheDirectoryIsMissing) {
  const std::string path = (dir_ / "no such dir" / kCheckpointFile).string();
  absl::Status s = WriteFileAtomically(path, "x");
  EXPECT_FALSE(s.ok());
  EXPECT_TRUE(absl::StrContains(s.message(), path + ".tmp")) << s;
}

}  // namespace
}  // namespace pinwheel::train
