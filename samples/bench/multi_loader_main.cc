// pinwheel_multi_bench: N loaders at once, the scale-out half of issue 11.
// Two ways to run it, each printing the loaders' aggregate GB/s beside the
// aggregate raw pinned copy (cudaMemcpyAsync from one page-locked buffer,
// all GPUs at once) measured in the same run, on the same GPUs:
//
//   build/samples/bench/pinwheel_multi_bench                  # one process, a
//   loader per GPU mpirun -np 2 build/samples/bench/pinwheel_multi_bench     #
//   a process per GPU (cuda:local_rank)
//
// The dataset is fixed-size samples in memory: Read copies one sample from
// a source buffer (--read=copy, what an in-memory or page-cached mmapped
// dataset costs) or writes nothing (--read=none: the transfer path alone).
// Without GPUs it runs the same loop on the host backend (--device=cpu; no
// raw copy, and the GB/s there mean nothing), which is what ctest runs.
#include <algorithm>
#include <barrier>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

#include "loader/dataset.h"
#include "loader/launch_environment.h"
#include "loader/loader.h"
#include "loader/loader_builder.h"
#include "loader/numa_placement.h"
#include "pinning/base/status_macros.h"
#include "transfer/device.h"
#include "transfer/stream.h"

#if PINWHEEL_BENCH_CUDA
#include <cuda_runtime_api.h>

#include "pinning/base/cuda_status.h"
#endif
#if PINWHEEL_BENCH_HAVE_MPI
#include <mpi.h>
#endif

ABSL_FLAG(std::string, device, "auto",
          "auto: every GPU (or cuda:local_rank under mpirun), else the host; "
          "cpu: host loaders; or a list such as 0,1");
ABSL_FLAG(int, loaders_per_device, 1, "loaders per device (in one process)");
ABSL_FLAG(int, host_loaders, 2, "loaders with --device=cpu");
ABSL_FLAG(int64_t, sample_bytes, 1 << 20, "bytes per sample");
ABSL_FLAG(int64_t, batch_size, 64, "samples per batch");
ABSL_FLAG(int, workers, 4, "worker threads per loader");
ABSL_FLAG(int, prefetch, 4, "pinned slots per loader");
ABSL_FLAG(int, batches, 200, "timed batches per loader");
ABSL_FLAG(int, warmup, 10, "untimed batches per loader first");
ABSL_FLAG(std::string, read, "copy",
          "copy: each Read copies its sample from memory; none: Read writes "
          "nothing (the transfer path alone)");

namespace pinwheel::bench {
namespace {

// Fixed-size samples in memory. Thread-safe.
class InMemorySamples final : public Dataset {
 public:
  InMemorySamples(int64_t sample_bytes, bool copy)
      : copy_(copy), sample_bytes_(sample_bytes) {
    layout_ = *SampleLayout::Create(
        {{.name = "x", .dtype = DType::kUInt8, .shape = {sample_bytes}}});
    // 64 distinct samples (or at least 256 MiB) of source, touched now.
    distinct_ = std::min<int64_t>(
        size(), std::max<int64_t>(64, (int64_t{256} << 20) / sample_bytes));
    if (copy_) {
      source_.resize(static_cast<size_t>(distinct_ * sample_bytes));
      for (size_t i = 0; i < source_.size(); ++i)
        source_[i] = std::byte(i * 131);
    }
  }
  // An epoch of 4096 samples (the samplers hold an epoch's indices); the
  // consumers run across epoch ends.
  int64_t size() const override { return 4096; }
  const SampleLayout& layout() const override { return layout_; }
  absl::Status Read(int64_t index, SampleView& out) const override {
    if (copy_) {
      std::memcpy(out.field(0).data(),
                  source_.data() + (index % distinct_) * sample_bytes_,
                  static_cast<size_t>(sample_bytes_));
    }
    return absl::OkStatus();
  }

 private:
  bool copy_;
  int64_t sample_bytes_;
  int64_t distinct_ = 0;
  SampleLayout layout_;
  std::vector<std::byte> source_;
};

// Where this process's loaders go, and how the processes meet.
struct Plan {
  std::vector<Device> devices;  // one entry per loader
  LaunchEnvironment env;
};

absl::StatusOr<Plan> MakePlan() {
  Plan plan;
  PINWHEEL_ASSIGN_OR_RETURN(plan.env, LaunchEnvironment::FromProcess());
  const std::string flag = absl::GetFlag(FLAGS_device);
  std::vector<Device> per_process;
  if (flag == "cpu" || flag == "host" ||
      (flag == "auto" && Device::CudaDeviceCount() == 0)) {
    for (int i = 0; i < absl::GetFlag(FLAGS_host_loaders); ++i) {
      plan.devices.push_back(Device::Host());
    }
    return plan;
  }
  if (flag == "auto" && plan.env.world_size > 1) {
    PINWHEEL_ASSIGN_OR_RETURN(Device d, plan.env.LocalDevice());
    per_process.push_back(d);
  } else if (flag == "auto") {
    for (int i = 0; i < Device::CudaDeviceCount(); ++i) {
      per_process.push_back(*Device::Cuda(i));
    }
  } else {
    for (absl::string_view part : absl::StrSplit(flag, ',')) {
      int ordinal = 0;
      if (!absl::SimpleAtoi(part, &ordinal)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--device=", flag, ": '", part, "' is not a GPU number"));
      }
      PINWHEEL_ASSIGN_OR_RETURN(Device d, Device::Cuda(ordinal));
      per_process.push_back(d);
    }
  }
  for (const Device& d : per_process) {
    for (int k = 0; k < absl::GetFlag(FLAGS_loaders_per_device); ++k) {
      plan.devices.push_back(d);
    }
  }
  return plan;
}

// Every process's and thread's numbers meet here: bytes summed, the
// longest elapsed time taken (the aggregate is all bytes over the time
// until the last one finished).
struct Totals {
  double bytes = 0;
  double seconds = 0;
};

class Processes {
 public:
  explicit Processes(int world) : world_(world) {}
  int world() const { return world_; }
  int rank() const { return rank_; }
  absl::Status Init(int* argc, char*** argv, const LaunchEnvironment& env) {
    if (world_ == 1) return absl::OkStatus();
#if PINWHEEL_BENCH_HAVE_MPI
    MPI_Init(argc, argv);
    int size = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    initialized_ = true;
    if (size != world_ || rank_ != env.rank) {
      return absl::FailedPreconditionError(
          absl::StrCat("launched as ", env.ToString(), " but MPI sees rank ",
                       rank_, " of ", size));
    }
    return absl::OkStatus();
#else
    (void)argc;
    (void)argv;
    return absl::FailedPreconditionError(absl::StrCat(
        "launched as ", env.ToString(),
        " but built without MPI: cannot add the processes' numbers up"));
#endif
  }
  ~Processes() {
#if PINWHEEL_BENCH_HAVE_MPI
    if (initialized_) MPI_Finalize();
#endif
  }
  void Barrier() {
#if PINWHEEL_BENCH_HAVE_MPI
    if (initialized_) MPI_Barrier(MPI_COMM_WORLD);
#endif
  }
  Totals Reduce(Totals local) {
#if PINWHEEL_BENCH_HAVE_MPI
    if (initialized_) {
      Totals all;
      MPI_Allreduce(&local.bytes, &all.bytes, 1, MPI_DOUBLE, MPI_SUM,
                    MPI_COMM_WORLD);
      MPI_Allreduce(&local.seconds, &all.seconds, 1, MPI_DOUBLE, MPI_MAX,
                    MPI_COMM_WORLD);
      return all;
    }
#endif
    return local;
  }

 private:
  int world_;
  int rank_ = 0;
  bool initialized_ = false;
};

// Runs `fn(i)` on one thread per loader, all released at once after each
// did its `prepare(i)`; returns the bytes they report over the time from the
// release to the last one's end (this process), or the first error.
template <typename Prepare, typename Run>
absl::StatusOr<Totals> AllAtOnce(int n, Processes& processes, Prepare prepare,
                                 Run run) {
  std::vector<absl::Status> errors(n);
  std::vector<double> bytes(n, 0);
  std::vector<absl::Time> ends(n);
  absl::Time start;
  std::barrier ready(n, [&]() noexcept {
    processes.Barrier();  // every process's threads are ready too
    start = absl::Now();
  });
  std::vector<std::thread> threads;
  for (int i = 0; i < n; ++i) {
    threads.emplace_back([&, i] {
      errors[i] = prepare(i);
      ready.arrive_and_wait();  // even after an error: the others wait here
      if (!errors[i].ok()) return;
      absl::StatusOr<double> done = run(i);
      ends[i] = absl::Now();
      if (!done.ok()) {
        errors[i] = done.status();
      } else {
        bytes[i] = *done;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  Totals totals;
  for (int i = 0; i < n; ++i) {
    PINWHEEL_RETURN_IF_ERROR(errors[i]);
    totals.bytes += bytes[i];
    totals.seconds =
        std::max(totals.seconds, absl::ToDoubleSeconds(ends[i] - start));
  }
  return totals;
}

// The raw pinned copy, every GPU of this process at once (one thread each).
absl::StatusOr<Totals> RawPinnedCopy(const std::vector<Device>& devices,
                                     size_t bytes, Processes& processes) {
#if PINWHEEL_BENCH_CUDA
  const int n = static_cast<int>(devices.size());
  struct Buffers {
    void* host = nullptr;
    void* device = nullptr;
    cudaStream_t stream = nullptr;
  };
  std::vector<Buffers> buffers(n);
  const int batches = absl::GetFlag(FLAGS_batches);
  absl::StatusOr<Totals> totals = AllAtOnce(
      n, processes,
      [&](int i) -> absl::Status {
        Buffers& b = buffers[i];
        PINWHEEL_RETURN_IF_ERROR(
            CudaStatus(cudaSetDevice(devices[i].ordinal()), "cudaSetDevice"));
        PINWHEEL_RETURN_IF_ERROR(
            CudaStatus(cudaHostAlloc(&b.host, bytes, cudaHostAllocPortable),
                       "cudaHostAlloc"));
        std::memset(b.host, 1, bytes);
        PINWHEEL_RETURN_IF_ERROR(
            CudaStatus(cudaMalloc(&b.device, bytes), "cudaMalloc"));
        PINWHEEL_RETURN_IF_ERROR(CudaStatus(
            cudaStreamCreateWithFlags(&b.stream, cudaStreamNonBlocking),
            "cudaStreamCreate"));
        for (int w = 0; w < absl::GetFlag(FLAGS_warmup); ++w) {
          cudaMemcpyAsync(b.device, b.host, bytes, cudaMemcpyHostToDevice,
                          b.stream);
        }
        return CudaStatus(cudaStreamSynchronize(b.stream),
                          "cudaStreamSynchronize");
      },
      [&](int i) -> absl::StatusOr<double> {
        Buffers& b = buffers[i];
        for (int k = 0; k < batches; ++k) {
          PINWHEEL_RETURN_IF_ERROR(
              CudaStatus(cudaMemcpyAsync(b.device, b.host, bytes,
                                         cudaMemcpyHostToDevice, b.stream),
                         "cudaMemcpyAsync"));
        }
        PINWHEEL_RETURN_IF_ERROR(CudaStatus(cudaStreamSynchronize(b.stream),
                                            "cudaStreamSynchronize"));
        return static_cast<double>(bytes) * batches;
      });
  for (Buffers& b : buffers) {
    if (b.stream != nullptr) cudaStreamDestroy(b.stream);
    if (b.device != nullptr) cudaFree(b.device);
    if (b.host != nullptr) cudaFreeHost(b.host);
  }
  return totals;
#else
  (void)devices;
  (void)bytes;
  (void)processes;
  return absl::FailedPreconditionError("built without CUDA");
#endif
}

// The loaders, all at once (one consumer thread each): every batch waited on
// and released on the consumer's own stream, no host sync per batch.
absl::StatusOr<Totals> Loaders(const std::vector<Device>& devices,
                               std::shared_ptr<const Dataset> dataset,
                               Processes& processes) {
  const int n = static_cast<int>(devices.size());
  std::vector<std::optional<Loader>> loaders(n);
  std::vector<std::optional<Stream>> streams(n);
  const int batches = absl::GetFlag(FLAGS_batches);
  auto consume = [&](int i, int count) -> absl::StatusOr<double> {
    const LoaderStats before = loaders[i]->stats();
    for (int k = 0; k < count; ++k) {
      PINWHEEL_ASSIGN_OR_RETURN(std::optional<DeviceBatch> batch,
                                loaders[i]->Next());
      if (!batch) {  // an epoch ended; the next Next() starts the next one
        --k;
        continue;
      }
      PINWHEEL_RETURN_IF_ERROR(batch->WaitOn(*streams[i]));
      PINWHEEL_RETURN_IF_ERROR(batch->Release(*streams[i]));
    }
    PINWHEEL_RETURN_IF_ERROR(streams[i]->Synchronize());
    return static_cast<double>(loaders[i]->stats().bytes_delivered -
                               before.bytes_delivered);
  };
  return AllAtOnce(
      n, processes,
      [&](int i) -> absl::Status {
        PINWHEEL_ASSIGN_OR_RETURN(
            Loader loader, LoaderBuilder(dataset)
                               .batch_size(absl::GetFlag(FLAGS_batch_size))
                               .num_workers(absl::GetFlag(FLAGS_workers))
                               .prefetch(absl::GetFlag(FLAGS_prefetch))
                               .device(devices[i])
                               .Build());
        loaders[i].emplace(std::move(loader));
        PINWHEEL_ASSIGN_OR_RETURN(Stream stream, Stream::Create(devices[i]));
        streams[i].emplace(std::move(stream));
        return consume(i, absl::GetFlag(FLAGS_warmup)).status();
      },
      [&](int i) { return consume(i, batches); });
}

std::string Names(const std::vector<Device>& devices) {
  std::vector<std::string> names;
  for (const Device& d : devices) names.push_back(d.ToString());
  return absl::StrJoin(names, ", ");
}

absl::Status Run(int* argc, char*** argv) {
  PINWHEEL_ASSIGN_OR_RETURN(Plan plan, MakePlan());
  Processes processes(plan.env.world_size);
  PINWHEEL_RETURN_IF_ERROR(processes.Init(argc, argv, plan.env));
  const bool root = processes.rank() == 0;
  const std::string read = absl::GetFlag(FLAGS_read);
  if (read != "copy" && read != "none") {
    return absl::InvalidArgumentError(
        absl::StrCat("--read=", read, ": use copy or none"));
  }
  const int64_t sample_bytes = absl::GetFlag(FLAGS_sample_bytes);
  const int64_t batch_size = absl::GetFlag(FLAGS_batch_size);
  if (sample_bytes < 1 || batch_size < 1) {
    return absl::InvalidArgumentError(
        "--sample_bytes and --batch_size must be >= 1");
  }
  const size_t batch_bytes = static_cast<size_t>(sample_bytes * batch_size);
  const bool on_gpus = plan.devices.front().is_cuda();
  const int total_loaders =
      static_cast<int>(plan.devices.size()) * processes.world();
  if (root) {
    absl::PrintF(
        "multi-loader benchmark: %d loader(s) %s; this process: %s\n"
        "  batch %.1f MiB (%d x %d-byte samples), %d workers and %d pinned "
        "slots per loader, read=%s, %d timed batches per loader after %d\n"
        "  %s\n",
        total_loaders,
        processes.world() > 1
            ? absl::StrFormat("in %d processes (%s)", processes.world(),
                              plan.env.launcher)
            : std::string("in one process"),
        Names(plan.devices), batch_bytes / 1048576.0, batch_size, sample_bytes,
        absl::GetFlag(FLAGS_workers), absl::GetFlag(FLAGS_prefetch), read,
        absl::GetFlag(FLAGS_batches), absl::GetFlag(FLAGS_warmup),
        NumaPlacementFor(plan.devices.front()).description);
    std::fflush(stdout);
  }
  std::optional<Totals> raw;
  if (on_gpus) {
    // One raw copy per distinct GPU of this process.
    std::vector<Device> gpus;
    for (const Device& d : plan.devices) {
      if (std::find(gpus.begin(), gpus.end(), d) == gpus.end())
        gpus.push_back(d);
    }
    PINWHEEL_ASSIGN_OR_RETURN(Totals local,
                              RawPinnedCopy(gpus, batch_bytes, processes));
    raw = processes.Reduce(local);
  }
  auto dataset =
      std::make_shared<InMemorySamples>(sample_bytes, read == "copy");
  PINWHEEL_ASSIGN_OR_RETURN(Totals local,
                            Loaders(plan.devices, dataset, processes));
  const Totals loaders = processes.Reduce(local);
  if (!root) return absl::OkStatus();
  const double loader_gbs = loaders.bytes / loaders.seconds / 1e9;
  if (raw) {
    const double raw_gbs = raw->bytes / raw->seconds / 1e9;
    absl::PrintF("  raw pinned copy, all GPUs at once:  aggregate %7.1f GB/s\n",
                 raw_gbs);
    absl::PrintF(
        "  pinwheel loaders, all at once:      aggregate %7.1f GB/s  (%.0f%% "
        "of raw)\n",
        loader_gbs, 100.0 * loader_gbs / raw_gbs);
  } else {
    absl::PrintF(
        "  raw pinned copy: n/a (host backend)\n"
        "  pinwheel loaders, all at once:      aggregate %7.2f GB/s  (host "
        "backend: a smoke run, not a measurement of GPU transfer)\n",
        loader_gbs);
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace pinwheel::bench

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  absl::SetProgramUsageMessage(
      "N loaders at once; aggregate GB/s beside the aggregate raw pinned "
      "copy.\n"
      "  pinwheel_multi_bench              one process, a loader per GPU\n"
      "  mpirun -np N pinwheel_multi_bench one process per GPU");
  absl::ParseCommandLine(argc, argv);
  const absl::Status status = pinwheel::bench::Run(&argc, &argv);
  if (!status.ok()) {
    std::fflush(stdout);
    std::fprintf(stderr, "pinwheel_multi_bench: error: %s\n",
                 status.ToString().c_str());
    return 1;
  }
  return 0;
}
