// Uses one thing from each of pinwheel's libraries through the installed
// headers, and prints "pinwheel consumer: OK" when they agree with the build.
// It includes pinwheel the way the README says (the "pinwheel/" prefix, only
// <prefix>/include on the include path) next to a loader/loader.h of its own
// that comes first on its include path.
#include <cstdio>
#include <vector>

#include "loader/loader.h"  // the consumer's own, not pinwheel's
#include "pinwheel/loader/in_memory_dataset.h"
#include "pinwheel/pinwheel.h"
#include "pinwheel/transfer/device.h"
#include "pinwheel/transfer/sample_layout.h"

// The package puts <prefix>/include on the path, not <prefix>/include/pinwheel.
#if __has_include("transfer/device.h") || __has_include("pinning/fence.h")
#error \
    "the installed package exposes pinwheel's folders without the pinwheel/ prefix"
#endif

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
  auto dataset = pinwheel::InMemoryDataset::CreateOwning(
      *layout, 4,
      {std::vector<std::byte>(4 * 3 * 8 * 8), std::vector<std::byte>(4 * 8)});
  if (!dataset.ok()) {
    std::fprintf(stderr, "InMemoryDataset::CreateOwning: %s\n",
                 dataset.status().ToString().c_str());
    return 1;
  }
  const bool cuda_built = pinwheel::Device::CudaBackendBuilt();
  std::printf("layout: %s (%zu bytes a sample)\n", layout->ToString().c_str(),
              layout->sample_bytes());
  std::printf("device: %s; cuda backend built: %s; %lld samples; and %s\n",
              host.ToString().c_str(), cuda_built ? "yes" : "no",
              static_cast<long long>((*dataset)->size()), consumer::kOwnLoader);
#ifdef PINWHEEL_CONSUMER_EXPECT_CUDA
  if (cuda_built != (PINWHEEL_CONSUMER_EXPECT_CUDA != 0)) {
    std::fprintf(stderr,
                 "the package's CUDA backend does not match the build\n");
    return 1;
  }
#endif
  if (layout->sample_bytes() != 3 * 8 * 8 + 8 || host.is_cuda() ||
      (*dataset)->size() != 4) {
    std::fprintf(stderr, "unexpected values from the package\n");
    return 1;
  }
  std::printf("pinwheel consumer: OK\n");
  return 0;
}
