#include "pinning/base/cuda_queues.h"

#include <cstdlib>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pinwheel {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

TEST(CudaQueuesReportTest, UnsetSaysEightAndTheFix) {
  EXPECT_THAT(CudaQueuesReport(nullptr),
              AllOf(HasSubstr("CUDA_DEVICE_MAX_CONNECTIONS unset"),
                    HasSubstr("CUDA's 8"),
                    HasSubstr("CUDA_DEVICE_MAX_CONNECTIONS=32 before")));
}

TEST(CudaQueuesReportTest, FewerThan32SaysTheCost) {
  EXPECT_THAT(CudaQueuesReport("1"),
              AllOf(HasSubstr("=1: 1 hardware queue,"), HasSubstr("wait"),
                    HasSubstr("32 measured best")));
  EXPECT_THAT(CudaQueuesReport("8"), HasSubstr("8 hardware queues"));
}

TEST(CudaQueuesReportTest, ThirtyTwoIsJustTheValue) {
  EXPECT_EQ(CudaQueuesReport("32"), "CUDA_DEVICE_MAX_CONNECTIONS=32");
}

TEST(CudaQueuesReportTest, NotANumberIsNamed) {
  EXPECT_THAT(CudaQueuesReport("many"),
              AllOf(HasSubstr("'many' is not a number"), HasSubstr("set")));
  EXPECT_THAT(CudaQueuesReport("0"), HasSubstr("'0' is not a number"));
  EXPECT_THAT(CudaQueuesReport(""), HasSubstr("'' is not a number"));
}

TEST(PreferCudaQueuesTest, SetsWhenUnsetAndKeepsTheUsersValue) {
  const char* before = std::getenv("CUDA_DEVICE_MAX_CONNECTIONS");
  const std::string saved = before != nullptr ? before : "";
  const bool was_set = before != nullptr;

  unsetenv("CUDA_DEVICE_MAX_CONNECTIONS");
  EXPECT_TRUE(PreferCudaQueues());
  EXPECT_STREQ(std::getenv("CUDA_DEVICE_MAX_CONNECTIONS"), "32");
  setenv("CUDA_DEVICE_MAX_CONNECTIONS", "4", /*overwrite=*/1);
  EXPECT_FALSE(PreferCudaQueues());
  EXPECT_STREQ(std::getenv("CUDA_DEVICE_MAX_CONNECTIONS"), "4");

  if (was_set) {
    setenv("CUDA_DEVICE_MAX_CONNECTIONS", saved.c_str(), /*overwrite=*/1);
  } else {
    unsetenv("CUDA_DEVICE_MAX_CONNECTIONS");
  }
}

}  // namespace
}  // namespace pinwheel
