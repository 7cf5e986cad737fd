// train: the sample trainer, fed by pinwheel. Trains a one-hidden-layer MLP
// classifier on a record file (fields "x" f32[...] and "y" i64[]) and
// evaluates it on a held-out record file after every epoch.
//
//   build/samples/train/train                  # synthetic data, first GPU or
//   host build/samples/train/train --device=cpu --epochs=2
//   build/samples/train/train --data=DIR       # DIR/train.pwr, DIR/heldout.pwr
//   build/samples/train/train --checkpoint_dir=ckpt --checkpoint_every=100
//   build/samples/train/train --checkpoint_dir=ckpt --resume   # after a kill
//
// On a GPU every step runs on one compute stream that waits on each batch's
// ready event (no host synchronisation per batch; the host waits only at
// the end of an epoch to read the loss and accuracy). Without a GPU the
// same loop runs on the host backend with plain C++ math.
//
// This file reads the flags and wires the run (Train() below); the parts
// live beside it: training_data.h (the record files), mlp.h (the model),
// collective.h (the ranks), epoch_loop.h (the epochs) and
// train_checkpoint.h (the checkpoint file).
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
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
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

#include "loader/atomic_file.h"
#include "loader/launch_environment.h"
#include "loader/loader.h"
#include "loader/loader_builder.h"
#include "loader/numa_placement.h"
#include "pinning/base/crc32c.h"
#include "pinning/base/status_macros.h"
#include "samples/train/collective.h"
#include "samples/train/epoch_loop.h"
#include "samples/train/mlp.h"
#include "samples/train/mlp_cpu.h"
#include "samples/train/train_checkpoint.h"
#include "samples/train/training_data.h"
#include "transfer/device.h"
#include "transfer/stream.h"
#if PINWHEEL_HAVE_CUDA
#include "samples/train/mlp_cuda.h"
#endif

ABSL_FLAG(std::string, data, "",
          "directory holding train.pwr and heldout.pwr (record files with "
          "fields x f32[...] and y i64[]); empty: a synthetic dataset "
          "in " PINWHEEL_TRAIN_DEFAULT_DATA_DIR ", written on first run");
ABSL_FLAG(int, epochs, 3, "passes over the training set");
ABSL_FLAG(int64_t, batch_size, 256, "samples per batch");
// 8 workers, prefetch 8: on the H100 machine (2026-11-24, records read with
// pread) the GPU waited for data 1.3-1.9 % of epochs 2-3 in 9 of 10 epochs
// (one 6.8 %); 4 workers and prefetch 4 left it waiting 1.6-33.5 %, 2
// workers 10-13 % before.
ABSL_FLAG(std::string, workers, "8",
          "loader threads reading samples; auto: the loader sizes them while "
          "it runs (LoaderOptions::kAuto)");
ABSL_FLAG(std::string, prefetch, "8",
          "batches in flight in the loader (pinned slots); auto: sized while "
          "it runs");
ABSL_FLAG(
    int, device_buffers, pinwheel::LoaderOptions().device_buffers,
    "device batch buffers of each loader (LoaderOptions::device_buffers): "
    "batches copied ahead of, or held by, the training step");
ABSL_FLAG(bool, keep_launcher_binding, false,
          "keep the loaders' threads on Open MPI's default one-core binding "
          "(LoaderOptions::keep_launcher_binding); by default they run on "
          "this rank's share of the node");
ABSL_FLAG(std::string, device, "auto",
          "auto (under mpirun/srun/torchrun: cuda:local_rank; else the first "
          "GPU; the host without one), cpu, or cuda:N");
ABSL_FLAG(uint64_t, seed, 1, "fixes the initial weights and the shuffling");
ABSL_FLAG(double, lr, 0.05,
          "SGD learning rate (momentum 0.9) at a global batch (--batch_size "
          "x ranks) of 256 or more; a smaller global batch trains at "
          "lr x batch/256");
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
ABSL_FLAG(std::string, step_log, "",
          "append one line per training step to this file (rank 0): 'step S "
          "epoch E batch B', S counted across epochs and resumes; what "
          "samples/tools/kill_anywhere.py watches to kill the run at a step");
ABSL_FLAG(int64_t, die_after_batches, 0,
          "testing: raise SIGKILL on this process right after training batch "
          "N of the job (counted across epochs and resumes; 0: never)");

namespace pinwheel::train {
namespace {

// The command line, read once (the flags above).
struct TrainFlags {
  std::string data;
  int epochs = 0;
  int64_t batch_size = 0;
  int workers = 0;
  int prefetch = 0;
  int device_buffers = 0;
  bool keep_launcher_binding = false;
  std::string device;
  uint64_t seed = 0;
  double lr = 0;
  int64_t hidden = 0;
  int64_t synthetic_records = 0;
  bool check_coverage = false;
  std::string checkpoint_dir;
  int64_t checkpoint_every = 0;
  bool resume = false;
  std::string weights_out;
  int64_t die_after_batches = 0;
  std::string step_log;
};

// Returns --`name`=`text` as a count: a whole number >= 1, or
// LoaderOptions::kAuto for "auto"; InvalidArgument naming the flag.
absl::StatusOr<int> CountOrAuto(absl::string_view name,
                                absl::string_view text) {
  if (text == "auto") return LoaderOptions::kAuto;
  int value = 0;
  if (!absl::SimpleAtoi(text, &value) || value < 1) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--%s=%s; must be a whole number >= 1 or auto", name, text));
  }
  return value;
}

// Returns the flags after checking those that need no data (the others are
// checked where they are used), or InvalidArgument naming the flag.
absl::StatusOr<TrainFlags> ReadFlags() {
  PINWHEEL_ASSIGN_OR_RETURN(
      const int workers, CountOrAuto("workers", absl::GetFlag(FLAGS_workers)));
  PINWHEEL_ASSIGN_OR_RETURN(
      const int prefetch,
      CountOrAuto("prefetch", absl::GetFlag(FLAGS_prefetch)));
  TrainFlags flags{
      .data = absl::GetFlag(FLAGS_data),
      .epochs = absl::GetFlag(FLAGS_epochs),
      .batch_size = absl::GetFlag(FLAGS_batch_size),
      .workers = workers,
      .prefetch = prefetch,
      .device_buffers = absl::GetFlag(FLAGS_device_buffers),
      .keep_launcher_binding = absl::GetFlag(FLAGS_keep_launcher_binding),
      .device = absl::GetFlag(FLAGS_device),
      .seed = absl::GetFlag(FLAGS_seed),
      .lr = absl::GetFlag(FLAGS_lr),
      .hidden = absl::GetFlag(FLAGS_hidden),
      .synthetic_records = absl::GetFlag(FLAGS_synthetic_records),
      .check_coverage = absl::GetFlag(FLAGS_check_coverage),
      .checkpoint_dir = absl::GetFlag(FLAGS_checkpoint_dir),
      .checkpoint_every = absl::GetFlag(FLAGS_checkpoint_every),
      .resume = absl::GetFlag(FLAGS_resume),
      .weights_out = absl::GetFlag(FLAGS_weights_out),
      .die_after_batches = absl::GetFlag(FLAGS_die_after_batches),
      .step_log = absl::GetFlag(FLAGS_step_log),
  };
  if (flags.epochs < 1) {
    return absl::InvalidArgumentError(
        absl::StrFormat("--epochs=%d; must be >= 1", flags.epochs));
  }
  if (flags.batch_size < 1) {
    return absl::InvalidArgumentError(
        absl::StrFormat("--batch_size=%d; must be >= 1", flags.batch_size));
  }
  if (flags.checkpoint_every < 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--checkpoint_every=%d; must be >= 0 (0: at epoch ends only)",
        flags.checkpoint_every));
  }
  if (flags.checkpoint_dir.empty() &&
      (flags.checkpoint_every > 0 || flags.resume)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--%s needs --checkpoint_dir",
        flags.resume
            ? "resume"
            : absl::StrCat("checkpoint_every=", flags.checkpoint_every)));
  }
  return flags;
}

// Creates --checkpoint_dir (rank 0; the others use the one it made).
absl::Status CreateCheckpointDir(const std::string& dir,
                                 const Collective& collective) {
  if (dir.empty() || collective.rank() != 0) return absl::OkStatus();
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) {
    return absl::InternalError(absl::StrFormat(
        "--checkpoint_dir=%s: cannot create it: %s", dir, error.message()));
  }
  return absl::OkStatus();
}

// Returns the device --device names; auto: each rank its own GPU
// (cuda:local_rank) under a launcher, else the first GPU (or the host).
absl::StatusOr<Device> PickDevice(const std::string& device_flag,
                                  const LaunchEnvironment& env, int world) {
  if (device_flag == "auto" && world > 1) return env.LocalDevice();
  return Device::Parse(device_flag);
}

// Opens the data on every rank: rank 0 first, writing the synthetic data if
// needed, then the others. Checks that a batch fits in a rank's share of an
// epoch.
absl::StatusOr<TrainingData> OpenDataOnEveryRank(const TrainFlags& flags,
                                                 Collective& collective) {
  absl::StatusOr<TrainingData> opened;
  if (collective.rank() == 0) {
    opened = OpenTrainingData(flags.data, flags.synthetic_records,
                              /*report=*/true);
  }
  PINWHEEL_RETURN_IF_ERROR(collective.Barrier());
  if (collective.rank() != 0) {
    opened = OpenTrainingData(flags.data, flags.synthetic_records,
                              /*report=*/false);
  }
  PINWHEEL_ASSIGN_OR_RETURN(TrainingData data, std::move(opened));
  const int world = collective.world_size();
  const int64_t per_rank = (data.train->size() + world - 1) / world;
  if (flags.batch_size > per_rank) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--batch_size=%d is larger than the %d training samples each of the "
        "%d rank(s) reads per epoch (%s)",
        flags.batch_size, per_rank, world, data.train->path()));
  }
  return data;
}

// Returns the model for `device` (cuBLAS and CUDA kernels, or plain C++ on
// the host), its gradients averaged over the ranks when there are several,
// and says which it is.
absl::StatusOr<std::unique_ptr<Mlp>> MakeModel(const TrainFlags& flags,
                                               const Device& device,
                                               const MlpShape& shape,
                                               const SgdOptions& sgd,
                                               Collective& collective) {
  const int world = collective.world_size();
  std::vector<float> initial = InitialParameters(shape, flags.seed);
  std::unique_ptr<Mlp> mlp;
  if (device.is_cuda()) {
#if PINWHEEL_HAVE_CUDA
    PINWHEEL_ASSIGN_OR_RETURN(
        mlp, MlpCuda::Create(device.ordinal(), shape, flags.batch_size, initial,
                             sgd));
    Say(collective,
        "device: %s: cuBLAS GEMMs and CUDA kernels on one compute stream\n",
        device.Describe());
    if (world > 1)
      PINWHEEL_RETURN_IF_ERROR(collective.UseNccl(device.ordinal()));
#else
    return absl::FailedPreconditionError(
        "this trainer was built without CUDA; use --device=cpu");
#endif
  } else {
    PINWHEEL_ASSIGN_OR_RETURN(
        mlp, MlpCpu::Create(shape, flags.batch_size, std::move(initial), sgd));
    if (flags.device == "cpu" || flags.device == "host") {
      Say(collective,
          "device: %s (--device=%s): plain C++ math on the host backend\n",
          device.Describe(), flags.device);
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
  return mlp;
}

// The training loader (this rank's shard of every epoch, from the
// checkpoint's position when resuming) and the held-out one (every rank
// evaluates the whole held-out set, small, with the same weights; rank 0
// reports it).
struct Loaders {
  Loader train;
  Loader held_out;
};

absl::StatusOr<Loaders> OpenLoaders(
    const TrainFlags& flags, const TrainingData& data, const Device& device,
    const LaunchEnvironment& env,
    const std::optional<TrainCheckpoint>& resumed) {
  LoaderBuilder train_builder(data.train);
  train_builder.batch_size(flags.batch_size)
      .shuffle(flags.seed)
      .num_workers(flags.workers)
      .prefetch(flags.prefetch)
      .device_buffers(flags.device_buffers)
      .keep_launcher_binding(flags.keep_launcher_binding)
      .device(device)
      .distributed(env);  // this rank's shard of every epoch
  if (resumed) train_builder.resume(resumed->loader);
  absl::StatusOr<Loader> built_train = train_builder.Build();
  if (!built_train.ok() && resumed) {
    return absl::Status(
        built_train.status().code(),
        absl::StrFormat("--resume: %s/%s does not fit this run: %s",
                        flags.checkpoint_dir, kCheckpointFile,
                        built_train.status().message()));
  }
  PINWHEEL_ASSIGN_OR_RETURN(Loader train_loader, std::move(built_train));
  PINWHEEL_ASSIGN_OR_RETURN(
      Loader eval_loader,
      LoaderBuilder(data.held_out)
          .batch_size(flags.batch_size)
          .num_workers(flags.workers)
          .prefetch(flags.prefetch)
          .device_buffers(flags.device_buffers)
          .keep_launcher_binding(flags.keep_launcher_binding)
          .device(device)
          .Build());
  return Loaders{.train = std::move(train_loader),
                 .held_out = std::move(eval_loader)};
}

// Returns a --workers/--prefetch value as the user typed it.
std::string CountText(int count) {
  return count == LoaderOptions::kAuto ? "auto" : absl::StrCat(count);
}

// Says what this run trains, and with what memory (rank 0).
void SayRun(const TrainFlags& flags, const MlpShape& shape,
            const SgdOptions& sgd, const Device& device,
            const LoaderStats& memory, const Collective& collective) {
  const int world = collective.world_size();
  Say(collective,
      "model: MLP %d -> %d -> %d, SGD lr %g%s momentum %g, batch %d%s, %d "
      "epochs, seed %d\n",
      shape.inputs, shape.hidden, shape.classes, sgd.learning_rate,
      flags.batch_size * world < kLearningRateBatch
          ? absl::StrFormat(" (--lr=%g x %d/%d samples a step)", flags.lr,
                            flags.batch_size * world, kLearningRateBatch)
          : std::string(),
      sgd.momentum, flags.batch_size,
      world > 1
          ? absl::StrFormat(" per rank (%d in all)", flags.batch_size * world)
          : std::string(),
      flags.epochs, flags.seed);
  if (device.is_cuda()) {
    Say(collective,
        "loader: %s workers, prefetch %s; %.1f MiB pinned, %.1f MiB on the "
        "device (training loader)\n",
        CountText(flags.workers), CountText(flags.prefetch),
        memory.pinned_bytes / 1048576.0, memory.device_bytes / 1048576.0);
  } else {
    Say(collective,
        "loader: %s workers, prefetch %s; %.1f MiB of host slots (host "
        "backend: nothing pinned, no device copy)\n",
        CountText(flags.workers), CountText(flags.prefetch),
        memory.pinned_bytes / 1048576.0);
  }
  Say(collective, "%s\n", NumaPlacementFor(device).description);
  Say(collective,
      "'waited for data' below: the share of an epoch the training loop spent "
      "blocked on the loader (in Next(); on the host backend also in the "
      "batch's copy); under about 5%% the model is fed, above it raise "
      "--workers or --prefetch. On a GPU the time in DeviceBatch::WaitOn (a "
      "wait queued on the stream, which blocks when the GPU's queue of work is "
      "full or its driver is busy) is said apart, and so is the time Next() "
      "waited while the copy waited for a device buffer the GPU's steps still "
      "held ('behind device buffers': the GPU is the bound there)\n");
}

// Writes the final weights to --weights_out and says their CRC-32C (rank 0).
absl::Status WriteWeights(const std::string& path, Mlp& mlp, int64_t steps,
                          const Collective& collective) {
  if (path.empty() || collective.rank() != 0) return absl::OkStatus();
  PINWHEEL_ASSIGN_OR_RETURN(std::vector<float> weights, mlp.Parameters());
  const absl::string_view bytes(reinterpret_cast<const char*>(weights.data()),
                                weights.size() * sizeof(float));
  PINWHEEL_RETURN_IF_ERROR(WriteFileAtomically(path, bytes));
  Say(collective,
      "final weights: %d floats after %d steps, CRC-32C %08x, in %s\n",
      weights.size(), steps, Crc32c(bytes), path);
  return absl::OkStatus();
}

// Trains as the flags say: the flags, the device, the data and the
// checkpoint to resume from, the model, the loaders, then the epochs and
// the final weights. Every rank makes the same calls in the same order.
absl::Status Train(const LaunchEnvironment& env, Collective& collective) {
  PINWHEEL_ASSIGN_OR_RETURN(const TrainFlags flags, ReadFlags());
  PINWHEEL_RETURN_IF_ERROR(
      CreateCheckpointDir(flags.checkpoint_dir, collective));
  const int world = collective.world_size();
  PINWHEEL_ASSIGN_OR_RETURN(const Device device,
                            PickDevice(flags.device, env, world));
  const absl::Time run_start = absl::Now();
  if (world > 1) {
    Say(collective, "ranks: %d (%s); each reads 1/%d of every epoch\n", world,
        env.launcher, world);
  }
  PINWHEEL_ASSIGN_OR_RETURN(const TrainingData data,
                            OpenDataOnEveryRank(flags, collective));
  const MlpShape shape{
      .inputs = data.inputs, .hidden = flags.hidden, .classes = data.classes};
  // `sgd` holds the flags (the checkpoint records them); the model steps
  // with `model_sgd`, the rate scaled to the global batch.
  const SgdOptions sgd{.learning_rate = static_cast<float>(flags.lr),
                       .momentum = 0.9f};
  const SgdOptions model_sgd{
      .learning_rate = static_cast<float>(
          ScaledLearningRate(flags.lr, flags.batch_size * world)),
      .momentum = sgd.momentum};
  // Every rank reads the one checkpoint rank 0 wrote (a shared directory
  // under mpirun).
  std::optional<TrainCheckpoint> resumed;
  if (flags.resume) {
    PINWHEEL_ASSIGN_OR_RETURN(
        resumed,
        ReadCheckpointToResume(flags.checkpoint_dir, shape, flags.seed, sgd));
  }
  // The model is made before the loaders, so it (and its stream) outlives
  // them and every batch they hand out.
  PINWHEEL_ASSIGN_OR_RETURN(
      std::unique_ptr<Mlp> mlp,
      MakeModel(flags, device, shape, model_sgd, collective));
  const Stream compute = Stream::Borrow(device, mlp->native_stream());
  if (resumed) PINWHEEL_RETURN_IF_ERROR(mlp->RestoreState(resumed->model));
  PINWHEEL_ASSIGN_OR_RETURN(Loaders loaders,
                            OpenLoaders(flags, data, device, env, resumed));
  SayRun(flags, shape, model_sgd, device, loaders.train.stats(), collective);

  EpochLoop epochs(EpochOptions{.epochs = flags.epochs,
                                .checkpoint_dir = flags.checkpoint_dir,
                                .checkpoint_every = flags.checkpoint_every,
                                .die_after_batches = flags.die_after_batches,
                                .step_log = flags.step_log,
                                .check_coverage = flags.check_coverage},
                   TrainCheckpoint{.shape = shape,
                                   .seed = flags.seed,
                                   .batch_size = flags.batch_size,
                                   .world_size = world,
                                   .sgd = sgd},
                   collective, *mlp, compute, loaders.train, loaders.held_out,
                   data.train->size());
  PINWHEEL_RETURN_IF_ERROR(epochs.Run(resumed));
  if (epochs.accuracy()) {
    Say(collective,
        "final held-out accuracy %.2f%% after %d epochs (seed %d) on %s%s; "
        "%.1f s in all\n",
        *epochs.accuracy(), flags.epochs, flags.seed, device.ToString(),
        world > 1 ? absl::StrFormat(" x %d ranks", world) : std::string(),
        absl::ToDoubleSeconds(absl::Now() - run_start));
  }
  return WriteWeights(flags.weights_out, *mlp, epochs.step(), collective);
}

// Prints this program's flags (absl's --help exits 1; asking for help is
// not an error).
void PrintHelp() {
  absl::PrintF("%s\n\nFlags:\n", absl::ProgramUsageMessage());
  std::vector<const absl::CommandLineFlag*> flags;
  for (const auto& [name, flag] : absl::GetAllFlags()) {
    if (absl::StrContains(flag->Filename(), "train_main"))
      flags.push_back(flag);
  }
  std::sort(flags.begin(), flags.end(),
            [](const auto* a, const auto* b) { return a->Name() < b->Name(); });
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
    if (arg == "--help" || arg == "-help" || arg == "-h" ||
        arg == "--helpfull") {
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
