// train: the sample trainer, fed by pinwheel. Trains a one-hidden-layer MLP
// classifier on a record file (fields "x" f32[...] and "y" i64[]) and
// evaluates it on a held-out record file after every epoch.
//
//   build/samples/train/train                  # synthetic data, first GPU or host
//   build/samples/train/train --device=cpu --epochs=2
//   build/samples/train/train --data=DIR       # DIR/train.pwr, DIR/heldout.pwr
//   build/samples/train/train --checkpoint_dir=ckpt --checkpoint_every=100
//   build/samples/train/train --checkpoint_dir=ckpt --resume   # after a kill
//
// On a GPU every step runs on one compute stream that waits on each batch's
// ready event (no host synchronisation per batch; the host waits only at
// the end of an epoch to read the loss and accuracy). Without a GPU the
// same loop runs on the host backend with plain C++ math.
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/reflection.h"
#include "absl/flags/usage.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "loader/atomic_file.h"
#include "loader/loader.h"
#include "loader/launch_environment.h"
#include "loader/loader_builder.h"
#include "loader/numa_placement.h"
#include "loader/record_file.h"
#include "loader/sampler.h"
#include "pinning/base/crc32c.h"
#include "pinning/base/status_macros.h"
#include "samples/train/collective.h"
#include "samples/train/mlp.h"
#include "samples/train/mlp_cpu.h"
#include "samples/train/synthetic_data.h"
#include "samples/train/train_checkpoint.h"
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
ABSL_FLAG(std::string, device, "auto",
          "auto (under mpirun/srun/torchrun: cuda:local_rank; else the first "
          "GPU; the host without one), cpu, or cuda:N");
ABSL_FLAG(uint64_t, seed, 1, "fixes the initial weights and the shuffling");
ABSL_FLAG(double, lr, 0.05, "SGD learning rate (momentum 0.9)");
ABSL_FLAG(int64_t, hidden, 512, "hidden units");
ABSL_FLAG(int64_t, synthetic_records, 100'000,
          "training records of the synthetic dataset (held-out: a tenth); "
          "other sizes live in their own directory beside the default");
ABSL_FLAG(bool, check_coverage, false,
          "check that the ranks together read every training sample exactly "
          "once per epoch (an error otherwise); in an epoch resumed mid-way, "
          "every sample the checkpoint had not reached, and none it had");
ABSL_FLAG(std::string, checkpoint_dir, "",
          "directory for the checkpoint (train.ckpt: model, momentum, counters "
          "and the training loader's position, replaced atomically); written "
          "at the end of every epoch and every --checkpoint_every batches. "
          "Under mpirun rank 0 writes it; every rank resumes from it");
ABSL_FLAG(int64_t, checkpoint_every, 0,
          "also checkpoint every N training batches (steps, counted across "
          "epochs); 0: only at the end of each epoch. Needs --checkpoint_dir");
ABSL_FLAG(bool, resume, false,
          "continue from the checkpoint in --checkpoint_dir with exactly the "
          "batches an uninterrupted run would have trained on (same ranks and "
          "batch size: the same weights bit for bit; other counts: the rest "
          "of the epoch dealt over the new ranks); an error if there is none "
          "or it is damaged");
ABSL_FLAG(std::string, weights_out, "",
          "write the final weights (float32, little-endian, the model's "
          "parameter order) to this file and print their CRC-32C (rank 0)");
ABSL_FLAG(int64_t, die_after_batches, 0,
          "testing: raise SIGKILL on this process right after training batch "
          "N of the job (counted across epochs and resumes; 0: never)");

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

// `report`: print what was found (rank 0 only, under a launcher).
absl::StatusOr<TrainingData> OpenTrainingData(const std::string& data_flag,
                                              bool report) {
  TrainingData data;
  data.dir = data_flag.empty() ? PINWHEEL_TRAIN_DEFAULT_DATA_DIR : data_flag;
  if (data_flag.empty()) {
    SyntheticSpec spec;
    const int64_t records = absl::GetFlag(FLAGS_synthetic_records);
    if (records < 10) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "--synthetic_records=%d; must be >= 10", records));
    }
    if (records != spec.train_records) {
      spec.train_records = records;
      spec.held_out_records = records / 10;
      data.dir = absl::StrFormat("%s-%d", data.dir, records);
    }
    const absl::Time start = absl::Now();
    PINWHEEL_ASSIGN_OR_RETURN(bool created,
                              EnsureSyntheticData(spec, data.dir));
    if (report && created) {
      absl::PrintF("data: wrote the synthetic dataset to %s in %.1f s (reused "
                   "on later runs)\n",
                   data.dir, Seconds(absl::Now() - start));
    } else if (report) {
      absl::PrintF("data: synthetic dataset in %s\n", data.dir);
    }
  } else if (report) {
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
  if (report) {
    absl::PrintF("      train.pwr %d records, heldout.pwr %d records of {%s}, "
                 "%d classes\n",
                 data.train->size(), data.held_out->size(), layout.ToString(),
                 data.classes);
  }
  return data;
}

// A one-line progress bar, redrawn in place; silent unless stdout is a
// terminal.
class ProgressBar {
 public:
  ProgressBar(int epoch, int epochs, int64_t total, bool wanted)
      : epoch_(epoch), epochs_(epochs), total_(total),
        enabled_(wanted && isatty(STDOUT_FILENO) == 1), start_(absl::Now()) {}

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
// `coverage`, when given, counts each dataset index read.
// `after_step`, when given, runs after each training batch is released.
absl::StatusOr<PassCost> RunEpoch(
    Loader& loader, Mlp& mlp, const Stream& compute, Pass pass,
    ProgressBar* progress, std::vector<int32_t>* coverage,
    const std::function<absl::Status()>& after_step = {}) {
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
    if (coverage != nullptr) {
      for (int64_t index : batch->sample_indices()) ++(*coverage)[index];
    }
    // Fences the buffer's reuse behind the work just queued on `compute`.
    PINWHEEL_RETURN_IF_ERROR(batch->Release(compute));
    ++cost.batches;
    if (after_step) PINWHEEL_RETURN_IF_ERROR(after_step());
    if (progress != nullptr) progress->Update(cost.batches, samples);
  }
  return cost;
}

// Prints on rank 0 only (the other ranks' numbers reach it by SumHost).
template <typename... Args>
void Say(const Collective& collective, const absl::FormatSpec<Args...>& format,
         const Args&... args) {
  if (collective.rank() != 0) return;
  absl::PrintF(format, args...);
  std::fflush(stdout);
}

// Checks that the ranks together read every training sample exactly once in
// an epoch (`counts` holds this rank's reads per index; summed here). In an
// epoch resumed at global position `resumed_at` > 0, the samples at
// positions before it (of the epoch's shuffle `order`) were trained on
// before the checkpoint: they must be read by no rank, the others once.
absl::Status CheckCoverage(Collective& collective, std::vector<int32_t>& counts,
                           int epoch, const EpochShuffle& order,
                           int64_t resumed_at) {
  PINWHEEL_RETURN_IF_ERROR(collective.SumHost(counts));
  std::vector<int32_t> expected(counts.size(), 1);
  for (int64_t p = 0; p < resumed_at; ++p) expected[order.At(p)] = 0;
  int64_t missing = 0, repeated = 0, first_bad = -1;
  for (size_t i = 0; i < counts.size(); ++i) {
    if (counts[i] == expected[i]) continue;
    (counts[i] < expected[i] ? missing : repeated) += 1;
    if (first_bad < 0) first_bad = static_cast<int64_t>(i);
  }
  if (missing != 0 || repeated != 0) {
    return absl::InternalError(absl::StrFormat(
        "coverage: epoch %d: %d training samples read by no rank and %d "
        "read more often than expected (the first: sample %d, read %d times, "
        "expected %d) across %d ranks%s",
        epoch, missing, repeated, first_bad, counts[first_bad],
        expected[first_bad], collective.world_size(),
        resumed_at > 0
            ? absl::StrFormat(" (resumed at position %d)", resumed_at)
            : std::string()));
  }
  if (resumed_at > 0) {
    Say(collective,
        "coverage: epoch %d: the %d rank(s) together read each of the %d "
        "training samples after the resume point (position %d of %d) exactly "
        "once, and none before it\n",
        epoch, collective.world_size(),
        static_cast<int64_t>(counts.size()) - resumed_at, resumed_at,
        counts.size());
  } else {
    Say(collective,
        "coverage: epoch %d: the %d rank(s) together read each of the %d "
        "training samples exactly once\n",
        epoch, collective.world_size(), counts.size());
  }
  return absl::OkStatus();
}

// Returns the checkpoint to resume from after checking that it fits this
// run (shape, seed, SGD options), or the error naming the file.
absl::StatusOr<TrainCheckpoint> OpenCheckpoint(const std::string& dir,
                                               const MlpShape& shape,
                                               uint64_t seed,
                                               const SgdOptions& sgd) {
  PINWHEEL_ASSIGN_OR_RETURN(TrainCheckpoint c, ReadTrainCheckpoint(dir));
  const std::string path = absl::StrCat(dir, "/", kCheckpointFile);
  if (c.shape.inputs != shape.inputs || c.shape.hidden != shape.hidden ||
      c.shape.classes != shape.classes) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--resume: %s holds an MLP %d -> %d -> %d; this run builds %d -> %d "
        "-> %d (same --data and --hidden as the run that wrote it)",
        path, c.shape.inputs, c.shape.hidden, c.shape.classes, shape.inputs,
        shape.hidden, shape.classes));
  }
  if (c.seed != seed || c.sgd.learning_rate != sgd.learning_rate ||
      c.sgd.momentum != sgd.momentum) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--resume: %s was written with --seed=%d --lr=%g (momentum %g); this "
        "run has --seed=%d --lr=%g (momentum %g); an exact resume needs the "
        "same",
        path, c.seed, c.sgd.learning_rate, c.sgd.momentum, seed,
        sgd.learning_rate, sgd.momentum));
  }
  if (c.loader.epoch != c.epoch - 1) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--resume: %s: trainer epoch %d but loader epoch %d (want %d)", path,
        c.epoch, c.loader.epoch, c.epoch - 1));
  }
  return c;
}

absl::Status Train(const LaunchEnvironment& env, Collective& collective) {
  const int epochs = absl::GetFlag(FLAGS_epochs);
  const int64_t batch_size = absl::GetFlag(FLAGS_batch_size);
  const uint64_t seed = absl::GetFlag(FLAGS_seed);
  const int world = collective.world_size();
  if (epochs < 1) {
    return absl::InvalidArgumentError(
        absl::StrFormat("--epochs=%d; must be >= 1", epochs));
  }
  if (batch_size < 1) {
    return absl::InvalidArgumentError(
        absl::StrFormat("--batch_size=%d; must be >= 1", batch_size));
  }
  const std::string checkpoint_dir = absl::GetFlag(FLAGS_checkpoint_dir);
  const int64_t checkpoint_every = absl::GetFlag(FLAGS_checkpoint_every);
  const bool resume = absl::GetFlag(FLAGS_resume);
  const int64_t die_after = absl::GetFlag(FLAGS_die_after_batches);
  if (checkpoint_every < 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--checkpoint_every=%d; must be >= 0 (0: at epoch ends only)",
        checkpoint_every));
  }
  if (checkpoint_dir.empty() && (checkpoint_every > 0 || resume)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--%s needs --checkpoint_dir",
        resume ? "resume"
               : absl::StrCat("checkpoint_every=", checkpoint_every)));
  }
  if (!checkpoint_dir.empty() && collective.rank() == 0) {
    std::error_code error;
    std::filesystem::create_directories(checkpoint_dir, error);
    if (error) {
      return absl::InternalError(
          absl::StrFormat("--checkpoint_dir=%s: cannot create it: %s",
                          checkpoint_dir, error.message()));
    }
  }
  const std::string device_flag = absl::GetFlag(FLAGS_device);
  // auto: each rank its own GPU (cuda:local_rank), else the first GPU.
  Device device;
  if (device_flag == "auto" && world > 1) {
    PINWHEEL_ASSIGN_OR_RETURN(device, env.LocalDevice());
  } else {
    PINWHEEL_ASSIGN_OR_RETURN(device, Device::Parse(device_flag));
  }
  const absl::Time run_start = absl::Now();
  if (world > 1) {
    Say(collective, "ranks: %d (%s); each reads 1/%d of every epoch\n", world,
        env.launcher, world);
  }
  // Rank 0 writes the synthetic data (if needed) before the others open it.
  absl::StatusOr<TrainingData> opened;
  if (collective.rank() == 0) {
    opened = OpenTrainingData(absl::GetFlag(FLAGS_data), /*report=*/true);
  }
  PINWHEEL_RETURN_IF_ERROR(collective.Barrier());
  if (collective.rank() != 0) {
    opened = OpenTrainingData(absl::GetFlag(FLAGS_data), /*report=*/false);
  }
  PINWHEEL_ASSIGN_OR_RETURN(TrainingData data, std::move(opened));
  const int64_t per_rank = (data.train->size() + world - 1) / world;
  if (batch_size > per_rank) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--batch_size=%d is larger than the %d training samples each of the "
        "%d rank(s) reads per epoch (%s)",
        batch_size, per_rank, world, data.train->path()));
  }

  const MlpShape shape{.inputs = data.inputs,
                       .hidden = absl::GetFlag(FLAGS_hidden),
                       .classes = data.classes};
  const SgdOptions sgd{.learning_rate = static_cast<float>(absl::GetFlag(FLAGS_lr)),
                       .momentum = 0.9f};
  // Every rank reads the one checkpoint rank 0 wrote (a shared directory
  // under mpirun).
  std::optional<TrainCheckpoint> resumed;
  if (resume) {
    PINWHEEL_ASSIGN_OR_RETURN(resumed,
                              OpenCheckpoint(checkpoint_dir, shape, seed, sgd));
  }
  std::vector<float> initial = InitialParameters(shape, seed);
  // The model is made before the loaders, so it (and its stream) outlives
  // them and every batch they hand out.
  std::unique_ptr<Mlp> mlp;
  if (device.is_cuda()) {
#if PINWHEEL_HAVE_CUDA
    PINWHEEL_ASSIGN_OR_RETURN(mlp, MlpCuda::Create(device.ordinal(), shape,
                                                   batch_size, initial, sgd));
    Say(collective,
        "device: %s: cuBLAS GEMMs and CUDA kernels on one compute stream\n",
        device.Describe());
    if (world > 1) PINWHEEL_RETURN_IF_ERROR(collective.UseNccl(device.ordinal()));
#else
    return absl::FailedPreconditionError(
        "this trainer was built without CUDA; use --device=cpu");
#endif
  } else {
    PINWHEEL_ASSIGN_OR_RETURN(
        mlp, MlpCpu::Create(shape, batch_size, std::move(initial), sgd));
    if (device_flag == "cpu" || device_flag == "host") {
      Say(collective,
          "device: %s (--device=%s): plain C++ math on the host backend\n",
          device.Describe(), device_flag);
    } else if (!Device::CudaBackendBuilt()) {
      Say(collective,
          "device: no GPU: this build has no CUDA backend; running the same "
          "loop on %s with plain C++ math\n",
          device.Describe());
    } else {
      Say(collective,
          "device: no GPU found; running the same loop on %s with plain C++ "
          "math\n",
          device.Describe());
    }
  }
  if (world > 1) {
    mlp->set_gradient_hook([&collective](float* g, int64_t n, void* stream) {
      return collective.AverageGradient(g, n, stream);
    });
    Say(collective, "data parallel: %s, gradients averaged every step\n",
        collective.Describe());
  }
  const Stream compute = Stream::Borrow(device, mlp->native_stream());
  if (resumed) PINWHEEL_RETURN_IF_ERROR(mlp->RestoreState(resumed->model));

  LoaderBuilder train_builder(data.train);
  train_builder.batch_size(batch_size)
      .shuffle(seed)
      .num_workers(absl::GetFlag(FLAGS_workers))
      .prefetch(absl::GetFlag(FLAGS_prefetch))
      .device(device)
      .distributed(env);  // this rank's shard of every epoch
  if (resumed) train_builder.resume(resumed->loader);
  absl::StatusOr<Loader> built_train = train_builder.Build();
  if (!built_train.ok() && resumed) {
    return absl::Status(
        built_train.status().code(),
        absl::StrFormat("--resume: %s/%s does not fit this run: %s",
                        checkpoint_dir, kCheckpointFile,
                        built_train.status().message()));
  }
  PINWHEEL_ASSIGN_OR_RETURN(Loader train_loader, std::move(built_train));
  // Every rank evaluates the whole held-out set (small) with the same
  // weights; rank 0 reports it.
  PINWHEEL_ASSIGN_OR_RETURN(
      Loader eval_loader,
      LoaderBuilder(data.held_out)
          .batch_size(batch_size)
          .num_workers(absl::GetFlag(FLAGS_workers))
          .prefetch(absl::GetFlag(FLAGS_prefetch))
          .device(device)
          .Build());
  const LoaderStats memory = train_loader.stats();
  Say(collective,
      "model: MLP %d -> %d -> %d, SGD lr %g momentum %g, batch %d%s, %d "
      "epochs, seed %d\n",
      shape.inputs, shape.hidden, shape.classes, sgd.learning_rate,
      sgd.momentum, batch_size,
      world > 1 ? absl::StrFormat(" per rank (%d in all)", batch_size * world)
                : std::string(),
      epochs, seed);
  if (device.is_cuda()) {
    Say(collective,
        "loader: %d workers, prefetch %d; %.1f MiB pinned, %.1f MiB on the "
        "device (training loader)\n",
        absl::GetFlag(FLAGS_workers), absl::GetFlag(FLAGS_prefetch),
        memory.pinned_bytes / 1048576.0, memory.device_bytes / 1048576.0);
  } else {
    Say(collective,
        "loader: %d workers, prefetch %d; %.1f MiB of host slots (host "
        "backend: nothing pinned, no device copy)\n",
        absl::GetFlag(FLAGS_workers), absl::GetFlag(FLAGS_prefetch),
        memory.pinned_bytes / 1048576.0);
  }
  Say(collective, "%s\n", NumaPlacementFor(device).description);

  // Training steps taken so far in the job, and where this run starts.
  int64_t step = 0;
  int64_t first_epoch = 1;       // may be epochs + 1: the job had finished
  int64_t resumed_batches = 0;   // of first_epoch, before this run
  int64_t resumed_position = 0;  // its first global position this run reads
  if (resumed) {
    step = resumed->step;
    first_epoch = resumed->epoch;
    resumed_batches = resumed->batches_in_epoch;
    resumed_position = resumed->loader.position;
    Say(collective,
        "resume: from %s/%s: epoch %d, after %d of its batches (%d steps in "
        "all; written by %d rank(s) at batch size %d; sample %d of %d)\n",
        checkpoint_dir, kCheckpointFile, first_epoch, resumed_batches, step,
        resumed->world_size, resumed->batch_size, resumed_position,
        data.train->size());
  }
  const std::string checkpoint_path =
      absl::StrCat(checkpoint_dir, "/", kCheckpointFile);
  // Rank 0 writes (after the all-reduce every rank holds the same weights,
  // and every rank's loader the same position: Note [exact resume]). Taken
  // after the step that used the last delivered batch.
  auto save_checkpoint = [&](int64_t epoch,
                             int64_t batches_in_epoch) -> absl::Status {
    if (checkpoint_dir.empty() || collective.rank() != 0) {
      return absl::OkStatus();
    }
    TrainCheckpoint c;
    c.shape = shape;
    c.seed = seed;
    c.batch_size = batch_size;
    c.world_size = world;
    c.sgd = sgd;
    c.epoch = epoch;
    c.step = step;
    c.batches_in_epoch = batches_in_epoch;
    PINWHEEL_ASSIGN_OR_RETURN(c.loader, train_loader.Checkpoint());
    // On cuda: copied after a synchronisation of the compute stream.
    PINWHEEL_ASSIGN_OR_RETURN(c.model, mlp->SaveState());
    return WriteFileAtomically(checkpoint_path, c.ToBytes());
  };

  const bool check_coverage = absl::GetFlag(FLAGS_check_coverage);
  double accuracy = 0;
  bool evaluated_any = false;
  if (first_epoch > epochs) {
    Say(collective,
        "resume: the checkpoint is past the last of %d epochs; nothing left "
        "to train\n",
        epochs);
  }
  for (int epoch = static_cast<int>(std::min<int64_t>(first_epoch, epochs + 1));
       epoch <= epochs; ++epoch) {
    const bool resumed_epoch = resumed && epoch == first_epoch;
    int64_t batches_in_epoch = resumed_epoch ? resumed_batches : 0;
    auto after_step = [&]() -> absl::Status {
      ++step;
      ++batches_in_epoch;
      if (checkpoint_every > 0 && step % checkpoint_every == 0) {
        PINWHEEL_RETURN_IF_ERROR(save_checkpoint(epoch, batches_in_epoch));
      }
      if (die_after > 0 && step == die_after) {
        absl::PrintF("die_after_batches: raising SIGKILL after batch %d\n",
                     step);
        std::fflush(stdout);
        std::raise(SIGKILL);
      }
      return absl::OkStatus();
    };
    const LoaderStats before = train_loader.stats();
    const absl::Time start = absl::Now();
    ProgressBar progress(epoch, epochs, train_loader.batches_per_epoch(),
                         world == 1);  // mpirun fakes a terminal
    std::vector<int32_t> coverage;
    if (check_coverage) coverage.assign(data.train->size(), 0);
    PINWHEEL_ASSIGN_OR_RETURN(
        PassCost cost,
        RunEpoch(train_loader, *mlp, compute, Pass::kTrain, &progress,
                 check_coverage ? &coverage : nullptr, after_step));
    // The one host synchronisation of the training pass: the loss sums.
    PINWHEEL_ASSIGN_OR_RETURN(MlpMetrics trained, mlp->TakeMetrics());
    const absl::Duration train_time = absl::Now() - start;
    const LoaderStats after = train_loader.stats();
    progress.Clear();

    const absl::Time eval_start = absl::Now();
    PINWHEEL_RETURN_IF_ERROR(
        RunEpoch(eval_loader, *mlp, compute, Pass::kEvaluate, nullptr, nullptr)
            .status());
    PINWHEEL_ASSIGN_OR_RETURN(MlpMetrics evaluated, mlp->TakeMetrics());
    const absl::Duration eval_time = absl::Now() - eval_start;

    const double secs = Seconds(train_time);
    const double waited =
        Seconds(after.consumer_wait - before.consumer_wait + cost.wait_on);
    // Sums over the ranks: loss, samples, bytes, and each rank's samples/s
    // in its own slot.
    std::vector<double> sums(4 + world, 0.0);
    sums[0] = trained.train_loss_sum;
    sums[1] = static_cast<double>(trained.train_samples);
    sums[2] = static_cast<double>(after.bytes_delivered - before.bytes_delivered);
    sums[3] = 100.0 * waited / secs;
    sums[4 + collective.rank()] = trained.train_samples / secs;
    PINWHEEL_RETURN_IF_ERROR(collective.SumHost(sums));
    if (check_coverage) {
      PINWHEEL_RETURN_IF_ERROR(
          CheckCoverage(collective, coverage, epoch,
                        EpochShuffle(data.train->size(), seed, epoch - 1),
                        resumed_epoch ? resumed_position : 0));
    }
    accuracy = 100.0 * evaluated.eval_correct /
               std::max<int64_t>(evaluated.eval_samples, 1);
    double total_rate = 0;
    std::string per_rank_rates;
    for (int r = 0; r < world; ++r) {
      total_rate += sums[4 + r];
      absl::StrAppendFormat(&per_rank_rates, "%s%.0f", r == 0 ? "" : " ",
                            sums[4 + r]);
    }
    evaluated_any = true;
    Say(collective,
        "epoch %d/%d  train loss %.4f  held-out accuracy %.2f%%  %.0f "
        "samples/s  %.2f GB/s  waited for data %.1f%%  (%.1f s + %.1f s "
        "eval)%s\n",
        epoch, epochs, sums[0] / std::max(sums[1], 1.0), accuracy, total_rate,
        sums[2] / secs / 1e9, sums[3] / world, secs, Seconds(eval_time),
        resumed_epoch && resumed_batches > 0
            ? absl::StrFormat("  [resumed after batch %d: loss over the "
                              "rest]",
                              resumed_batches)
            : std::string());
    if (world > 1) {
      Say(collective, "  per rank samples/s: %s; total %.0f samples/s\n",
          per_rank_rates, total_rate);
    }
    // The epoch's checkpoint: the loader now stands at the next epoch's
    // start.
    PINWHEEL_RETURN_IF_ERROR(save_checkpoint(epoch + 1, 0));
  }
  if (evaluated_any) {
    Say(collective,
        "final held-out accuracy %.2f%% after %d epochs (seed %d) on %s%s; "
        "%.1f s in all\n",
        accuracy, epochs, seed, device.ToString(),
        world > 1 ? absl::StrFormat(" x %d ranks", world) : std::string(),
        Seconds(absl::Now() - run_start));
  }
  const std::string weights_out = absl::GetFlag(FLAGS_weights_out);
  if (!weights_out.empty() && collective.rank() == 0) {
    PINWHEEL_ASSIGN_OR_RETURN(std::vector<float> weights, mlp->Parameters());
    const absl::string_view bytes(reinterpret_cast<const char*>(weights.data()),
                                  weights.size() * sizeof(float));
    PINWHEEL_RETURN_IF_ERROR(WriteFileAtomically(weights_out, bytes));
    Say(collective,
        "final weights: %d floats after %d steps, CRC-32C %08x, in %s\n",
        weights.size(), step, Crc32c(bytes), weights_out);
  }
  return absl::OkStatus();
}

// Prints this program's flags (absl's --help exits 1; asking for help is
// not an error).
void PrintHelp() {
  absl::PrintF("%s\n\nFlags:\n", absl::ProgramUsageMessage());
  std::vector<const absl::CommandLineFlag*> flags;
  for (const auto& [name, flag] : absl::GetAllFlags()) {
    if (absl::StrContains(flag->Filename(), "train_main")) flags.push_back(flag);
  }
  std::sort(flags.begin(), flags.end(), [](const auto* a, const auto* b) {
    return a->Name() < b->Name();
  });
  for (const absl::CommandLineFlag* flag : flags) {
    absl::PrintF("  --%s  %s (default: %s)\n", flag->Name(), flag->Help(),
                 flag->DefaultValue().empty() ? "\"\"" : flag->DefaultValue());
  }
}

}  // namespace
}  // namespace pinwheel::train

int main(int argc, char** argv) {
  // Line-buffered even into a pipe, so context lines come out before an
  // error line on stderr.
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  absl::SetProgramUsageMessage(
      "Trains a one-hidden-layer MLP classifier fed by pinwheel.\n"
      "Example: train --device=cpu --epochs=2\n"
      "Data parallel: mpirun -np N train (one GPU per rank; see the README's "
      "'Scaling out')");
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-help" || arg == "-h" || arg == "--helpfull") {
      pinwheel::train::PrintHelp();
      return 0;
    }
  }
  absl::ParseCommandLine(argc, argv);
  using pinwheel::train::Collective;
  auto fail = [](const std::string& prefix, const absl::Status& status) {
    std::fflush(stdout);
    std::fprintf(stderr, "train: %serror: %s\n", prefix.c_str(),
                 status.ToString().c_str());
    std::fflush(stderr);
  };
  absl::StatusOr<pinwheel::LaunchEnvironment> env =
      pinwheel::LaunchEnvironment::FromProcess();
  if (!env.ok()) {
    fail("", env.status());
    return 1;
  }
  absl::StatusOr<std::unique_ptr<Collective>> collective =
      Collective::ForLaunch(*env, &argc, &argv);
  if (!collective.ok()) {
    fail("", collective.status());
    return 1;
  }
  const absl::Status status = pinwheel::train::Train(*env, **collective);
  if (!status.ok()) {
    fail((*collective)->world_size() > 1
             ? absl::StrCat("rank ", (*collective)->rank(), ": ")
             : std::string(),
         status);
    (*collective)->Abort(1);  // the other ranks may wait in a collective
    return 1;
  }
  return 0;
}
