// TarShardDataset over URLs (loader/image/tar_shards.h, Storage): the same
// samples as from local files, over HTTP and S3 (moto), through a proxy
// that injects faults, with resume; errors named when retries run out.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include "loader/image/tar_shards.h"
#include "loader/loader_builder.h"
#include "loader/storage/http_store.h"
#include "loader/storage/shard_pattern.h"
#include "tests/loader/image/tar_shard_samples.h"
#include "tests/loader/storage/storage_test_files.h"
#include "tests/loader/storage/test_servers.h"

namespace pinwheel {
namespace {

namespace fs = std::filesystem;
using ::pinwheel::testing::LabelledImages;
using ::pinwheel::testing::SamplesByLabel;
using ::pinwheel::testing::WriteLabelledShards;
using ::pinwheel::testing_support::ClearAwsEnvironment;
using ::pinwheel::testing_support::ServedFolderTest;
using ::pinwheel::testing_support::ServerProcess;
using ::pinwheel::testing_support::StartFaultProxy;
using ::testing::HasSubstr;

constexpr int kSize = 16;
constexpr int kShards = 4;
constexpr int kPerShard = 6;
constexpr char kBucket[] = "pinwheel-test";

constexpr int kBatch = 4;  // of the loaders of SamplesByLabel

class RemoteTarShardsTest : public ServedFolderTest<RemoteTarShardsTest> {
 protected:
  static void SetUpTestSuite() {
    // Only what the tests set: no endpoint or credentials of the machine.
    ClearAwsEnvironment();
    const fs::path shards = MakeFolder("remote_tar_shards_test") / "shards";
    fs::create_directories(shards);
    local_ = WriteLabelledShards(shards, kShards, kPerShard,
                                 /*with_json=*/false);
    // A credentials profile, as ~/.aws/credentials would hold it.
    const fs::path credentials = folder() / "credentials";
    std::ofstream(credentials) << "[other]\naws_access_key_id = nope\n"
                               << "[ci]\naws_access_key_id = testing\n"
                               << "aws_secret_access_key = testing\n";
    ::setenv("AWS_SHARED_CREDENTIALS_FILE", credentials.c_str(), 1);
    const absl::Status served =
        Serve(folder().string(), kBucket, shards.string(), "shards/");
    ASSERT_TRUE(served.ok()) << served;
  }

  // The shards' URLs under `base` ("http://127.0.0.1:port").
  static std::vector<std::string> HttpUrls(const std::string& base) {
    auto urls = ExpandShardPattern(
        absl::StrCat(base, "/shards/shard-{0..", kShards - 1, "}.tar"));
    EXPECT_TRUE(urls.ok()) << urls.status();
    return *urls;
  }
  static std::vector<std::string> S3Urls() {
    return *ExpandShardPattern(absl::StrCat(
        "s3://", kBucket, "/shards/shard-{0..", kShards - 1, "}.tar"));
  }
  // Small chunks: many requests per shard, members across chunk borders.
  static TarShardOptions Options() {
    TarShardOptions options{.transform = {.size = kSize}, .seed = 5};
    options.read_chunk_bytes = 4096;
    options.read_ahead_chunks = 2;
    options.storage.initial_backoff = absl::Milliseconds(1);
    options.storage.max_backoff = absl::Milliseconds(20);
    return options;
  }
  static TarShardOptions S3Options(const std::string& endpoint) {
    TarShardOptions options = Options();
    options.storage.s3_endpoint = endpoint;
    options.storage.s3_profile = "ci";
    return options;
  }
  static LabelledImages LocalSamples() {
    auto ds = TarShardDataset::Open(local_, Options());
    EXPECT_TRUE(ds.ok()) << ds.status();
    absl::Status status;
    LabelledImages samples = SamplesByLabel(*ds, kSize, kBatch, 2, &status);
    EXPECT_TRUE(status.ok()) << status;
    EXPECT_EQ(samples.size(), size_t{kShards * kPerShard});
    return samples;
  }
  // Starts a fault proxy in front of `upstream` with `args`.
  static std::unique_ptr<ServerProcess> Proxy(const ServerProcess& upstream,
                                              std::vector<std::string> args) {
    auto proxy = StartFaultProxy(upstream, std::move(args));
    EXPECT_TRUE(proxy.ok()) << proxy.status();
    return proxy.ok() ? *std::move(proxy) : nullptr;
  }
  // The proxy's fault counts, as its /__faults JSON text.
  static std::string FaultCounts(const ServerProcess& proxy) {
    auto store = HttpStore::Create({});
    const std::string url = proxy.url() + "/__faults";
    absl::StatusOr<int64_t> size = (*store)->Size(url);
    if (!size.ok()) return size.status().ToString();
    std::string text(static_cast<size_t>(*size), '\0');
    const RangeRead read = {
        url, 0,
        absl::MakeSpan(reinterpret_cast<std::byte*>(text.data()), text.size())};
    absl::Status s = (*store)->Read({&read, 1});
    return s.ok() ? text : s.ToString();
  }

  static std::vector<std::string> local_;
};

std::vector<std::string> RemoteTarShardsTest::local_;

TEST_F(RemoteTarShardsTest, OverHttpEverySampleOnceAsFromLocalFiles) {
  auto ds = TarShardDataset::Open(HttpUrls(http().url()), Options());
  ASSERT_TRUE(ds.ok()) << ds.status();
  absl::Status status;
  const LabelledImages remote = SamplesByLabel(*ds, kSize, kBatch, 2, &status);
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(remote, LocalSamples());
}

TEST_F(RemoteTarShardsTest, OverS3EverySampleOnceAsFromLocalFiles) {
  auto ds = TarShardDataset::Open(S3Urls(), S3Options(moto().url()));
  ASSERT_TRUE(ds.ok()) << ds.status();
  absl::Status status;
  const LabelledImages remote = SamplesByLabel(*ds, kSize, kBatch, 3, &status);
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(remote, LocalSamples());
}

TEST_F(RemoteTarShardsTest, AMissingShardIsNotFoundAtOpenNamingIt) {
  std::vector<std::string> urls = HttpUrls(http().url());
  urls.push_back(http().url() + "/shards/shard-9.tar");
  auto ds = TarShardDataset::Open(urls, Options());
  EXPECT_EQ(ds.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(ds.status().message(), HasSubstr("shard-9.tar"));
  auto s3 = TarShardDataset::Open(
      {absl::StrCat("s3://", kBucket, "/shards/nope.tar")},
      S3Options(moto().url()));
  EXPECT_EQ(s3.status().code(), absl::StatusCode::kNotFound) << s3.status();
  EXPECT_THAT(s3.status().message(),
              HasSubstr("s3://pinwheel-test/shards/nope.tar"));
  auto mixed = TarShardDataset::Open({local_[0], urls[1]}, Options());
  EXPECT_EQ(mixed.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(RemoteTarShardsTest, AStreamResumesMidShardWithNoSampleLostOrRepeated) {
  auto ds = TarShardDataset::Open(HttpUrls(http().url()), Options());
  ASSERT_TRUE(ds.ok()) << ds.status();
  absl::StatusOr<BatchLayout> layout = BatchLayout::Create((*ds)->layout(), 1);
  std::vector<std::byte> slot(layout->slot_bytes());
  SampleView view(*layout, slot.data(), 0, 0);
  auto label = [&] {
    int64_t l = 0;
    std::memcpy(&l, view.field(1).data(), 8);
    return l;
  };
  std::vector<int64_t> seen;
  auto first = (*ds)->OpenShard(0, 1, 0);
  ASSERT_TRUE(first.ok());
  for (int i = 0; i < kPerShard + 2; ++i) {  // into the second shard
    absl::StatusOr<bool> next = (*first)->Next(view);
    ASSERT_TRUE(next.ok() && *next) << next.status();
    seen.push_back(label());
  }
  absl::StatusOr<std::string> state = (*first)->SaveState();
  ASSERT_TRUE(state.ok());
  auto second = (*ds)->OpenShard(0, 1, 0);
  ASSERT_TRUE((*second)->RestoreState(*state).ok());
  for (;;) {
    absl::StatusOr<bool> next = (*second)->Next(view);
    ASSERT_TRUE(next.ok()) << next.status();
    if (!*next) break;
    seen.push_back(label());
  }
  std::vector<int64_t> all(kShards * kPerShard);
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int64_t>(i);
  EXPECT_EQ(seen, all);
}

TEST_F(RemoteTarShardsTest, ThroughFaultsOverHttpEverySampleOnce) {
  std::unique_ptr<ServerProcess> proxy =
      Proxy(http(), {"--seed", "7", "--p-delay", "0.1", "--delay-ms", "5",
                     "--p-slowdown", "0.15", "--p-reset", "0.1", "--p-truncate",
                     "0.1", "--max-faults", "2"});
  ASSERT_NE(proxy, nullptr);
  auto ds = TarShardDataset::Open(HttpUrls(proxy->url()), Options());
  ASSERT_TRUE(ds.ok()) << ds.status();
  absl::Status status;
  const LabelledImages remote = SamplesByLabel(*ds, kSize, kBatch, 2, &status);
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(remote, LocalSamples());
  // The faults happened (else this case proves nothing).
  const std::string counts = FaultCounts(*proxy);
  for (const char* kind : {"delay", "slowdown", "reset", "truncate"}) {
    EXPECT_THAT(counts,
                ::testing::Not(HasSubstr(absl::StrCat("\"", kind, "\": 0,"))))
        << counts;
  }
}

TEST_F(RemoteTarShardsTest, ThroughFaultsOverS3EverySampleOnce) {
  std::unique_ptr<ServerProcess> proxy =
      Proxy(moto(), {"--seed", "11", "--p-slowdown", "0.2", "--p-reset", "0.1",
                     "--p-truncate", "0.1", "--max-faults", "2"});
  ASSERT_NE(proxy, nullptr);
  auto ds = TarShardDataset::Open(S3Urls(), S3Options(proxy->url()));
  ASSERT_TRUE(ds.ok()) << ds.status();
  absl::Status status;
  const LabelledImages remote = SamplesByLabel(*ds, kSize, kBatch, 2, &status);
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(remote, LocalSamples());
  EXPECT_THAT(FaultCounts(*proxy),
              ::testing::Not(HasSubstr("\"slowdown\": 0,")));
}

TEST_F(RemoteTarShardsTest, WhenRetriesRunOutTheEpochFailsNamingTheRequest) {
  std::unique_ptr<ServerProcess> proxy = Proxy(
      http(),
      {"--p-slowdown", "1.0", "--max-faults", "1000", "--methods", "GET"});
  ASSERT_NE(proxy, nullptr);
  TarShardOptions options = Options();
  options.storage.max_attempts = 2;
  auto ds = TarShardDataset::Open(HttpUrls(proxy->url()), options);
  ASSERT_TRUE(ds.ok()) << ds.status();  // the HEADs pass
  absl::Status status;
  const LabelledImages remote = SamplesByLabel(*ds, kSize, kBatch, 1, &status);
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
  EXPECT_THAT(status.message(),
              HasSubstr(proxy->url() + "/shards/shard-0.tar"));
  EXPECT_THAT(status.message(), HasSubstr("bytes [0, 4096)"));
  EXPECT_THAT(status.message(), HasSubstr("HTTP 503"));
  EXPECT_THAT(status.message(), HasSubstr("SlowDown"));
  EXPECT_THAT(status.message(), HasSubstr("after 2 attempts"));
  EXPECT_TRUE(remote.empty());
}

}  // namespace
}  // namespace pinwheel
