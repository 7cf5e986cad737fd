// loader_batch_bench: batches/s of a whole Loader on the host backend (the
// workers' reads, the slot hand-off, the copy, Next()), over an in-memory
// dataset of W2's shape (32 samples of 2 x i64[elements]; --elements=1024
// is W2's 16 KiB sample, --elements=1 makes the copy almost free so that
// the per-batch overheads dominate). Uses only the public API, so the same
// source measures two builds against each other (e.g. with and without the
// per-stage latencies of loader/telemetry/: issue 33).
//
// Usage: loader_batch_bench [--batches=N] [--elements=E] [--workers=W]
//                           [--repeat=R]
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"

#include "loader/in_memory_dataset.h"
#include "loader/loader.h"
#include "loader/loader_builder.h"
#include "transfer/device.h"

namespace pinwheel {
namespace {

int64_t Flag(int argc, char** argv, const char* name, int64_t fallback) {
  const std::string prefix = std::string("--") + name + "=";
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], prefix.c_str(), prefix.size()) == 0) {
      return std::atoll(argv[i] + prefix.size());
    }
  }
  return fallback;
}

int Fail(const absl::Status& status) {
  std::fprintf(stderr, "loader_batch_bench: %s\n", status.ToString().c_str());
  return 1;
}

int Run(int argc, char** argv) {
  const int64_t batches = Flag(argc, argv, "batches", 20000);
  const int64_t elements = Flag(argc, argv, "elements", 1024);
  const int workers = static_cast<int>(Flag(argc, argv, "workers", 1));
  const int repeat = static_cast<int>(Flag(argc, argv, "repeat", 1));
  constexpr int64_t kSamples = 4096;
  absl::StatusOr<SampleLayout> sample = SampleLayout::Create({
      {.name = "input", .dtype = DType::kInt64, .shape = {elements}},
      {.name = "target", .dtype = DType::kInt64, .shape = {elements}},
  });
  if (!sample.ok()) return Fail(sample.status());
  const size_t field_bytes = static_cast<size_t>(kSamples * elements * 8);
  std::vector<std::vector<std::byte>> fields(
      2, std::vector<std::byte>(field_bytes, std::byte{7}));
  absl::StatusOr<std::shared_ptr<InMemoryDataset>> dataset =
      InMemoryDataset::CreateOwning(*sample, kSamples, std::move(fields));
  if (!dataset.ok()) return Fail(dataset.status());
  for (int r = 0; r < repeat; ++r) {
    absl::StatusOr<Loader> loader = LoaderBuilder(*dataset)
                                        .batch_size(32)
                                        .num_workers(workers)
                                        .prefetch(8)
                                        .device_buffers(2)
                                        .warn_cpu_oversubscription(false)
                                        .device(Device::Host())
                                        .Build();
    if (!loader.ok()) return Fail(loader.status());
    const absl::Time start = absl::Now();
    int64_t got = 0;
    while (got < batches) {
      absl::StatusOr<std::optional<DeviceBatch>> batch = loader->Next();
      if (!batch.ok()) return Fail(batch.status());
      if (!batch->has_value()) continue;  // the next epoch
      ++got;
    }
    const double secs = absl::ToDoubleSeconds(absl::Now() - start);
    std::printf("elements=%lld workers=%d batches=%lld: %.0f batches/s\n",
                static_cast<long long>(elements), workers,
                static_cast<long long>(batches),
                static_cast<double>(batches) / secs);
  }
  return 0;
}

}  // namespace
}  // namespace pinwheel

int main(int argc, char** argv) { return pinwheel::Run(argc, argv); }
