// Embedding pinwheel in your trainer: a dataset, a loader, and the loop.
// Runs on the first GPU if there is one, else on the host backend; the code
// is the same. Built with the project and run as the ctest case
// `embed_example`, so the README's copy of it cannot rot.
#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <vector>

#include "pinwheel/pinwheel.h"

// 1. A dataset: sample i is x = {i, i, i, i} (f32) and y = i (i64). Read()
//    writes straight into the sample's place in the batch; it may be called
//    from many threads at once.
class Counting : public pinwheel::Dataset {
 public:
  Counting()
      : layout_(*pinwheel::SampleLayout::Create(
            {{.name = "x", .dtype = pinwheel::DType::kFloat32, .shape = {4}},
             {.name = "y", .dtype = pinwheel::DType::kInt64, .shape = {}}})) {}
  int64_t size() const override { return 1000; }
  const pinwheel::SampleLayout& layout() const override { return layout_; }
  absl::Status Read(int64_t i, pinwheel::SampleView& out) const override {
    for (float& v : out.field_as<float>(0)) v = static_cast<float>(i);
    out.field_as<int64_t>(1)[0] = i;
    return absl::OkStatus();
  }

 private:
  pinwheel::SampleLayout layout_;
};

absl::Status Run() {
  // 2. A loader: shuffled batches of 64, read by 2 worker threads, copied to
  //    the first GPU (or kept on the host).
  absl::StatusOr<pinwheel::Loader> loader =
      pinwheel::LoaderBuilder(std::make_shared<Counting>())
          .batch_size(64)
          .shuffle(/*seed=*/7)
          .num_workers(2)
          .device(pinwheel::Device::FirstGpuOrHost())
          .Build();
  if (!loader.ok()) return loader.status();
  const pinwheel::Device& device = loader->device();

  // Your compute stream: on a GPU pass your cudaStream_t (nullptr is the
  // legacy default stream); on the host it is the calling thread.
  pinwheel::Stream compute =
      pinwheel::Stream::Borrow(device, /*native=*/nullptr);
  absl::StatusOr<std::shared_ptr<pinwheel::Event>> epoch_done =
      pinwheel::Event::Create(device);
  if (!epoch_done.ok()) return epoch_done.status();

  // 3. The loop. Each batch: wait for it on your stream (no host sync on a
  //    GPU), queue your work, release it on the same stream (its buffer is
  //    reused only after that work has run).
  for (int epoch = 0; epoch < 2; ++epoch) {
    std::vector<int64_t> labels(1000), indices;
    int64_t seen = 0;
    while (true) {
      absl::StatusOr<std::optional<pinwheel::DeviceBatch>> batch =
          loader->Next();
      if (!batch.ok()) return batch.status();
      if (!batch->has_value()) break;  // end of the epoch
      pinwheel::DeviceBatch& b = **batch;
      if (absl::Status s = b.WaitOn(compute); !s.ok()) return s;
      absl::StatusOr<pinwheel::FieldView> y = b.field("y");
      if (!y.ok()) return y.status();
      // Your training step goes here, queued on `compute` with y->data (a
      // device pointer on a GPU). This one copies the labels back instead.
      if (absl::Status s = compute.CopyToHostAsync(
              labels.data() + seen, y->data, b.size() * sizeof(int64_t));
          !s.ok()) {
        return s;
      }
      indices.insert(indices.end(), b.sample_indices().begin(),
                     b.sample_indices().end());
      seen += b.size();
      // After Release() the batch holds no data: read what you need first.
      if (absl::Status s = b.Release(compute); !s.ok()) return s;
    }
    // Host copies are read only after an event recorded behind them.
    if (absl::Status s = (*epoch_done)->Record(compute); !s.ok()) return s;
    if (absl::Status s = (*epoch_done)->Wait(); !s.ok()) return s;
    if (seen != 1000) return absl::DataLossError("an epoch lost samples");
    for (int64_t k = 0; k < seen; ++k) {
      if (labels[k] != indices[k]) {
        return absl::DataLossError("a label does not match its sample index");
      }
    }
    std::printf("epoch %d on %s: %lld samples, every label matches its index\n",
                epoch, device.ToString().c_str(), static_cast<long long>(seen));
  }
  return absl::OkStatus();
}

int main() {
  if (absl::Status s = Run(); !s.ok()) {
    std::fprintf(stderr, "embed_example: %s\n", s.ToString().c_str());
    return 1;
  }
  return 0;
}
