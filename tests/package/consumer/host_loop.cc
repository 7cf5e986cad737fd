// The host loop: one include, one range-for an epoch. On the host backend a
// batch's fields are host memory, readable once WaitOnHost() returned; a
// batch is released when the next one replaces it.
#include <cstdint>
#include <cstdio>
#include <vector>

#include "pinwheel/pinwheel.h"

using namespace pinwheel;

int Fail(const absl::Status& status) {
  std::fprintf(stderr, "host_loop: %s\n", status.ToString().c_str());
  return 1;
}

int main() {
  // 1000 samples held in memory: x = {i, i, i, i} (f32) and y = i (i64).
  std::vector<float> x(4 * 1000);
  std::vector<int64_t> y(1000);
  for (int64_t i = 0; i < 1000; ++i) {
    y[i] = i;
    for (int k = 0; k < 4; ++k) x[4 * i + k] = static_cast<float>(i);
  }
  absl::StatusOr<SampleLayout> layout = SampleLayout::Create(
      {{.name = "x", .dtype = DType::kFloat32, .shape = {4}},
       {.name = "y", .dtype = DType::kInt64, .shape = {}}});
  if (!layout.ok()) return Fail(layout.status());
  absl::StatusOr<std::shared_ptr<InMemoryDataset>> dataset =
      InMemoryDataset::Create(
          *layout, 1000,
          {{reinterpret_cast<const std::byte*>(x.data()), x.size() * 4},
           {reinterpret_cast<const std::byte*>(y.data()), y.size() * 8}});
  if (!dataset.ok()) return Fail(dataset.status());
  absl::StatusOr<Loader> loader = LoaderBuilder(*dataset)
                                      .batch_size(100)
                                      .shuffle(/*seed=*/7)
                                      .num_workers(2)
                                      .device(Device::Host())
                                      .Build();
  if (!loader.ok()) return Fail(loader.status());

  for (int epoch = 0; epoch < 2; ++epoch) {
    int64_t label_sum = 0;
    for (absl::StatusOr<DeviceBatch>& batch : *loader) {
      if (!batch.ok()) return Fail(batch.status());
      if (absl::Status s = batch->WaitOnHost(); !s.ok()) return Fail(s);
      const int64_t* labels = batch->field(1).data_as<int64_t>();
      for (int64_t k = 0; k < batch->size(); ++k) label_sum += labels[k];
    }
    std::printf("epoch %d: label sum %lld\n", epoch,
                static_cast<long long>(label_sum));
    if (label_sum != 999 * 1000 / 2) return 1;  // every sample, once
  }
  return 0;
}
