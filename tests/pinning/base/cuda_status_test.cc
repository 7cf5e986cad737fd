// CudaStatus (pinning/base/cuda_status.h): a kernel without an image for the
// GPU becomes a Status that says what to rebuild with (issue 31 item 4).
#include "pinning/base/cuda_status.h"

#include <cuda_runtime_api.h>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include "tests/support/skip_without_gpu.h"

namespace pinwheel {
namespace {

using ::testing::HasSubstr;

TEST(CudaStatus, NoKernelImageNamesTheArchitecturesBuiltAndTheOption) {
  const absl::Status status =
      CudaStatus(cudaErrorNoKernelImageForDevice, "Gather<<<...>>>");
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(status.message(), HasSubstr("Gather<<<...>>>"));
  EXPECT_THAT(status.message(), HasSubstr("cudaErrorNoKernelImageForDevice"));
  EXPECT_THAT(
      status.message(),
      HasSubstr(absl::StrCat("built for ", PINWHEEL_CUDA_ARCHITECTURES_BUILT)));
  EXPECT_THAT(status.message(), HasSubstr("-DCMAKE_CUDA_ARCHITECTURES="));
  EXPECT_THAT(status.message(), HasSubstr("CUDAARCHS="));
}

TEST(CudaStatus, InvalidDeviceFunctionSaysItIsLikelyAMissingImage) {
  const absl::Status status =
      CudaStatus(cudaErrorInvalidDeviceFunction, "launch");
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(status.message(), HasSubstr("likely"));
  EXPECT_THAT(status.message(), HasSubstr("-DCMAKE_CUDA_ARCHITECTURES="));
}

TEST(CudaStatus, OtherErrorsKeepTheirCodeAndPlainMessage) {
  const absl::Status status = CudaStatus(cudaErrorMemoryAllocation, "malloc");
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(status.message(),
              ::testing::Not(HasSubstr("CUDA_ARCHITECTURES")));
  EXPECT_TRUE(CudaStatus(cudaSuccess, "anything").ok());
}

TEST(CudaStatus, NoKernelImageNamesTheGpusComputeCapability_CUDA) {
  SKIP_WITHOUT_GPU();
  int device = 0, major = 0, minor = 0;
  ASSERT_EQ(cudaGetDevice(&device), cudaSuccess);
  ASSERT_EQ(
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device),
      cudaSuccess);
  ASSERT_EQ(
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device),
      cudaSuccess);
  const absl::Status status =
      CudaStatus(cudaErrorNoKernelImageForDevice, "launch");
  EXPECT_THAT(status.message(),
              HasSubstr(absl::StrCat("compute capability ", major, ".", minor,
                                     ", sm_", major, minor)));
  EXPECT_THAT(
      status.message(),
      HasSubstr(absl::StrCat("-DCMAKE_CUDA_ARCHITECTURES=", major, minor)));
}

}  // namespace
}  // namespace pinwheel
