// ThreadSink (loader/pipeline/thread_sink.h): the count of parked threads
// follows Want(), a parked thread comes back by itself after kParkAtMost,
// and a stop wakes every one (Note [parked threads take no work]).
#include "loader/pipeline/thread_sink.h"

#include <atomic>
#include <gtest/gtest.h>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"

#include "loader/pipeline/stop_flag.h"

namespace pinwheel::internal {
namespace {

// Waits up to 10 s for `sink` to hold `parked` threads parked.
bool AwaitParked(const ThreadSink& sink, int parked) {
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (sink.parked() != parked && absl::Now() < deadline) {
    absl::SleepFor(absl::Microseconds(200));
  }
  return sink.parked() == parked;
}

TEST(ThreadSink, ALowerTargetWakesTheThreadsBeyondIt) {
  StopFlag stop;
  ThreadSink sink(stop);
  ASSERT_EQ(sink.Want(2), 2);
  std::atomic<int> returned{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t) {
    threads.emplace_back([&] {
      sink.Park();
      returned.fetch_add(1);
    });
  }
  ASSERT_TRUE(AwaitParked(sink, 2) || returned.load() > 0)
      << "a thread parked 10 ms came back before the other parked";
  const int back_before = returned.load();
  EXPECT_EQ(sink.Want(1), 0);
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (returned.load() < back_before + 1 && absl::Now() < deadline) {
    absl::SleepFor(absl::Microseconds(100));
  }
  EXPECT_GE(returned.load(), back_before + 1);
  for (std::thread& t : threads) t.join();  // the other within kParkAtMost
  EXPECT_EQ(sink.started(), 0);
}

TEST(ThreadSink, AParkedThreadComesBackAfterAWhile) {
  EXPECT_EQ(ThreadSink::kParkAtMost, absl::Milliseconds(10));
  StopFlag stop;
  ThreadSink sink(stop);
  ASSERT_EQ(sink.Want(1), 1);
  const absl::Time start = absl::Now();
  sink.Park();  // on this thread: nothing else wakes it
  EXPECT_GE(absl::Now() - start, ThreadSink::kParkAtMost);
  EXPECT_EQ(sink.started(), 0);
  EXPECT_EQ(sink.Want(1), 1);  // parked again by the next Want()
}

TEST(ThreadSink, AStopWakesEveryThreadAndParksNoMore) {
  StopFlag stop;
  ThreadSink sink(stop);
  ASSERT_EQ(sink.Want(1), 1);
  stop.Set(true);
  sink.Wake();
  const absl::Time start = absl::Now();
  sink.Park();
  EXPECT_LT(absl::Now() - start, ThreadSink::kParkAtMost);
  EXPECT_EQ(sink.Want(4), 0);
}

}  // namespace
}  // namespace pinwheel::internal
