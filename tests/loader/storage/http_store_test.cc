#include "loader/storage/http_store.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include "loader/storage/open_object_store.h"
#include "tests/loader/storage/storage_test_files.h"
#include "tests/loader/storage/test_servers.h"

namespace pinwheel {
namespace {

using ::testing::HasSubstr;
using testing_support::PatternBytes;
using testing_support::ServerProcess;
using testing_support::StartFaultProxy;
using testing_support::TempDir;
using testing_support::WritePatternFile;

constexpr int64_t kBig = (3 << 20) + 123;  // not a multiple of anything

class HttpStoreTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir("http_store_test");
    WritePatternFile(dir_->path(), "a.bin", 1000);
    WritePatternFile(dir_->path(), "big.bin", kBig);
    WritePatternFile(dir_->path(), "empty.bin", 0);
    auto server = ServerProcess::Start("range_http_server.py",
                                       {"--root", dir_->path().string()});
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = server->release();
  }
  static void TearDownTestSuite() {
    delete server_;
    delete dir_;
  }
  void SetUp() override {
    ASSERT_NE(server_, nullptr) << "the server did not start";
  }

  static std::string Url(const std::string& name) {
    return absl::StrCat(server_->url(), "/", name);
  }

  static TempDir* dir_;
  static ServerProcess* server_;
};

TempDir* HttpStoreTest::dir_ = nullptr;
ServerProcess* HttpStoreTest::server_ = nullptr;

TEST_F(HttpStoreTest, SizeIsTheObjectsLength) {
  auto store = HttpStore::Create({});
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ(*(*store)->Size(Url("a.bin")), 1000);
  EXPECT_EQ(*(*store)->Size(Url("big.bin")), kBig);
  EXPECT_EQ(*(*store)->Size(Url("empty.bin")), 0);
}

TEST_F(HttpStoreTest, ReadsEveryRangeIntoItsOwnDestination) {
  auto store = HttpStore::Create({});
  ASSERT_TRUE(store.ok());
  std::vector<std::vector<std::byte>> buffers;
  std::vector<RangeRead> reads;
  const std::vector<std::pair<int64_t, int64_t>> ranges = {
      {0, 1}, {0, 1000}, {999, 1}, {17, 300}, {512, 488}};
  buffers.reserve(ranges.size() + 1);
  for (auto [offset, length] : ranges) {
    buffers.emplace_back(static_cast<size_t>(length));
    reads.push_back({Url("a.bin"), offset, absl::MakeSpan(buffers.back())});
  }
  buffers.emplace_back(static_cast<size_t>(kBig - 5));
  reads.push_back({Url("big.bin"), 5, absl::MakeSpan(buffers.back())});
  ASSERT_TRUE((*store)->Read(reads).ok());
  for (size_t i = 0; i < ranges.size(); ++i) {
    EXPECT_EQ(buffers[i],
              PatternBytes("a.bin", ranges[i].first, ranges[i].second))
        << "range " << i;
  }
  EXPECT_EQ(buffers.back(), PatternBytes("big.bin", 5, kBig - 5));
}

TEST_F(HttpStoreTest, ALargeRangeIsReadAsManyRequestsInFlight) {
  auto store =
      HttpStore::Create({.max_in_flight = 8, .max_request_bytes = 65536});
  ASSERT_TRUE(store.ok());
  std::vector<std::byte> out(static_cast<size_t>(kBig) - 1000);
  const RangeRead read = {Url("big.bin"), 1000, absl::MakeSpan(out)};
  ASSERT_TRUE((*store)->Read({&read, 1}).ok());
  EXPECT_EQ(out, PatternBytes("big.bin", 1000, kBig - 1000));
}

TEST_F(HttpStoreTest, ManyThreadsReadThroughOneStoreAtOnce) {
  auto opened = OpenObjectStore(Url("big.bin"), {.max_in_flight = 4});
  ASSERT_TRUE(opened.ok()) << opened.status();
  std::shared_ptr<ObjectStore> store = *opened;
  std::vector<std::thread> threads;
  std::vector<int> failures(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 20; ++i) {
        const int64_t offset = (t * 7919 + i * 104729) % (kBig - 70000);
        std::vector<std::byte> out(65536 + i);
        const RangeRead read = {Url("big.bin"), offset, absl::MakeSpan(out)};
        if (!store->Read({&read, 1}).ok() ||
            out != PatternBytes("big.bin", offset, 65536 + i)) {
          ++failures[t];
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_THAT(failures, ::testing::Each(0));
}

TEST_F(HttpStoreTest, MoreIoThreadsThanRequestsInFlightStartOneARequest) {
  auto store = HttpStore::Create({.max_in_flight = 2, .io_threads = 4});
  ASSERT_TRUE(store.ok()) << store.status();
  std::vector<std::byte> out(static_cast<size_t>(kBig));
  const RangeRead read = {Url("big.bin"), 0, absl::MakeSpan(out)};
  ASSERT_TRUE((*store)->Read({&read, 1}).ok());
  EXPECT_EQ(out, PatternBytes("big.bin", 0, kBig));
  auto refused = HttpStore::Create({.io_threads = 0});
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.status().message(), HasSubstr("io_threads = 0"));
}

TEST_F(HttpStoreTest, AMissingObjectIsNotFoundNamingItsUrl) {
  auto store = HttpStore::Create({});
  ASSERT_TRUE(store.ok());
  absl::StatusOr<int64_t> size = (*store)->Size(Url("nope.bin"));
  EXPECT_EQ(size.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(size.status().message(), HasSubstr(Url("nope.bin")));
  EXPECT_THAT(size.status().message(), HasSubstr("HTTP 404"));
  std::vector<std::byte> out(10);
  const RangeRead read = {Url("nope.bin"), 0, absl::MakeSpan(out)};
  const absl::Status status = (*store)->Read({&read, 1});
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(status.message(), HasSubstr(Url("nope.bin")));
  EXPECT_THAT(status.message(), HasSubstr("bytes [0, 10)"));
  EXPECT_THAT(status.message(), HasSubstr("after 1 attempt"));
}

TEST_F(HttpStoreTest, ARangePastTheEndIsOutOfRangeNamingTheSize) {
  auto store = HttpStore::Create({});
  ASSERT_TRUE(store.ok());
  for (int64_t offset : {990, 1000, 5000}) {
    std::vector<std::byte> out(20);
    const RangeRead read = {Url("a.bin"), offset, absl::MakeSpan(out)};
    const absl::Status status = (*store)->Read({&read, 1});
    EXPECT_EQ(status.code(), absl::StatusCode::kOutOfRange) << status;
    EXPECT_THAT(status.message(), HasSubstr("1000 bytes")) << offset;
    EXPECT_THAT(status.message(), HasSubstr(Url("a.bin")));
  }
}

TEST_F(HttpStoreTest, AnUnreachableServerFailsAfterItsAttemptsNamingThem) {
  // A port nobody listens on: the server's, after it is gone.
  std::string url;
  {
    auto other = ServerProcess::Start("range_http_server.py",
                                      {"--root", dir_->path().string()});
    ASSERT_TRUE(other.ok());
    url = absl::StrCat((*other)->url(), "/a.bin");
  }
  auto store = HttpStore::Create({.max_attempts = 3,
                                  .initial_backoff = absl::Milliseconds(1),
                                  .max_backoff = absl::Milliseconds(5)});
  ASSERT_TRUE(store.ok());
  std::vector<std::byte> out(10);
  const RangeRead read = {url, 3, absl::MakeSpan(out)};
  const absl::Status status = (*store)->Read({&read, 1});
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
  EXPECT_THAT(status.message(), HasSubstr(url));
  EXPECT_THAT(status.message(), HasSubstr("bytes [3, 13)"));
  EXPECT_THAT(status.message(), HasSubstr("after 3 attempts"));
}

TEST_F(HttpStoreTest, ASlowResponseTimesOutAndIsTriedAgain) {
  // The proxy holds the first two sightings of the request for 2 s each;
  // the store gives an attempt 200 ms. The first store's one attempt is
  // the first sighting, the second store's two are the second and third.
  auto proxy = StartFaultProxy(
      *server_, {"--p-delay", "1", "--delay-ms", "2000", "--max-faults", "2"});
  ASSERT_TRUE(proxy.ok()) << proxy.status();
  const std::string url = absl::StrCat((*proxy)->url(), "/a.bin");
  StoreOptions options{.request_timeout = absl::Milliseconds(200)};
  options.initial_backoff = absl::Milliseconds(1);
  options.max_backoff = absl::Milliseconds(2);
  std::vector<std::byte> out(100);
  const RangeRead read = {url, 7, absl::MakeSpan(out)};
  {
    options.max_attempts = 1;
    auto store = HttpStore::Create(options);
    ASSERT_TRUE(store.ok());
    const absl::Status status = (*store)->Read({&read, 1});
    EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded) << status;
    EXPECT_THAT(status.message(), HasSubstr(url));
    EXPECT_THAT(status.message(), HasSubstr("bytes [7, 107)"));
    EXPECT_THAT(status.message(), HasSubstr("after 1 attempt"));
  }
  options.max_attempts = 2;
  auto store = HttpStore::Create(options);
  ASSERT_TRUE(store.ok());
  const absl::Time start = absl::Now();
  const absl::Status status = (*store)->Read({&read, 1});
  EXPECT_TRUE(status.ok()) << status;  // its second attempt is clean
  EXPECT_EQ(out, PatternBytes("a.bin", 7, 100));
  EXPECT_LT(absl::Now() - start, absl::Seconds(2));
}

TEST_F(HttpStoreTest, BadOptionsAndUrlsAreInvalidArgumentNamingThem) {
  auto bad = HttpStore::Create({.max_attempts = 0});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("max_attempts = 0"));
  auto store = HttpStore::Create({});
  ASSERT_TRUE(store.ok());
  EXPECT_EQ((*store)->Size("ftp://host/x").status().code(),
            absl::StatusCode::kInvalidArgument);
  std::vector<std::byte> out(1);
  const RangeRead read = {Url("a.bin"), -1, absl::MakeSpan(out)};
  EXPECT_EQ((*store)->Read({&read, 1}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(OpenObjectStore("gs://bucket/x").status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace pinwheel
