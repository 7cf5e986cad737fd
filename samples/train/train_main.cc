// train: the sample trainer, fed by pinwheel. Trains a one-hidden-layer MLP
// classifier on a record file (fields "x" f32[...] and "y" i64[]) and
// evaluates it on a held-out record file after every epoch.
//
//   build/samples/train/train                  # synthetic data, first GPU or host
//   build/samples/train/train --device=cpu --epochs=2
//   build/samples/train/train --data=DIR       # DIR/train.pwr, DIR/heldout.pwr
//
// On a GPU every step runs on one compute stream that waits on each batch's
// ready event (no host synchronisation per batch; the host waits only at
// the end of an epoch to read the loss and accuracy). Without a GPU the
// same loop runs on the host backend with plain C++ math.
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "loader/loader.h"
#include "loader/loader_builder.h"
#include "loader/record_file.h"
#include "pinning/status_macros.h"
#include "samples/train/mlp.h"
#include "samples/train/mlp_cpu.h"
#include "samples/train/synthetic_data.h"
#include "transfer/device.h"
#include "transfer/device_batch.h"
#include "transfer/sample_layout.h"
#include "transfer/stream.h"
#if PINWHEEL_HAVE_CUDA
#include "samples/train/mlp_cuda.h"
#endif

#ifndef PINWHEEL_TRAIN_DEFAULT_DATA_DIR
#define PINWHEEL_TRAIN_DEFAULT_DATA_DIR "pinwheel-data/synthetic-v1"
#endif

ABSL_FLAG(std::string, data, "",
          "directory holding train.pwr and heldout.pwr (record files with "
          "fields x f32[...] and y i64[]); empty: a synthetic dataset in " PINWHEEL_TRAIN_DEFAULT_DATA_DIR
          ", written on first run");
ABSL_FLAG(int, epochs, 3, "passes over the training set");
ABSL_FLAG(int64_t, batch_size, 256, "samples per batch");
ABSL_FLAG(int, workers, 2, "loader threads reading samples");
ABSL_FLAG(int, prefetch, 4, "batches in flight in the loader (pinned slots)");
ABSL_FLAG(std::string, device, "auto", "auto (first GPU, else host), cpu, or cuda:N");
ABSL_FLAG(uint64_t, seed, 1, "fixes the initial weights and the shuffling");
ABSL_FLAG(double, lr, 0.05, "SGD learning rate (momentum 0.9)");
ABSL_FLAG(int64_t, hidden, 512, "hidden units");

namespace pinwheel::train {
namespace {

double Seconds(absl::Duration d) { return absl::ToDoubleSeconds(d); }

struct TrainingData {
  std::string dir;
  std::shared_ptr<RecordFileDataset> train;
  std::shared_ptr<RecordFileDataset> held_out;
  int64_t inputs = 0;   // elements of "x"
  int64_t classes = 0;  // 1 + the largest training label
};

// Returns the index of field `name` after checking its dtype (and, for a
// scalar, its element count), or InvalidArgument naming the file.
absl::StatusOr<int> CheckedField(const RecordFileDataset& ds,
                                 const std::string& name, DType dtype,
                                 bool scalar) {
  const SampleLayout& layout = ds.layout();
  const int f = layout.FieldIndex(name);
  if (f < 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s has no field \"%s\" (its fields: %s); the trainer needs x f32[...] "
        "and y i64[]",
        ds.path(), name, layout.ToString()));
  }
  const FieldSpec& spec = layout.fields()[f];
  if (spec.dtype != dtype || (scalar && spec.elements() != 1)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: field %s; the trainer needs x f32[...] and y i64[]", ds.path(),
        spec.ToString()));
  }
  return f;
}

absl::StatusOr<TrainingData> OpenTrainingData(const std::string& data_flag) {
  TrainingData data;
  data.dir = data_flag.empty() ? PINWHEEL_TRAIN_DEFAULT_DATA_DIR : data_flag;
  if (data_flag.empty()) {
    const absl::Time start = absl::Now();
    PINWHEEL_ASSIGN_OR_RETURN(bool created,
                              EnsureSyntheticData(SyntheticSpec(), data.dir));
    if (created) {
      absl::PrintF("data: wrote the synthetic dataset to %s in %.1f s (reused "
                   "on later runs)\n",
                   data.dir, Seconds(absl::Now() - start));
    } else {
      absl::PrintF("data: synthetic dataset in %s\n", data.dir);
    }
  } else {
    absl::PrintF("data: %s\n", data.dir);
  }
  PINWHEEL_ASSIGN_OR_RETURN(data.train, RecordFileDataset::Open(
                                            data.dir + "/" + kTrainFile));
  PINWHEEL_ASSIGN_OR_RETURN(data.held_out, RecordFileDataset::Open(
                                               data.dir + "/" + kHeldOutFile));
  PINWHEEL_ASSIGN_OR_RETURN(
      int x, CheckedField(*data.train, "x", DType::kFloat32, false));
  PINWHEEL_ASSIGN_OR_RETURN(
      int y, CheckedField(*data.train, "y", DType::kInt64, true));
  if (!(data.held_out->layout() == data.train->layout())) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s has fields {%s} but %s has {%s}; they must match",
        data.held_out->path(), data.held_out->layout().ToString(),
        data.train->path(), data.train->layout().ToString()));
  }
  const SampleLayout& layout = data.train->layout();
  data.inputs = layout.fields()[x].elements();
  // The number of classes: one more than the largest training label.
  size_t y_offset = 0;
  for (int f = 0; f < y; ++f) y_offset += layout.fields()[f].bytes();
  int64_t max_label = -1;
  for (int64_t i = 0; i < data.train->size(); ++i) {
    int64_t label;
    std::memcpy(&label, data.train->record(i).data() + y_offset, sizeof label);
    if (label < 0) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: record %d has label %d; labels must be >= 0",
          data.train->path(), i, label));
    }
    max_label = std::max(max_label, label);
  }
  data.classes = std::max<int64_t>(max_label + 1, 2);
  absl::PrintF("      train.pwr %d records, heldout.pwr %d records of {%s}, "
               "%d classes\n",
               data.train->size(), data.held_out->size(), layout.ToString(),
               data.classes);
  return data;
}

// A one-line progress bar, redrawn in place; silent unless stdout is a
// terminal.
class ProgressBar {
 public:
  ProgressBar(int epoch, int epochs, int64_t total)
      : epoch_(epoch), epochs_(epochs), total_(total),
        enabled_(isatty(STDOUT_FILENO) == 1), start_(absl::Now()) {}

  void Update(int64_t done, int64_t samples) {
    if (!enabled_) return;
    const int64_t step = std::max<int64_t>(total_ / 50, 1);
    if (done % step != 0 && done != total_) return;
    constexpr int kWidth = 30;
    const int filled = static_cast<int>(kWidth * done / std::max<int64_t>(total_, 1));
    const double secs = Seconds(absl::Now() - start_);
    absl::PrintF("\r  epoch %d/%d [%s%s] %3d%%  %.0f samples/s", epoch_,
                 epochs_, std::string(filled, '#'),
                 std::string(kWidth - filled, '.'),
                 static_cast<int>(100 * done / std::max<int64_t>(total_, 1)),
                 secs > 0 ? samples / secs : 0.0);
    std::fflush(stdout);
  }
  // Erases the bar so the next line starts clean.
  void Clear() {
    if (!enabled_) return;
    absl::PrintF("\r\033[K");
    std::fflush(stdout);
  }

 private:
  int epoch_, epochs_;
  int64_t total_;
  bool enabled_;
  absl::Time start_;
};

// What one pass over a loader's epoch cost the trainer.
struct PassCost {
  absl::Duration wait_on;  // inside DeviceBatch::WaitOn (host: the copy)
  int64_t batches = 0;
};

enum class Pass { kTrain, kEvaluate };

// Runs one epoch of `loader` through `mlp`: every batch is waited on, used
// and released on `compute`, the model's own stream (no host sync on cuda).
absl::StatusOr<PassCost> RunEpoch(Loader& loader, Mlp& mlp,
                                  const Stream& compute, Pass pass,
                                  ProgressBar* progress) {
  const int x = loader.layout().sample().FieldIndex("x");
  const int y = loader.layout().sample().FieldIndex("y");
  PassCost cost;
  int64_t samples = 0;
  while (true) {
    PINWHEEL_ASSIGN_OR_RETURN(std::optional<DeviceBatch> batch, loader.Next());
    if (!batch) break;  // end of the epoch
    const absl::Time wait_start = absl::Now();
    PINWHEEL_RETURN_IF_ERROR(batch->WaitOn(compute));
    cost.wait_on += absl::Now() - wait_start;
    const auto* xs = batch->field(x).data_as<const float>();
    const auto* ys = batch->field(y).data_as<const int64_t>();
    if (pass == Pass::kTrain) {
      PINWHEEL_RETURN_IF_ERROR(mlp.TrainStep(xs, ys, batch->size()));
    } else {
      PINWHEEL_RETURN_IF_ERROR(mlp.EvalStep(xs, ys, batch->size()));
    }
    samples += batch->size();
    // Fences the buffer's reuse behind the work just queued on `compute`.
    PINWHEEL_RETURN_IF_ERROR(batch->Release(compute));
    ++cost.batches;
    if (progress != nullptr) progress->Update(cost.batches, samples);
  }
  return cost;
}

absl::Status Train() {
  const int epochs = absl::GetFlag(FLAGS_epochs);
  const int64_t batch_size = absl::GetFlag(FLAGS_batch_size);
  const uint64_t seed = absl::GetFlag(FLAGS_seed);
  if (epochs < 1) {
    return absl::InvalidArgumentError(
        absl::StrFormat("--epochs=%d; must be >= 1", epochs));
  }
  if (batch_size < 1) {
    return absl::InvalidArgumentError(
        absl::StrFormat("--batch_size=%d; must be >= 1", batch_size));
  }
  const std::string device_flag = absl::GetFlag(FLAGS_device);
  PINWHEEL_ASSIGN_OR_RETURN(Device device, Device::Parse(device_flag));
  const absl::Time run_start = absl::Now();
  PINWHEEL_ASSIGN_OR_RETURN(TrainingData data,
                            OpenTrainingData(absl::GetFlag(FLAGS_data)));

  const MlpShape shape{.inputs = data.inputs,
                       .hidden = absl::GetFlag(FLAGS_hidden),
                       .classes = data.classes};
  const SgdOptions sgd{.learning_rate = static_cast<float>(absl::GetFlag(FLAGS_lr)),
                       .momentum = 0.9f};
  std::vector<float> initial = InitialParameters(shape, seed);
  // The model is made before the loaders, so it (and its stream) outlives
  // them and every batch they hand out.
  std::unique_ptr<Mlp> mlp;
  if (device.is_cuda()) {
#if PINWHEEL_HAVE_CUDA
    PINWHEEL_ASSIGN_OR_RETURN(mlp, MlpCuda::Create(device.ordinal(), shape,
                                                   batch_size, initial, sgd));
    absl::PrintF("device: %s: cuBLAS GEMMs and CUDA kernels on one compute "
                 "stream\n",
                 device.Describe());
#else
    return absl::FailedPreconditionError(
        "this trainer was built without CUDA; use --device=cpu");
#endif
  } else {
    PINWHEEL_ASSIGN_OR_RETURN(
        mlp, MlpCpu::Create(shape, batch_size, std::move(initial), sgd));
    const char* why =
        device_flag == "cpu" || device_flag == "host" ? "--device=" : nullptr;
    if (why != nullptr) {
      absl::PrintF("device: %s (--device=%s): plain C++ math on the host "
                   "backend\n",
                   device.Describe(), device_flag);
    } else if (!Device::CudaBackendBuilt()) {
      absl::PrintF("device: no GPU: this build has no CUDA backend; running "
                   "the same loop on %s with plain C++ math\n",
                   device.Describe());
    } else {
      absl::PrintF("device: no GPU found; running the same loop on %s with "
                   "plain C++ math\n",
                   device.Describe());
    }
  }
  const Stream compute = Stream::Borrow(device, mlp->native_stream());

  PINWHEEL_ASSIGN_OR_RETURN(
      Loader train_loader,
      LoaderBuilder(data.train)
          .batch_size(batch_size)
          .shuffle(seed)
          .num_workers(absl::GetFlag(FLAGS_workers))
          .prefetch(absl::GetFlag(FLAGS_prefetch))
          .device(device)
          .Build());
  PINWHEEL_ASSIGN_OR_RETURN(
      Loader eval_loader,
      LoaderBuilder(data.held_out)
          .batch_size(batch_size)
          .num_workers(absl::GetFlag(FLAGS_workers))
          .prefetch(absl::GetFlag(FLAGS_prefetch))
          .device(device)
          .Build());
  const LoaderStats memory = train_loader.stats();
  absl::PrintF("model: MLP %d -> %d -> %d, SGD lr %g momentum %g, batch %d, "
               "%d epochs, seed %d\n",
               shape.inputs, shape.hidden, shape.classes, sgd.learning_rate,
               sgd.momentum, batch_size, epochs, seed);
  absl::PrintF("loader: %d workers, prefetch %d; %.1f MiB pinned, %.1f MiB on "
               "the device (training loader)\n",
               absl::GetFlag(FLAGS_workers), absl::GetFlag(FLAGS_prefetch),
               memory.pinned_bytes / 1048576.0, memory.device_bytes / 1048576.0);
  std::fflush(stdout);

  double accuracy = 0;
  for (int epoch = 1; epoch <= epochs; ++epoch) {
    const LoaderStats before = train_loader.stats();
    const absl::Time start = absl::Now();
    ProgressBar progress(epoch, epochs, train_loader.batches_per_epoch());
    PINWHEEL_ASSIGN_OR_RETURN(
        PassCost cost,
        RunEpoch(train_loader, *mlp, compute, Pass::kTrain, &progress));
    // The one host synchronisation of the training pass: the loss sums.
    PINWHEEL_ASSIGN_OR_RETURN(MlpMetrics trained, mlp->TakeMetrics());
    const absl::Duration train_time = absl::Now() - start;
    const LoaderStats after = train_loader.stats();
    progress.Clear();

    const absl::Time eval_start = absl::Now();
    PINWHEEL_RETURN_IF_ERROR(
        RunEpoch(eval_loader, *mlp, compute, Pass::kEvaluate, nullptr)
            .status());
    PINWHEEL_ASSIGN_OR_RETURN(MlpMetrics evaluated, mlp->TakeMetrics());
    const absl::Duration eval_time = absl::Now() - eval_start;

    const double secs = Seconds(train_time);
    const double waited =
        Seconds(after.consumer_wait - before.consumer_wait + cost.wait_on);
    accuracy = 100.0 * evaluated.eval_correct /
               std::max<int64_t>(evaluated.eval_samples, 1);
    absl::PrintF(
        "epoch %d/%d  train loss %.4f  held-out accuracy %.2f%%  "
        "%.0f samples/s  %.2f GB/s  waited for data %.1f%%  (%.1f s + %.1f s "
        "eval)\n",
        epoch, epochs,
        trained.train_loss_sum / std::max<int64_t>(trained.train_samples, 1),
        accuracy, trained.train_samples / secs,
        (after.bytes_delivered - before.bytes_delivered) / secs / 1e9,
        100.0 * waited / secs, secs, Seconds(eval_time));
    std::fflush(stdout);
  }
  absl::PrintF("final held-out accuracy %.2f%% after %d epochs (seed %d) on "
               "%s; %.1f s in all\n",
               accuracy, epochs, seed, device.ToString(),
               Seconds(absl::Now() - run_start));
  return absl::OkStatus();
}

}  // namespace
}  // namespace pinwheel::train

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Trains a one-hidden-layer MLP classifier fed by pinwheel.\n"
      "Example: train --device=cpu --epochs=2");
  absl::ParseCommandLine(argc, argv);
  const absl::Status status = pinwheel::train::Train();
  if (!status.ok()) {
    std::fprintf(stderr, "train: error: %s\n", status.ToString().c_str());
    return 1;
  }
  return 0;
}
