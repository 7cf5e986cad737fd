// AutoTunePolicy window by window (Note [how auto-tuning decides]): each
// case feeds the measures a loader would give and checks the change asked
// for. Timing-free, unlike auto_tune_test, which runs whole loaders.
#include "loader/pipeline/auto_tune_policy.h"

#include <gtest/gtest.h>
#include <optional>
#include <string>

#include "absl/time/time.h"

namespace pinwheel::internal {
namespace {

// 31 workers and 64 slots at most, both tuned.
AutoTunePlan Plan() {
  return AutoTunePlan{.workers = true,
                      .prefetch = true,
                      .max_workers = 31,
                      .max_prefetch = 64,
                      .log = false};
}

// A window in which the consumer waited `wait_share` of its time, with a
// 10 us step, `busy` threads reading and the ring full `slot_wait` of it.
AutoTuneMeasure Window(double wait_share, double busy, double slot_wait) {
  const absl::Duration step = absl::Microseconds(10);
  return AutoTuneMeasure{.wait_share = wait_share,
                         .wait = step * (wait_share / (1 - wait_share)),
                         .step = step,
                         .busy = busy,
                         .slot_wait = slot_wait};
}

// The tuner's knobs, changed as the policy asks.
struct Knobs {
  int workers = 1;
  int prefetch = 2;
  // Feeds one window; returns why it changed something, or "".
  std::string Feed(AutoTunePolicy& policy, const AutoTuneMeasure& m) {
    std::optional<AutoTuneChange> change = policy.Decide(m, workers, prefetch);
    if (!change) return "";
    workers = change->workers;
    prefetch = change->prefetch;
    return change->why;
  }
};

TEST(AutoTunePolicy, AFailedGrowIsUndoneAndCapsThatKnob) {
  AutoTunePolicy policy(Plan(), {}, true, true);
  Knobs k;
  // One worker, 0.7 busy, the ring full: more slots first.
  EXPECT_EQ(k.Feed(policy, Window(0.96, 0.7, 0.9)),
            "the ring was full while threads were idle");
  EXPECT_EQ(k.prefetch, 4);
  // The wait did not shorten: undone, and 2 slots become the ceiling.
  EXPECT_EQ(k.Feed(policy, Window(0.96, 0.7, 0.9)),
            "undone: the consumer's wait did not shorten by 10 %");
  EXPECT_EQ(k.prefetch, 2);
  // Still waiting with the worker busy and the ring full: the ceiling holds
  // the depth, so the workers grow instead.
  EXPECT_EQ(k.Feed(policy, Window(0.96, 0.9, 0.9)), "the consumer waited");
  EXPECT_EQ(k.prefetch, 2);
  EXPECT_GT(k.workers, 1);
}

// Issue 33, W2 on 2 x H200: a prefetch grow tried with one worker did not
// pay and capped the depth at 2; after the workers grew to 31, 2 slots let
// only 2 of them read, and the old ceiling kept the depth there (0.75 of
// the best manual rate). A grow of the workers forgets it.
TEST(AutoTunePolicy, AGrowOfTheWorkersForgetsThePrefetchCeiling) {
  AutoTunePolicy policy(Plan(), {}, true, true);
  Knobs k;
  k.Feed(policy, Window(0.96, 0.74, 0.88));  // prefetch 2 -> 4
  k.Feed(policy, Window(0.96, 0.74, 0.87));  // undone: ceiling 2
  ASSERT_EQ(k.prefetch, 2);
  EXPECT_EQ(k.Feed(policy, Window(0.96, 0.78, 0.87)), "the consumer waited");
  ASSERT_EQ(k.workers, 31);  // the need at a 96 % wait is past the most
  // The grow paid (the wait shortened), but 31 workers share 2 slots: the
  // ring is full while most threads are idle, so the depth grows.
  EXPECT_EQ(k.Feed(policy, Window(0.60, 1.9, 0.95)),
            "the ring was full while threads were idle");
  EXPECT_EQ(k.prefetch, 4);
  // And goes on growing while that holds and each grow pays.
  EXPECT_EQ(k.Feed(policy, Window(0.40, 3.8, 0.9)),
            "the ring was full while threads were idle");
  EXPECT_EQ(k.prefetch, 8);
}

// Issue 33, W1 on 2 x H200: the first grow went straight to the CPU
// budget's 31 workers, and a consumer that always waits never let it
// shrink, though 14 workers were faster (memory-bound copies contend).
// Probes walk down while the wait a batch holds, and stop at the knee.
TEST(AutoTunePolicy, ProbesFewerWorkersWhileTheyKeepTheRate) {
  AutoTunePolicy policy(Plan(), {}, true, true);
  Knobs k{.workers = 31, .prefetch = 4};
  // The wait a batch that n workers give: flat down to 14, longer below.
  auto at = [](int n) { return Window(n >= 14 ? 0.9 : 0.93, n * 0.9, 0.0); };
  EXPECT_EQ(k.Feed(policy, at(k.workers)),
            "the consumer waited at the most workers: trying fewer");
  EXPECT_EQ(k.workers, 23);
  k.Feed(policy, at(k.workers));  // kept; 23 -> 17
  EXPECT_EQ(k.workers, 17);
  k.Feed(policy, at(k.workers));  // kept; 17 -> 12
  EXPECT_EQ(k.workers, 12);
  EXPECT_EQ(k.Feed(policy, at(k.workers)),
            "undone: fewer workers made the consumer wait longer");
  EXPECT_EQ(k.workers, 17);
  // Settled: the floor (17) stops the probes, the ceiling (17) the grows.
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(k.Feed(policy, at(k.workers)), "") << "window " << i;
  }
  EXPECT_EQ(k.workers, 17);
  EXPECT_EQ(k.prefetch, 4);
}

TEST(AutoTunePolicy, ShrinksOnlyAfterWindowsWithoutWaitAndKeepsAFloor) {
  AutoTunePolicy policy(Plan(), {}, true, true);
  Knobs k{.workers = 8, .prefetch = 8};
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(k.Feed(policy, Window(0.0, 2.0, 0.0)), "") << "window " << i;
  }
  EXPECT_EQ(k.Feed(policy, Window(0.0, 2.0, 0.0)),
            "no wait; fewer threads keep up");
  EXPECT_EQ(k.workers, 3);  // 2 busy x the 1.25 margin, rounded up
  // The shrink made the consumer wait: back to 8, which becomes the floor.
  EXPECT_EQ(k.Feed(policy, Window(0.3, 3.0, 0.0)), "the consumer waited");
  EXPECT_EQ(k.workers, 8);
  for (int i = 0; i < 4; ++i) k.Feed(policy, Window(0.0, 2.0, 0.0));
  EXPECT_EQ(k.workers, 8) << "the floor holds";
  EXPECT_LT(k.prefetch, 8) << "the depth shrinks instead";
}

TEST(AutoTunePolicy, AFixedKnobNeverChanges) {
  AutoTunePolicy policy(Plan(), {}, /*workers_auto=*/false,
                        /*prefetch_auto=*/true);
  Knobs k{.workers = 4, .prefetch = 2};
  for (int i = 0; i < 6; ++i) k.Feed(policy, Window(0.9, 4.0, 0.0));
  EXPECT_EQ(k.workers, 4);
  for (int i = 0; i < 8; ++i) k.Feed(policy, Window(0.0, 1.0, 0.0));
  EXPECT_EQ(k.workers, 4);
}

}  // namespace
}  // namespace pinwheel::internal
