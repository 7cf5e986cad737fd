// libtorch_pinwheel: a LibTorch training loop fed by pinwheel, and a
// benchmark of pinwheel against torch::data's DataLoader in one process.
//
//   libtorch_pinwheel --mode=train   # a small classifier, loss must fall
//   libtorch_pinwheel --mode=bench --workloads=w1,w2
//
// Each batch: Next() -> WaitAndWrap (torch's current stream waits on the
// batch's event, fields become tensors through DLPack) -> the step, queued
// on that stream -> the views dropped -> Release() on the same stream.
//
// The benchmark's workloads mirror samples/bench: W1 256 images u8[3,224,224]
// + i64 labels a batch from 2048 in-memory samples; W2 32 windows of 1024
// tokens (i64 input and target) from a file of 50M u16 tokens. The
// torch::data rows read the same data through a torch::data Dataset, Stack<>
// collation and workers, then .to(device, non_blocking) (its batches are not
// pinned, so that copy is synchronous in effect).
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <torch/torch.h>
#include <utility>
#include <vector>
#if PINWHEEL_TORCH_CUDA
#include <c10/cuda/CUDAStream.h>
#endif

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"

#include "loader/in_memory_dataset.h"
#include "loader/loader.h"
#include "loader/loader_builder.h"
#include "loader/token_window_dataset.h"
#include "pinning/base/status_macros.h"
#include "samples/libtorch/torch_batches.h"
#include "transfer/device.h"
#include "transfer/device_batch.h"
#include "transfer/sample_layout.h"
#include "transfer/stream.h"

ABSL_FLAG(std::string, mode, "train", "train or bench");
ABSL_FLAG(std::string, device, "auto", "auto, cpu, cuda:N");
ABSL_FLAG(std::string, workloads, "w1,w2", "bench: w1, w2");
ABSL_FLAG(int, workers, 8, "pinwheel and torch::data workers");
ABSL_FLAG(int, prefetch, 4, "pinwheel pinned slots");
ABSL_FLAG(int, batches, 100, "bench: timed W1 batches per row");
ABSL_FLAG(int, w2_batches, 3000, "bench: timed W2 batches per row");
ABSL_FLAG(int, epochs, 4, "train: epochs");
ABSL_FLAG(bool, smoke, false, "tiny sizes (a CPU smoke run)");
ABSL_FLAG(std::string, token_file, "",
          "W2's u16 token file; empty: /tmp/pinwheel_libtorch_tokens_<N>.u16");

namespace pinwheel::torch_sample {
namespace {

double Now() {
  return std::chrono::duration<double>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void SynchronizeTorch(const Device& device) {
#if PINWHEEL_TORCH_CUDA
  if (device.is_cuda()) {
    c10::cuda::getCurrentCUDAStream(device.ordinal()).synchronize();
  }
#else
  (void)device;
#endif
}

// Sizes of the benchmark workloads (the issue's, or tiny ones for --smoke).
struct Sizes {
  int64_t image_samples = 2048;
  int64_t side = 224;
  int64_t image_batch = 256;
  int64_t tokens = 50'000'000;
  int64_t seq_len = 1024;
  int64_t token_batch = 32;
};

Sizes SizesFromFlags() {
  Sizes s;
  if (absl::GetFlag(FLAGS_smoke)) {
    s = {.image_samples = 64,
         .side = 32,
         .image_batch = 16,
         .tokens = 200'000,
         .seq_len = 128,
         .token_batch = 8};
  }
  return s;
}

// W1's data: random pixels, label = index % 1000. Owned by the caller.
struct Images {
  int64_t samples, side;
  std::vector<uint8_t> pixels;
  std::vector<int64_t> labels;
};

Images MakeImages(int64_t samples, int64_t side) {
  Images im{samples, side, std::vector<uint8_t>(samples * 3 * side * side),
            std::vector<int64_t>(samples)};
  std::mt19937_64 random(1);
  for (size_t i = 0; i + 8 <= im.pixels.size(); i += 8) {
    const uint64_t word = random();
    std::memcpy(im.pixels.data() + i, &word, 8);
  }
  for (int64_t i = 0; i < samples; ++i) im.labels[i] = i % 1000;
  return im;
}

absl::StatusOr<std::shared_ptr<const Dataset>> ImagesAsPinwheel(
    const Images& im) {
  PINWHEEL_ASSIGN_OR_RETURN(
      SampleLayout layout,
      SampleLayout::Create(
          {{.name = "image",
            .dtype = DType::kUInt8,
            .shape = {3, im.side, im.side}},
           {.name = "label", .dtype = DType::kInt64, .shape = {}}}));
  PINWHEEL_ASSIGN_OR_RETURN(
      std::shared_ptr<InMemoryDataset> ds,
      InMemoryDataset::Create(
          std::move(layout), im.samples,
          {absl::MakeConstSpan(
               reinterpret_cast<const std::byte*>(im.pixels.data()),
               im.pixels.size()),
           absl::MakeConstSpan(
               reinterpret_cast<const std::byte*>(im.labels.data()),
               im.labels.size() * sizeof(int64_t))}));
  return std::shared_ptr<const Dataset>(std::move(ds));
}

// W1 for torch::data: one Example {image u8[3,S,S], label i64} per index.
class TorchImages : public torch::data::datasets::Dataset<TorchImages> {
 public:
  explicit TorchImages(const Images* im) : im_(im) {}
  torch::data::Example<> get(size_t i) override {
    const int64_t n = 3 * im_->side * im_->side;
    torch::Tensor image =
        torch::empty({3, im_->side, im_->side}, torch::kUInt8);
    std::memcpy(image.data_ptr(), im_->pixels.data() + i * n, n);
    return {image, torch::tensor(im_->labels[i], torch::kInt64)};
  }
  torch::optional<size_t> size() const override { return im_->samples; }

 private:
  const Images* im_;
};

// W2's token file: `tokens` random u16 (< 50257), written once.
absl::Status EnsureTokenFile(const std::string& path, int64_t tokens) {
  if (std::FILE* f = std::fopen(path.c_str(), "rb")) {
    std::fseek(f, 0, SEEK_END);
    const long size = std::ftell(f);
    std::fclose(f);
    if (size == tokens * 2) return absl::OkStatus();
  }
  const std::string tmp = path + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (f == nullptr) return absl::InternalError("cannot create " + tmp);
  std::mt19937_64 random(3);
  std::vector<uint16_t> chunk(1 << 20);
  for (int64_t written = 0; written < tokens;) {
    const int64_t n = std::min<int64_t>(tokens - written, chunk.size());
    for (int64_t i = 0; i < n; ++i)
      chunk[i] = static_cast<uint16_t>(random() % 50257);
    std::fwrite(chunk.data(), 2, n, f);
    written += n;
  }
  if (std::fclose(f) != 0 || std::rename(tmp.c_str(), path.c_str()) != 0) {
    return absl::InternalError("cannot write " + path);
  }
  return absl::OkStatus();
}

// W2 for torch::data: the same windows as pinwheel's TokenWindowDataset
// (window starts from it), read from the file into fresh tensors.
class TorchTokens : public torch::data::datasets::Dataset<TorchTokens> {
 public:
  TorchTokens(std::shared_ptr<const TokenWindowDataset> windows,
              std::vector<uint16_t> tokens, int64_t seq_len)
      : windows_(std::move(windows)),
        tokens_(std::move(tokens)),
        seq_len_(seq_len) {}
  torch::data::Example<> get(size_t i) override {
    const int64_t start = windows_->WindowStart(static_cast<int64_t>(i));
    torch::Tensor input = torch::empty({seq_len_}, torch::kInt64);
    torch::Tensor target = torch::empty({seq_len_}, torch::kInt64);
    int64_t* in = input.data_ptr<int64_t>();
    int64_t* out = target.data_ptr<int64_t>();
    for (int64_t k = 0; k < seq_len_; ++k) {
      in[k] = tokens_[start + k];
      out[k] = tokens_[start + k + 1];
    }
    return {input, target};
  }
  torch::optional<size_t> size() const override { return windows_->size(); }

 private:
  std::shared_ptr<const TokenWindowDataset> windows_;
  std::vector<uint16_t> tokens_;
  int64_t seq_len_;
};

struct Row {
  std::string workload, name;
  int64_t batches = 0, bytes = 0;
  double seconds = 0;
};

void PrintRow(const Row& r, double baseline_rate) {
  const double rate = r.batches / r.seconds;
  std::printf("%-4s %-44s %10.0f batches/s %8.2f GB/s  x%.2f\n",
              r.workload.c_str(), r.name.c_str(), rate,
              r.bytes / r.seconds / 1e9,
              baseline_rate > 0 ? rate / baseline_rate : 1.0);
  std::fflush(stdout);
}

// Times `batches` batches of a pinwheel loader handed to torch.
absl::StatusOr<Row> MeasurePinwheel(std::shared_ptr<const Dataset> dataset,
                                    const Device& device, int64_t batch_size,
                                    int workers, int prefetch, int batches,
                                    int device_buffers) {
  PINWHEEL_ASSIGN_OR_RETURN(Loader loader, LoaderBuilder(std::move(dataset))
                                               .batch_size(batch_size)
                                               .shuffle(7)
                                               .drop_last(true)
                                               .num_workers(workers)
                                               .prefetch(prefetch)
                                               .device_buffers(device_buffers)
                                               .device(device)
                                               .Build());
  const Stream consumer = TorchConsumerStream(loader.device());
  Row row;
  double t0 = 0;
  const int warmup = 5;
  for (int i = 0; i < warmup + batches; ++i) {
    if (i == warmup) {
      SynchronizeTorch(device);
      t0 = Now();
    }
    PINWHEEL_ASSIGN_OR_RETURN(std::optional<DeviceBatch> batch, loader.Next());
    if (!batch.has_value()) {  // end of an epoch: go on with the next one
      --i;
      continue;
    }
    {
      PINWHEEL_ASSIGN_OR_RETURN(TorchBatch t, WaitAndWrap(*batch, consumer));
      if (i >= warmup) {
        for (const auto& [name, tensor] : t.fields)
          row.bytes += tensor.nbytes();
      }
    }  // the views are dropped before the release
    PINWHEEL_RETURN_IF_ERROR(batch->Release(consumer));
  }
  SynchronizeTorch(device);
  row.seconds = Now() - t0;
  row.batches = batches;
  row.name =
      absl::StrFormat("pinwheel, %d workers, prefetch %d", workers, prefetch);
  loader.Shutdown();
  return row;
}

// Times `batches` batches of a torch::data DataLoader over `dataset`,
// copied to the device with non_blocking = true.
template <typename TorchDataset>
Row MeasureTorchData(TorchDataset dataset, const Device& device,
                     int64_t batch_size, int workers, int batches) {
  const torch::Device target = TorchDevice(device);
  auto mapped = std::move(dataset).map(torch::data::transforms::Stack<>());
  auto loader =
      torch::data::make_data_loader<torch::data::samplers::RandomSampler>(
          std::move(mapped), torch::data::DataLoaderOptions()
                                 .batch_size(batch_size)
                                 .workers(workers)
                                 .drop_last(true));
  Row row;
  double t0 = 0;
  const int warmup = 5;
  int i = 0;
  while (i < warmup + batches) {
    for (auto& batch : *loader) {
      if (i == warmup) {
        SynchronizeTorch(device);
        t0 = Now();
      }
      torch::Tensor data = batch.data.to(target, /*non_blocking=*/true);
      torch::Tensor labels = batch.target.to(target, /*non_blocking=*/true);
      if (i >= warmup) row.bytes += data.nbytes() + labels.nbytes();
      if (++i == warmup + batches) break;
    }
  }
  SynchronizeTorch(device);
  row.seconds = Now() - t0;
  row.batches = batches;
  row.name = absl::StrFormat("torch::data DataLoader, %d workers", workers);
  return row;
}

absl::Status Bench(const Device& device) {
  const Sizes s = SizesFromFlags();
  const int workers = absl::GetFlag(FLAGS_workers);
  const int prefetch = absl::GetFlag(FLAGS_prefetch);
  const bool smoke = absl::GetFlag(FLAGS_smoke);
  const int w1_batches = smoke ? 8 : absl::GetFlag(FLAGS_batches);
  const int w2_batches = smoke ? 16 : absl::GetFlag(FLAGS_w2_batches);
  std::printf("libtorch_pinwheel bench on %s, torch %s\n",
              device.Describe().c_str(), TORCH_VERSION);
  for (absl::string_view w : absl::StrSplit(absl::GetFlag(FLAGS_workloads), ',',
                                            absl::SkipWhitespace())) {
    if (w == "w1") {
      const Images im = MakeImages(s.image_samples, s.side);
      PINWHEEL_ASSIGN_OR_RETURN(std::shared_ptr<const Dataset> ds,
                                ImagesAsPinwheel(im));
      Row base = MeasureTorchData(TorchImages(&im), device, s.image_batch,
                                  workers, w1_batches);
      base.workload = "W1";
      const double base_rate = base.batches / base.seconds;
      PrintRow(base, base_rate);
      PINWHEEL_ASSIGN_OR_RETURN(
          Row row, MeasurePinwheel(ds, device, s.image_batch, workers, prefetch,
                                   w1_batches, 2));
      row.workload = "W1";
      PrintRow(row, base_rate);
    } else if (w == "w2") {
      std::string path = absl::GetFlag(FLAGS_token_file);
      if (path.empty()) {
        path =
            absl::StrFormat("/tmp/pinwheel_libtorch_tokens_%d.u16", s.tokens);
      }
      PINWHEEL_RETURN_IF_ERROR(EnsureTokenFile(path, s.tokens));
      PINWHEEL_ASSIGN_OR_RETURN(
          std::shared_ptr<TokenWindowDataset> windows,
          TokenWindowDataset::Open(
              path, {.token_bytes = 2, .seq_len = s.seq_len, .seed = 5}));
      std::vector<uint16_t> tokens(static_cast<size_t>(s.tokens));
      if (std::FILE* f = std::fopen(path.c_str(), "rb")) {
        const size_t got = std::fread(tokens.data(), 2, tokens.size(), f);
        std::fclose(f);
        if (got != tokens.size())
          return absl::DataLossError("short token file");
      }
      Row base =
          MeasureTorchData(TorchTokens(windows, std::move(tokens), s.seq_len),
                           device, s.token_batch, workers, w2_batches);
      base.workload = "W2";
      const double base_rate = base.batches / base.seconds;
      PrintRow(base, base_rate);
      PINWHEEL_ASSIGN_OR_RETURN(
          Row row, MeasurePinwheel(windows, device, s.token_batch, workers, 8,
                                   w2_batches, 4));
      row.workload = "W2";
      PrintRow(row, base_rate);
    } else {
      return absl::InvalidArgumentError(
          absl::StrFormat("--workloads: unknown workload '%s' (w1 or w2)", w));
    }
  }
  return absl::OkStatus();
}

// Trains a small classifier on synthetic 3x16x16 images whose class is
// their mean brightness bucket (10 classes): the loss must fall.
absl::Status Train(const Device& device) {
  const int64_t samples = 4096, side = 16, classes = 10;
  Images im{samples, side, std::vector<uint8_t>(samples * 3 * side * side),
            std::vector<int64_t>(samples)};
  std::mt19937_64 random(11);
  const int64_t n = 3 * side * side;
  for (int64_t i = 0; i < samples; ++i) {
    const int64_t label = static_cast<int64_t>(random() % classes);
    im.labels[i] = label;
    for (int64_t k = 0; k < n; ++k) {
      const int base = static_cast<int>(label * 25);
      im.pixels[i * n + k] = static_cast<uint8_t>(base + random() % 30);
    }
  }
  PINWHEEL_ASSIGN_OR_RETURN(std::shared_ptr<const Dataset> ds,
                            ImagesAsPinwheel(im));
  PINWHEEL_ASSIGN_OR_RETURN(Loader loader, LoaderBuilder(ds)
                                               .batch_size(128)
                                               .shuffle(3)
                                               .num_workers(2)
                                               .device(device)
                                               .Build());
  const torch::Device target = TorchDevice(loader.device());
  torch::nn::Sequential model(torch::nn::Flatten(), torch::nn::Linear(n, 64),
                              torch::nn::ReLU(),
                              torch::nn::Linear(64, classes));
  model->to(target);
  torch::optim::Adam optimizer(model->parameters(),
                               torch::optim::AdamOptions(1e-3));
  const Stream consumer = TorchConsumerStream(loader.device());
  double first_loss = -1, last_loss = -1;
  for (int epoch = 0; epoch < absl::GetFlag(FLAGS_epochs); ++epoch) {
    torch::Tensor total =
        torch::zeros({}, torch::TensorOptions().device(target));
    int64_t steps = 0;
    while (true) {
      PINWHEEL_ASSIGN_OR_RETURN(std::optional<DeviceBatch> batch,
                                loader.Next());
      if (!batch.has_value()) break;
      {
        PINWHEEL_ASSIGN_OR_RETURN(TorchBatch t, WaitAndWrap(*batch, consumer));
        torch::Tensor x = t.at("image").to(torch::kFloat32).div_(255.0);
        torch::Tensor loss = torch::nn::functional::cross_entropy(
            model->forward(x), t.at("label"));
        optimizer.zero_grad();
        loss.backward();
        optimizer.step();
        total += loss.detach();
        ++steps;
      }  // every kernel reading the batch is queued: drop the views, release
      PINWHEEL_RETURN_IF_ERROR(batch->Release(consumer));
    }
    const double mean = total.item<double>() / static_cast<double>(steps);
    std::printf("epoch %d on %s: mean loss %.4f over %lld steps\n", epoch,
                loader.device().ToString().c_str(), mean,
                static_cast<long long>(steps));
    if (first_loss < 0) first_loss = mean;
    last_loss = mean;
  }
  if (!(last_loss < first_loss)) {
    return absl::InternalError(absl::StrFormat(
        "the loss did not fall: %.4f then %.4f", first_loss, last_loss));
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace pinwheel::torch_sample

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  using namespace pinwheel;
  absl::StatusOr<Device> device = Device::Parse(absl::GetFlag(FLAGS_device));
  absl::Status status = device.status();
  if (status.ok()) {
#if !PINWHEEL_TORCH_CUDA
    if (device->is_cuda()) {
      std::fprintf(
          stderr,
          "libtorch_pinwheel: built without torch CUDA; using the host\n");
      *device = Device::Host();
    }
#endif
    const std::string mode = absl::GetFlag(FLAGS_mode);
    if (mode == "train") {
      status = torch_sample::Train(*device);
    } else if (mode == "bench") {
      status = torch_sample::Bench(*device);
    } else {
      status = absl::InvalidArgumentError("--mode must be train or bench");
    }
  }
  if (!status.ok()) {
    std::fprintf(stderr, "libtorch_pinwheel: %s\n", status.ToString().c_str());
    return 1;
  }
  return 0;
}
