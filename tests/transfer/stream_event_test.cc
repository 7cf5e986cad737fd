// Tests of Stream, Event and Device on the host backend: a created stream
// runs its queue in order on its own thread, the borrowed stream is the
// calling thread, events are completion counters that track their latest
// record.
//
// Note [holding a host stream]
// The host backend has no way to hold a created stream at a chosen point:
// WaitFor() captures the event's latest record when it is called (as
// cudaStreamWaitEvent does), so waiting on an unrecorded event is a no-op,
// and every record is queued on a stream that itself makes progress. So the
// tests delay a stream with a large copy instead, and are written so that a
// correct library always passes whatever the scheduling, while a library
// that breaks the rule fails with near certainty: they read a copy's result
// only after the synchronisation under test, and check the tail of the
// destination (the last bytes memcpy writes).
#include <cstdint>
#include <cstring>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <memory>
#include <thread>
#include <vector>

#include "absl/status/status.h"

#include "transfer/device.h"
#include "transfer/event.h"
#include "transfer/stream.h"

namespace pinwheel {
namespace {

using ::testing::HasSubstr;

// Big enough that a copy of it takes far longer than a few calls.
constexpr size_t kBig = size_t{32} << 20;

std::vector<uint8_t> Pattern(size_t bytes, uint8_t seed) {
  std::vector<uint8_t> v(bytes);
  for (size_t i = 0; i < bytes; ++i)
    v[i] = static_cast<uint8_t>(i * 31 + seed + 1);
  return v;
}

// Returns whether the last `tail` bytes of `a` and `b` are equal.
bool TailEquals(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b,
                size_t tail = 4096) {
  return std::memcmp(a.data() + a.size() - tail, b.data() + b.size() - tail,
                     tail) == 0;
}

Stream MakeStream() {
  absl::StatusOr<Stream> stream = Stream::Create(Device::Host());
  EXPECT_TRUE(stream.ok()) << stream.status();
  return *std::move(stream);
}

std::shared_ptr<Event> MakeEvent() {
  absl::StatusOr<std::shared_ptr<Event>> event = Event::Create(Device::Host());
  EXPECT_TRUE(event.ok()) << event.status();
  return *event;
}

TEST(Stream, CreatedStreamRunsItsOpsInOrder) {
  constexpr size_t kBytes = 1 << 20;
  const std::vector<uint8_t> first = Pattern(kBytes, 1);
  const std::vector<uint8_t> second = Pattern(kBytes, 2);
  std::vector<uint8_t> a(kBytes, 0), b(kBytes, 0);
  Stream stream = MakeStream();
  std::shared_ptr<Event> done = MakeEvent();
  // a <- first; b <- a; a <- second: in order, b ends as first, a as second.
  ASSERT_TRUE(stream.CopyToDeviceAsync(a.data(), first.data(), kBytes).ok());
  ASSERT_TRUE(stream.CopyToHostAsync(b.data(), a.data(), kBytes).ok());
  ASSERT_TRUE(stream.CopyToDeviceAsync(a.data(), second.data(), kBytes).ok());
  ASSERT_TRUE(done->Record(stream).ok());
  ASSERT_TRUE(done->Wait().ok());
  EXPECT_TRUE(b == first) << "the second copy ran before the first";
  EXPECT_TRUE(a == second) << "the third copy ran before the second";
}

TEST(Stream, EventRecordedAfterACopyCompletesAfterIt) {
  const std::vector<uint8_t> src = Pattern(kBig, 3);
  std::vector<uint8_t> dst(kBig, 0);
  Stream stream = MakeStream();
  std::shared_ptr<Event> done = MakeEvent();
  ASSERT_TRUE(stream.CopyToDeviceAsync(dst.data(), src.data(), kBig).ok());
  ASSERT_TRUE(done->Record(stream).ok());
  ASSERT_TRUE(done->Wait().ok());
  absl::StatusOr<bool> query = done->Query();
  ASSERT_TRUE(query.ok());
  EXPECT_TRUE(*query);
  EXPECT_TRUE(dst == src);
}

TEST(Event, QueryIsFalseUntilTheQueuedWorkHasRun) {
  // Query() must never be true before the copy has landed (checked on every
  // attempt) and must be seen false while it is running (at least once in
  // a few attempts: a single one could be descheduled for the whole copy).
  const std::vector<uint8_t> src = Pattern(kBig, 4);
  Stream stream = MakeStream();
  std::shared_ptr<Event> done = MakeEvent();
  bool seen_pending = false;
  for (int attempt = 0; attempt < 20 && !seen_pending; ++attempt) {
    std::vector<uint8_t> dst(kBig, 0);
    ASSERT_TRUE(stream.CopyToDeviceAsync(dst.data(), src.data(), kBig).ok());
    ASSERT_TRUE(done->Record(stream).ok());
    while (true) {
      absl::StatusOr<bool> query = done->Query();
      ASSERT_TRUE(query.ok()) << query.status();
      if (*query) break;
      seen_pending = true;
    }
    ASSERT_TRUE(TailEquals(dst, src)) << "Query() was true before the copy ran";
    ASSERT_TRUE(done->Wait().ok());  // returns at once now
    ASSERT_TRUE(dst == src);
  }
  EXPECT_TRUE(seen_pending) << "Query() never reported queued work as pending";
}

TEST(Event, WaitReturnsOnlyAfterTheQueuedWorkHasRun) {
  const std::vector<uint8_t> src = Pattern(kBig, 5);
  std::vector<uint8_t> dst(kBig, 0);
  Stream stream = MakeStream();
  std::shared_ptr<Event> done = MakeEvent();
  ASSERT_TRUE(stream.CopyToDeviceAsync(dst.data(), src.data(), kBig).ok());
  ASSERT_TRUE(done->Record(stream).ok());
  ASSERT_TRUE(done->Wait().ok());
  EXPECT_TRUE(TailEquals(dst, src)) << "Wait() returned before the copy ran";
}

TEST(Event, NeverRecordedCountsAsComplete) {
  std::shared_ptr<Event> event = MakeEvent();
  absl::StatusOr<bool> query = event->Query();
  ASSERT_TRUE(query.ok());
  EXPECT_TRUE(*query);
  EXPECT_TRUE(event->Wait().ok());  // would hang otherwise
  // And a stream waiting on it is not held up.
  Stream stream = MakeStream();
  ASSERT_TRUE(stream.WaitFor(*event).ok());
  ASSERT_TRUE(stream.Synchronize().ok());
  EXPECT_EQ(event->device(), Device::Host());
  EXPECT_EQ(event->native_handle(), nullptr);
}

TEST(Stream, WaitForMakesLaterWorkWaitForTheEventsStream) {
  // `producer` fills big_dst; `consumer` copies big_dst's tail after waiting
  // on the producer's event: it must read the filled data, never zeros.
  const std::vector<uint8_t> src = Pattern(kBig, 6);
  std::vector<uint8_t> big_dst(kBig, 0);
  std::vector<uint8_t> tail(4096, 0);
  Stream producer = MakeStream();
  Stream consumer = MakeStream();
  std::shared_ptr<Event> produced = MakeEvent();
  std::shared_ptr<Event> consumed = MakeEvent();
  ASSERT_TRUE(
      producer.CopyToDeviceAsync(big_dst.data(), src.data(), kBig).ok());
  ASSERT_TRUE(produced->Record(producer).ok());
  ASSERT_TRUE(consumer.WaitFor(*produced).ok());
  ASSERT_TRUE(consumer
                  .CopyToHostAsync(tail.data(),
                                   big_dst.data() + kBig - tail.size(),
                                   tail.size())
                  .ok());
  ASSERT_TRUE(consumed->Record(consumer).ok());
  ASSERT_TRUE(consumed->Wait().ok());
  EXPECT_EQ(
      std::memcmp(tail.data(), src.data() + kBig - tail.size(), tail.size()), 0)
      << "the consumer stream ran before the event it waited for";
  // The producer's event is complete too: consumed came after it.
  absl::StatusOr<bool> query = produced->Query();
  ASSERT_TRUE(query.ok());
  EXPECT_TRUE(*query);
}

TEST(Stream,
     WaitForOnTheBorrowedStreamBlocksTheCallingThreadUntilTheEventFires) {
  const std::vector<uint8_t> src = Pattern(kBig, 7);
  std::vector<uint8_t> dst(kBig, 0);
  Stream stream = MakeStream();
  std::shared_ptr<Event> done = MakeEvent();
  ASSERT_TRUE(stream.CopyToDeviceAsync(dst.data(), src.data(), kBig).ok());
  ASSERT_TRUE(done->Record(stream).ok());

  Stream calling_thread = Stream::Borrow(Device::Host());
  ASSERT_TRUE(calling_thread.WaitFor(*done).ok());
  absl::StatusOr<bool> query = done->Query();
  ASSERT_TRUE(query.ok());
  EXPECT_TRUE(*query) << "WaitFor on the calling thread returned early";
  EXPECT_TRUE(TailEquals(dst, src));
}

TEST(Stream, BorrowedStreamRunsEverythingAtOnce) {
  constexpr size_t kBytes = 1 << 16;
  const std::vector<uint8_t> src = Pattern(kBytes, 8);
  std::vector<uint8_t> dst(kBytes, 0), back(kBytes, 0);
  Stream calling_thread = Stream::Borrow(Device::Host());
  EXPECT_EQ(calling_thread.native_handle(), nullptr);
  EXPECT_EQ(calling_thread.device(), Device::Host());
  ASSERT_TRUE(
      calling_thread.CopyToDeviceAsync(dst.data(), src.data(), kBytes).ok());
  EXPECT_TRUE(dst == src);  // no event needed: it ran on this thread
  ASSERT_TRUE(
      calling_thread.CopyToHostAsync(back.data(), dst.data(), kBytes).ok());
  EXPECT_TRUE(back == src);
  std::shared_ptr<Event> event = MakeEvent();
  ASSERT_TRUE(event->Record(calling_thread).ok());
  absl::StatusOr<bool> query = event->Query();
  ASSERT_TRUE(query.ok());
  EXPECT_TRUE(*query);
  EXPECT_TRUE(calling_thread.Synchronize().ok());
}

TEST(Event, ReRecordingTracksTheLatestRecord) {
  const std::vector<uint8_t> src = Pattern(kBig, 9);
  std::vector<uint8_t> small_dst(64, 0), dst(kBig, 0);
  Stream first = MakeStream();
  Stream second = MakeStream();
  std::shared_ptr<Event> event = MakeEvent();
  ASSERT_TRUE(first.CopyToDeviceAsync(small_dst.data(), src.data(), 64).ok());
  ASSERT_TRUE(event->Record(first).ok());
  ASSERT_TRUE(event->Wait().ok());
  EXPECT_EQ(std::memcmp(small_dst.data(), src.data(), 64), 0);

  // Recorded again after a big copy on another stream: Wait() now waits for
  // that, not for the first record (long complete).
  ASSERT_TRUE(second.CopyToDeviceAsync(dst.data(), src.data(), kBig).ok());
  ASSERT_TRUE(event->Record(second).ok());
  ASSERT_TRUE(event->Wait().ok());
  EXPECT_TRUE(TailEquals(dst, src)) << "Wait() tracked an older record";

  // Query() likewise.
  std::vector<uint8_t> dst2(kBig, 0);
  ASSERT_TRUE(first.CopyToDeviceAsync(dst2.data(), src.data(), kBig).ok());
  ASSERT_TRUE(event->Record(first).ok());
  while (true) {
    absl::StatusOr<bool> query = event->Query();
    ASSERT_TRUE(query.ok());
    if (*query) break;
  }
  EXPECT_TRUE(TailEquals(dst2, src)) << "Query() tracked an older record";
}

TEST(Event, DestroyingAnEventWithAPendingRecordIsSafe) {
  const std::vector<uint8_t> src = Pattern(kBig, 10);
  std::vector<uint8_t> dst(kBig, 0);
  Stream stream = MakeStream();
  {
    std::shared_ptr<Event> doomed = MakeEvent();
    ASSERT_TRUE(stream.CopyToDeviceAsync(dst.data(), src.data(), kBig).ok());
    ASSERT_TRUE(doomed->Record(stream).ok());
    ASSERT_TRUE(stream.WaitFor(*doomed).ok());
  }  // destroyed while its record (and a wait on it) is queued
  std::shared_ptr<Event> after = MakeEvent();
  ASSERT_TRUE(after->Record(stream).ok());
  ASSERT_TRUE(after->Wait().ok());
  EXPECT_TRUE(dst == src);
  EXPECT_TRUE(stream.Synchronize().ok());
}

TEST(Stream, SynchronizeWaitsForQueuedWork) {
  const std::vector<uint8_t> src = Pattern(kBig, 11);
  std::vector<uint8_t> dst(kBig, 0);
  Stream stream = MakeStream();
  ASSERT_TRUE(stream.CopyToDeviceAsync(dst.data(), src.data(), kBig).ok());
  ASSERT_TRUE(stream.Synchronize().ok());
  EXPECT_TRUE(TailEquals(dst, src)) << "Synchronize() returned early";
  EXPECT_TRUE(dst == src);
}

TEST(Stream, DestroyingAStreamFinishesItsQueuedWork) {
  const std::vector<uint8_t> src = Pattern(kBig, 12);
  std::vector<uint8_t> dst(kBig, 0);
  {
    Stream stream = MakeStream();
    ASSERT_TRUE(stream.CopyToDeviceAsync(dst.data(), src.data(), kBig).ok());
  }
  EXPECT_TRUE(dst == src) << "queued work dropped or still running";
}

TEST(Stream, MovedStreamKeepsItsQueue) {
  const std::vector<uint8_t> src = Pattern(1 << 16, 13);
  std::vector<uint8_t> dst(src.size(), 0);
  Stream original = MakeStream();
  Stream moved(std::move(original));
  Stream assigned = MakeStream();
  assigned = std::move(moved);
  ASSERT_TRUE(
      assigned.CopyToDeviceAsync(dst.data(), src.data(), src.size()).ok());
  ASSERT_TRUE(assigned.Synchronize().ok());
  EXPECT_TRUE(dst == src);
  EXPECT_EQ(assigned.device(), Device::Host());
}

TEST(Stream, ManyThreadsIssueOnOneStream) {
  // Thread-safe for issuing work: every copy lands, whatever the interleave.
  constexpr int kThreads = 4;
  constexpr int kCopies = 50;
  constexpr size_t kBytes = 256;
  Stream stream = MakeStream();
  std::vector<std::vector<uint8_t>> src, dst;
  for (int i = 0; i < kThreads * kCopies; ++i) {
    src.push_back(Pattern(kBytes, static_cast<uint8_t>(i)));
    dst.emplace_back(kBytes, 0);
  }
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int c = 0; c < kCopies; ++c) {
        const int i = t * kCopies + c;
        EXPECT_TRUE(
            stream.CopyToDeviceAsync(dst[i].data(), src[i].data(), kBytes)
                .ok());
      }
    });
  }
  for (std::thread& t : threads) t.join();
  std::shared_ptr<Event> done = MakeEvent();
  ASSERT_TRUE(done->Record(stream).ok());
  ASSERT_TRUE(done->Wait().ok());
  for (size_t i = 0; i < src.size(); ++i) EXPECT_TRUE(dst[i] == src[i]) << i;
}

TEST(Device, ParsesHostSpellings) {
  for (const char* spec : {"cpu", "host"}) {
    absl::StatusOr<Device> device = Device::Parse(spec);
    ASSERT_TRUE(device.ok()) << spec << ": " << device.status();
    EXPECT_EQ(*device, Device::Host());
    EXPECT_FALSE(device->is_cuda());
    EXPECT_EQ(device->ToString(), "host");
  }
}

TEST(Device, ParsesAutoAsFirstGpuOrHost) {
  absl::StatusOr<Device> device = Device::Parse("auto");
  ASSERT_TRUE(device.ok()) << device.status();
  EXPECT_EQ(*device, Device::FirstGpuOrHost());
  if (Device::CudaDeviceCount() == 0) {
    EXPECT_EQ(*device, Device::Host());
  } else {
    EXPECT_EQ(device->ToString(), "cuda:0");
  }
}

TEST(Device, ParsesCudaAccordingToTheMachine) {
  const int gpus = Device::CudaDeviceCount();
  if (!Device::CudaBackendBuilt()) {
    EXPECT_EQ(gpus, 0);
  }
  absl::StatusOr<Device> cuda = Device::Parse("cuda");
  absl::StatusOr<Device> cuda1 = Device::Parse("cuda:1");
  if (gpus == 0) {
    EXPECT_EQ(cuda.status().code(), absl::StatusCode::kFailedPrecondition)
        << cuda.status();
    EXPECT_EQ(cuda1.status().code(), absl::StatusCode::kFailedPrecondition)
        << cuda1.status();
    EXPECT_EQ(Device::Cuda(0).status().code(),
              absl::StatusCode::kFailedPrecondition);
    return;
  }
  ASSERT_TRUE(cuda.ok()) << cuda.status();
  EXPECT_EQ(cuda->ToString(), "cuda:0");
  EXPECT_TRUE(cuda->is_cuda());
  if (gpus >= 2) {
    ASSERT_TRUE(cuda1.ok()) << cuda1.status();
    EXPECT_EQ(cuda1->ordinal(), 1);
    EXPECT_EQ(cuda1->ToString(), "cuda:1");
  } else {
    EXPECT_EQ(cuda1.status().code(), absl::StatusCode::kOutOfRange)
        << cuda1.status();
  }
}

TEST(Device, RejectsUnknownSpellings) {
  for (const char* spec :
       {"gpu", "", "cuda:", "cuda:x", "cuda:-1", "CPU", "cuda0"}) {
    absl::StatusOr<Device> device = Device::Parse(spec);
    EXPECT_EQ(device.status().code(), absl::StatusCode::kInvalidArgument)
        << spec;
    EXPECT_THAT(std::string(device.status().message()), HasSubstr("cuda:N"))
        << spec;
  }
}

TEST(Device, DescribesTheHost) {
  EXPECT_EQ(Device().ToString(), "host");
  EXPECT_EQ(Device(), Device::Host());
  EXPECT_THAT(Device::Host().Describe(), HasSubstr("host ("));
  EXPECT_THAT(Device::Host().Describe(), HasSubstr("cores"));
}

}  // namespace
}  // namespace pinwheel
