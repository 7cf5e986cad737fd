// Uses one thing from each of pinwheel's libraries through the installed
// headers, and prints "pinwheel consumer: OK" when they agree with the build.
#include <cstdio>
#include <vector>

#include "loader/sampler.h"
#include "transfer/device.h"
#include "transfer/sample_layout.h"

int main() {
  auto layout = pinwheel::SampleLayout::Create({
      {.name = "image", .dtype = pinwheel::DType::kUInt8, .shape = {3, 8, 8}},
      {.name = "label", .dtype = pinwheel::DType::kInt64, .shape = {}},
  });
  if (!layout.ok()) {
    std::fprintf(stderr, "SampleLayout::Create: %s\n",
                 layout.status().ToString().c_str());
    return 1;
  }
  const pinwheel::Device host = pinwheel::Device::Host();
  const std::vector<int64_t> order = pinwheel::Permutation(4, 1, 0);
  const bool cuda_built = pinwheel::Device::CudaBackendBuilt();
  std::printf("layout: %s (%zu bytes a sample)\n", layout->ToString().c_str(),
              layout->sample_bytes());
  std::printf("device: %s; cuda backend built: %s; %zu indices\n",
              host.ToString().c_str(), cuda_built ? "yes" : "no",
              order.size());
#ifdef PINWHEEL_CONSUMER_EXPECT_CUDA
  if (cuda_built != (PINWHEEL_CONSUMER_EXPECT_CUDA != 0)) {
    std::fprintf(stderr, "the package's CUDA backend does not match the build\n");
    return 1;
  }
#endif
  if (layout->sample_bytes() != 3 * 8 * 8 + 8 || host.is_cuda() ||
      order.size() != 4) {
    std::fprintf(stderr, "unexpected values from the package\n");
    return 1;
  }
  std::printf("pinwheel consumer: OK\n");
  return 0;
}
