// The version macros (loader/version.h) and the compatibility promised in
// CHANGELOG.md for 0.2.x: what pinwheel.h dropped before 0.2.0 is still
// reachable through it, and the headers that moved still compile at their
// old paths. This file failing to compile is the test failing.
#include <cstdint>
#include <string>

#include "gtest/gtest.h"

#include "loader/pinwheel.h"  // "pinwheel/pinwheel.h" when installed
#include "pinning/memory_budget.h"
#include "pinning/status_macros.h"

namespace pinwheel {
namespace {

TEST(Version, TheNumberAndTheStringAgree) {
  EXPECT_EQ(std::string(PINWHEEL_VERSION_STRING),
            std::to_string(PINWHEEL_VERSION_MAJOR) + "." +
                std::to_string(PINWHEEL_VERSION_MINOR) + "." +
                std::to_string(PINWHEEL_VERSION_PATCH));
  EXPECT_EQ(PINWHEEL_VERSION, PINWHEEL_VERSION_MAJOR * 10000 +
                                  PINWHEEL_VERSION_MINOR * 100 +
                                  PINWHEEL_VERSION_PATCH);
  static_assert(PINWHEEL_VERSION >= PINWHEEL_VERSION_OF(0, 2, 0));
  static_assert(PINWHEEL_VERSION_OF(1, 3, 12) == 10312);
}

absl::StatusOr<int> Twice(int x) {
  if (x < 0) return absl::InvalidArgumentError("negative");
  return 2 * x;
}

absl::Status UsesTheMacrosThroughTheOldPath(int x, int* out) {
  PINWHEEL_ASSIGN_OR_RETURN(*out, Twice(x));
  PINWHEEL_RETURN_IF_ERROR(absl::OkStatus());
  return absl::OkStatus();
}

TEST(Version, WhatPinwheelHDroppedIsReachableUntil030) {
  // sampler.h
  const EpochShuffle shuffle(10, /*seed=*/1, /*epoch=*/0);
  EXPECT_LT(shuffle.At(3), 10);
  // crc32c.h: the CRC-32C check value of "123456789".
  EXPECT_EQ(Crc32c("123456789"), 0xE3069283u);
  // host_memory_limits.h (also through the old pinning/memory_budget.h)
  const MemoryLimits limits = ReadMemoryLimits();
  (void)limits;
  // numa_placement.h
  const NumaPlacement placement = DecideNumaPlacement(NumaTopology{});
  (void)placement;
  // status_macros.h at its old path
  int out = 0;
  EXPECT_TRUE(UsesTheMacrosThroughTheOldPath(4, &out).ok());
  EXPECT_EQ(out, 8);
  EXPECT_FALSE(UsesTheMacrosThroughTheOldPath(-1, &out).ok());
}

}  // namespace
}  // namespace pinwheel
