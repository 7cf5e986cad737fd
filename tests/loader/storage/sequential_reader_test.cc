#include "loader/storage/sequential_reader.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include "tests/loader/storage/cache/fake_object_store.h"

namespace pinwheel {
namespace {

using ::pinwheel::testing::ExpectedByte;
using ::pinwheel::testing::FakeObjectStore;
using ::testing::HasSubstr;

constexpr int64_t kChunk = 4096;
const std::string kUrl = "mem://bucket/shard-0.tar";

std::shared_ptr<FakeObjectStore> Object(int64_t size) {
  auto store = std::make_shared<FakeObjectStore>();
  store->Put(kUrl, size);
  return store;
}

// Reads [offset, offset + length) and checks the bytes.
void ExpectRead(SequentialReader& reader, int64_t offset, int64_t length) {
  std::vector<std::byte> out(static_cast<size_t>(length));
  ASSERT_TRUE(reader.Read(offset, absl::MakeSpan(out)).ok())
      << "[" << offset << ", " << offset + length << ")";
  for (int64_t i = 0; i < length; ++i) {
    ASSERT_EQ(out[static_cast<size_t>(i)], ExpectedByte(kUrl, offset + i))
        << "byte " << offset + i;
  }
}

TEST(SequentialReader, ReadsFrontToBackInChunksFetchingEachByteOnce) {
  const int64_t size = 10 * kChunk + 100;
  auto store = Object(size);
  {
    SequentialReader reader(store, kUrl, size,
                            {.chunk_bytes = kChunk, .read_ahead_chunks = 2});
    for (int64_t at = 0; at < size; at += 700) {
      ExpectRead(reader, at, std::min<int64_t>(700, size - at));
    }
  }
  EXPECT_EQ(store->bytes(), size);
  EXPECT_EQ(store->requests(), 11);
}

TEST(SequentialReader,
     ALookBackIntoTheChunkBeforeIsServedWithoutFetchingAgain) {
  // A tar stream reads the next sample's header (in chunk 1) before the
  // image's bytes that started in chunk 0: Note [looking back].
  const int64_t size = 6 * kChunk;
  auto store = Object(size);
  {
    SequentialReader reader(store, kUrl, size,
                            {.chunk_bytes = kChunk, .read_ahead_chunks = 1});
    ExpectRead(reader, 0, 512);
    ExpectRead(reader, kChunk + 512, 512);      // the next header
    ExpectRead(reader, kChunk - 900, 1400);     // back: the image's bytes
    ExpectRead(reader, 2 * kChunk + 10, 512);   // on, into chunk 2
    ExpectRead(reader, 2 * kChunk - 100, 200);  // back across into chunk 1
    for (int64_t at = 2 * kChunk + 100; at < size; at += 1000) {
      ExpectRead(reader, at, std::min<int64_t>(1000, size - at));
    }
  }
  EXPECT_EQ(store->bytes(), size) << "a chunk was fetched twice";
  for (const FakeObjectStore::Range& range : store->ranges()) {
    EXPECT_EQ(range.offset % kChunk, 0) << "a read restarted unaligned";
  }
}

TEST(SequentialReader, PrefetchStartsTheFirstChunksThatReadsThenFind) {
  const int64_t size = 3 * kChunk;
  auto store = Object(size);
  {
    SequentialReader reader(store, kUrl, size,
                            {.chunk_bytes = kChunk, .read_ahead_chunks = 1});
    EXPECT_FALSE(reader.IssuedToEnd());
    reader.Prefetch(0);  // chunks 0 and 1
    EXPECT_FALSE(reader.IssuedToEnd());
    reader.Prefetch(0);  // held already: nothing more
    ExpectRead(reader, 0, 100);
    ExpectRead(reader, kChunk + 10, 100);  // chunk 2 read ahead from here
    EXPECT_TRUE(reader.IssuedToEnd());
    ExpectRead(reader, 2 * kChunk, kChunk);
  }
  EXPECT_EQ(store->bytes(), size) << "a chunk was fetched twice";
  EXPECT_EQ(store->requests(), 3);
}

TEST(SequentialReader, APrefetchNeverReadIsWaitedForAndFetchedOnce) {
  const int64_t size = 5 * kChunk;
  auto store = Object(size);
  {
    SequentialReader reader(store, kUrl, size,
                            {.chunk_bytes = kChunk, .read_ahead_chunks = 2});
    reader.Prefetch(0);
  }  // the destructor waits for the chunks in flight
  EXPECT_EQ(store->requests(), 3);
  EXPECT_EQ(store->bytes(), 3 * kChunk);
  SequentialReader empty(store, kUrl, 0, {});
  EXPECT_TRUE(empty.IssuedToEnd());
  empty.Prefetch(0);  // nothing to read
}

TEST(SequentialReader, AJumpPastTheChunksHeldStartsAgainAtItsOffset) {
  const int64_t size = 20 * kChunk;
  auto store = Object(size);
  SequentialReader reader(store, kUrl, size,
                          {.chunk_bytes = kChunk, .read_ahead_chunks = 1});
  ExpectRead(reader, 0, 100);
  ExpectRead(reader, 10 * kChunk + 7, 100);  // a skip ahead
  ExpectRead(reader, 3, 100);                // a jump back past the kept one
  const std::vector<FakeObjectStore::Range> ranges = store->ranges();
  ASSERT_GE(ranges.size(), 3u);
  bool restarted_ahead = false, restarted_back = false;
  for (const FakeObjectStore::Range& range : ranges) {
    restarted_ahead |= range.offset == 10 * kChunk + 7;
    restarted_back |= range.offset == 3;
  }
  EXPECT_TRUE(restarted_ahead && restarted_back);
}

TEST(SequentialReader, ReadsPastTheEndAreOutOfRangeNamingTheUrl) {
  auto store = Object(1000);
  SequentialReader reader(store, kUrl, 1000, {.chunk_bytes = kChunk});
  std::vector<std::byte> out(100);
  const absl::Status status = reader.Read(950, absl::MakeSpan(out));
  EXPECT_EQ(status.code(), absl::StatusCode::kOutOfRange);
  EXPECT_THAT(status.message(), HasSubstr(kUrl));
  EXPECT_THAT(status.message(), HasSubstr("[950, 1050)"));
}

TEST(SequentialReader, AFailedChunkIsReturnedAndTheNextReadTriesAgain) {
  const int64_t size = 4 * kChunk;
  auto store = Object(size);
  SequentialReader reader(store, kUrl, size, {.chunk_bytes = kChunk});
  store->Fail(kUrl, absl::UnavailableError("503 SlowDown after 5 attempts"));
  std::vector<std::byte> out(100);
  const absl::Status failed = reader.Read(0, absl::MakeSpan(out));
  EXPECT_EQ(failed.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(failed.message(), HasSubstr("503 SlowDown"));
  store->Fail(kUrl, absl::OkStatus());
  ExpectRead(reader, 0, 100);
  ExpectRead(reader, kChunk, 2 * kChunk);
}

}  // namespace
}  // namespace pinwheel
