// RecordFileDataset over URLs (loader/record_file.h): the same records as
// from the local file, over HTTP and S3 (moto) and through the fault proxy;
// every sample once in a loader's epoch; faults named.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include "loader/loader_builder.h"
#include "loader/record_file.h"
#include "tests/loader/storage/storage_test_files.h"
#include "tests/loader/storage/test_servers.h"
#include "tests/support/drain_epoch.h"

namespace pinwheel {
namespace {

namespace fs = std::filesystem;
using ::pinwheel::testing_support::ClearAwsEnvironment;
using ::pinwheel::testing_support::DrainedEpoch;
using ::pinwheel::testing_support::DrainEpoch;
using ::pinwheel::testing_support::ServedFolderTest;
using ::pinwheel::testing_support::ServerProcess;
using ::pinwheel::testing_support::StartFaultProxy;
using ::testing::HasSubstr;

constexpr int kRecords = 300;
constexpr char kBucket[] = "pinwheel-records";

// Record i: 60 bytes of pattern, then i as i64.
std::vector<std::byte> Record(int64_t i) {
  std::vector<std::byte> bytes(68);
  for (int b = 0; b < 60; ++b) bytes[b] = static_cast<std::byte>(i * 7 + b);
  std::memcpy(bytes.data() + 60, &i, 8);
  return bytes;
}

class RemoteRecordFileTest : public ServedFolderTest<RemoteRecordFileTest> {
 protected:
  static void SetUpTestSuite() {
    ClearAwsEnvironment();
    ::setenv("AWS_ACCESS_KEY_ID", "testing", 1);
    ::setenv("AWS_SECRET_ACCESS_KEY", "testing", 1);
    const fs::path files = MakeFolder("remote_record_file_test") / "files";
    fs::create_directories(files);
    absl::StatusOr<SampleLayout> layout = SampleLayout::Create(
        {{.name = "x", .dtype = DType::kUInt8, .shape = {60}},
         {.name = "i", .dtype = DType::kInt64, .shape = {}}});
    ASSERT_TRUE(layout.ok());
    auto writer =
        RecordFileWriter::Create((files / "train.pwr").string(), *layout);
    ASSERT_TRUE(writer.ok()) << writer.status();
    for (int64_t i = 0; i < kRecords; ++i) {
      ASSERT_TRUE(writer->AppendRaw(Record(i)).ok());
    }
    ASSERT_TRUE(writer->Close().ok());
    std::ofstream(files / "junk.pwr") << std::string(200, 'j');
    const absl::Status served = Serve(files.string(), kBucket, files.string());
    ASSERT_TRUE(served.ok()) << served;
  }

  // Reads every record of `ds` with Read() and checks it.
  static void ExpectEveryRecord(const RecordFileDataset& ds) {
    ASSERT_EQ(ds.size(), kRecords);
    absl::StatusOr<BatchLayout> batch = BatchLayout::Create(ds.layout(), 1);
    std::vector<std::byte> slot(batch->slot_bytes());
    SampleView view(*batch, slot.data(), 0, 0);
    for (int64_t i = 0; i < kRecords; i += 7) {
      ASSERT_TRUE(ds.Read(i, view).ok()) << i;
      std::vector<std::byte> got(view.field(0).begin(), view.field(0).end());
      got.insert(got.end(), view.field(1).begin(), view.field(1).end());
      EXPECT_EQ(got, Record(i)) << i;
    }
  }

  // The record indices one loader epoch over `ds` delivers.
  static std::multiset<int64_t> EpochIndices(
      std::shared_ptr<RecordFileDataset> ds) {
    std::multiset<int64_t> seen;
    absl::StatusOr<Loader> loader = LoaderBuilder(std::move(ds))
                                        .batch_size(16)
                                        .num_workers(2)
                                        .shuffle(true)
                                        .device(Device::Host())
                                        .Build();
    EXPECT_TRUE(loader.ok()) << loader.status();
    if (!loader.ok()) return seen;
    const DrainedEpoch drained = DrainEpoch(*loader, {.copy_fields = true});
    EXPECT_TRUE(drained.status.ok()) << drained.status;
    for (const auto& batch : drained.batches) {
      for (int64_t p = 0; p < batch.size; ++p) {
        int64_t i = 0;
        std::memcpy(&i, batch.fields[1].data() + p * 8, 8);
        EXPECT_EQ(
            std::memcmp(batch.fields[0].data() + p * 60, Record(i).data(), 60),
            0);
        seen.insert(i);
      }
    }
    return seen;
  }

  static std::multiset<int64_t> All() {
    std::multiset<int64_t> all;
    for (int64_t i = 0; i < kRecords; ++i) all.insert(i);
    return all;
  }
};

TEST_F(RemoteRecordFileTest, OverHttpReadsTheSameRecords) {
  auto ds = RecordFileDataset::Open(http().url() + "/train.pwr");
  ASSERT_TRUE(ds.ok()) << ds.status();
  ExpectEveryRecord(**ds);
  EXPECT_TRUE((*ds)->record(0).empty());
  EXPECT_EQ((*ds)->Gather(1 << 30).status().code(),
            absl::StatusCode::kUnimplemented);
  EXPECT_EQ(EpochIndices(*ds), All());
}

TEST_F(RemoteRecordFileTest, OverS3ReadsTheSameRecords) {
  StoreOptions storage;
  storage.s3_endpoint = moto().url();
  auto ds = RecordFileDataset::Open(
      absl::StrCat("s3://", kBucket, "/train.pwr"), storage);
  ASSERT_TRUE(ds.ok()) << ds.status();
  ExpectEveryRecord(**ds);
  EXPECT_EQ(EpochIndices(*ds), All());
}

TEST_F(RemoteRecordFileTest, ThroughFaultsEveryRecordOnce) {
  auto proxy = StartFaultProxy(
      http(), {"--seed", "3", "--p-slowdown", "0.1", "--p-reset", "0.05",
               "--p-truncate", "0.05", "--max-faults", "2"});
  ASSERT_TRUE(proxy.ok()) << proxy.status();
  StoreOptions storage;
  storage.initial_backoff = absl::Milliseconds(1);
  storage.max_backoff = absl::Milliseconds(10);
  auto ds = RecordFileDataset::Open((*proxy)->url() + "/train.pwr", storage);
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_EQ(EpochIndices(*ds), All());
}

TEST_F(RemoteRecordFileTest, BadFilesAndMissingOnesAreNamed) {
  const std::string junk = http().url() + "/junk.pwr";
  auto bad = RecordFileDataset::Open(junk);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument)
      << bad.status();
  EXPECT_THAT(bad.status().message(), HasSubstr(junk));
  EXPECT_THAT(bad.status().message(), HasSubstr("wrong magic"));
  const std::string missing = http().url() + "/missing.pwr";
  auto none = RecordFileDataset::Open(missing);
  EXPECT_EQ(none.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(none.status().message(), HasSubstr(missing));
}

}  // namespace
}  // namespace pinwheel
