#include "samples/bench/multi_rows.h"

#include <algorithm>
#include <barrier>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

#include "loader/loader.h"
#include "loader/loader_builder.h"
#include "pinning/base/status_macros.h"
#include "samples/bench/process_usage.h"
#include "samples/bench/workloads.h"
#include "transfer/device_batch.h"
#include "transfer/stream.h"

#if PINWHEEL_BENCH_CUDA
#include <cuda_runtime_api.h>

#include "pinning/base/cuda_status.h"
#endif

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace pinwheel::bench {
namespace {

// Runs `prepare(i)` then `run(i)` on one thread per i < n; the runs start
// together once every thread of every process prepared (the barrier's
// completion meets the other processes). `run` returns the batches it
// timed. Returns this process's share, or the first error (an error in
// one process's prepare still meets the others, then fails this one).
template <typename Prepare, typename Run>
absl::StatusOr<ProcessShare> AllAtOnce(int n, Rendezvous& rendezvous,
                                       absl::string_view tag, Prepare prepare,
                                       Run run) {
  std::vector<absl::Status> errors(n);
  std::vector<double> batches(n, 0);
  std::vector<double> ends(n, 0);
  absl::Status meeting;
  double start = 0;
  double cpu_start = 0;
  std::barrier ready(n, [&]() noexcept {
    meeting = rendezvous.Barrier(tag);
    start = MonotonicSeconds();
    cpu_start = ProcessCpuSeconds();
  });
  std::vector<std::thread> threads;
  for (int i = 0; i < n; ++i) {
    threads.emplace_back([&, i] {
      errors[i] = prepare(i);
      ready.arrive_and_wait();  // even after an error: the others wait here
      if (!errors[i].ok() || !meeting.ok()) return;
      absl::StatusOr<double> done = run(i);
      ends[i] = MonotonicSeconds();
      if (!done.ok()) {
        errors[i] = done.status();
      } else {
        batches[i] = *done;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  const double cpu_end = ProcessCpuSeconds();
  PINWHEEL_RETURN_IF_ERROR(meeting);
  ProcessShare share;
  for (int i = 0; i < n; ++i) {
    PINWHEEL_RETURN_IF_ERROR(errors[i]);
    share.batches += batches[i];
    share.seconds = std::max(share.seconds, ends[i] - start);
  }
  share.cpu_seconds = cpu_end - cpu_start;
  return share;
}

absl::Status InDevice(absl::Status status, const Device& device) {
  if (status.ok()) return status;
  return absl::Status(status.code(),
                      absl::StrCat("the loader on ", device.ToString(), ": ",
                                   status.message()));
}

}  // namespace

bool RawCopyBuilt() {
#if PINWHEEL_BENCH_CUDA
  return true;
#else
  return false;
#endif
}

absl::StatusOr<ProcessShare> RawCopyAtOnce(const std::vector<Device>& gpus,
                                           size_t bytes, int batches,
                                           Rendezvous& rendezvous) {
#if PINWHEEL_BENCH_CUDA
  const int n = static_cast<int>(gpus.size());
  struct Buffers {
    void* host = nullptr;
    void* device = nullptr;
    cudaStream_t stream = nullptr;
  };
  std::vector<Buffers> buffers(n);
  absl::StatusOr<ProcessShare> share = AllAtOnce(
      n, rendezvous, "raw",
      [&](int i) -> absl::Status {
        Buffers& b = buffers[i];
        PINWHEEL_RETURN_IF_ERROR(
            CudaStatus(cudaSetDevice(gpus[i].ordinal()), "cudaSetDevice"));
        PINWHEEL_RETURN_IF_ERROR(
            CudaStatus(cudaHostAlloc(&b.host, bytes, cudaHostAllocPortable),
                       "cudaHostAlloc"));
        std::memset(b.host, 1, bytes);
        PINWHEEL_RETURN_IF_ERROR(
            CudaStatus(cudaMalloc(&b.device, bytes), "cudaMalloc"));
        PINWHEEL_RETURN_IF_ERROR(CudaStatus(
            cudaStreamCreateWithFlags(&b.stream, cudaStreamNonBlocking),
            "cudaStreamCreateWithFlags"));
        // One untimed copy: the first touches the driver's paths.
        PINWHEEL_RETURN_IF_ERROR(
            CudaStatus(cudaMemcpyAsync(b.device, b.host, bytes,
                                       cudaMemcpyHostToDevice, b.stream),
                       "cudaMemcpyAsync"));
        return CudaStatus(cudaStreamSynchronize(b.stream),
                          "cudaStreamSynchronize");
      },
      [&](int i) -> absl::StatusOr<double> {
        Buffers& b = buffers[i];
        PINWHEEL_RETURN_IF_ERROR(
            CudaStatus(cudaSetDevice(gpus[i].ordinal()), "cudaSetDevice"));
        for (int k = 0; k < batches; ++k) {
          PINWHEEL_RETURN_IF_ERROR(
              CudaStatus(cudaMemcpyAsync(b.device, b.host, bytes,
                                         cudaMemcpyHostToDevice, b.stream),
                         "cudaMemcpyAsync"));
        }
        PINWHEEL_RETURN_IF_ERROR(CudaStatus(cudaStreamSynchronize(b.stream),
                                            "cudaStreamSynchronize"));
        return static_cast<double>(batches);
      });
  for (Buffers& b : buffers) {
    if (b.stream != nullptr) cudaStreamDestroy(b.stream);
    if (b.device != nullptr) cudaFree(b.device);
    if (b.host != nullptr) cudaFreeHost(b.host);
  }
  return share;
#else
  (void)gpus;
  (void)bytes;
  (void)batches;
  (void)rendezvous;
  return absl::FailedPreconditionError(
      "the raw pinned copy needs a build with CUDA");
#endif
}

#if PINWHEEL_BENCH_CUDA
namespace {

// One copying thread of the staged copy: two page-locked buffers of a batch
// each, a device buffer and a stream of its own. It fills one buffer while
// the other's DMA runs, with nothing shared with the other threads but the
// source (no barrier, no queue: the least a worker path can do).
class StagedThread {
 public:
  StagedThread(const StagedCopyConfig& config, const std::byte* source,
               size_t blocks, size_t first_block)
      : config_(config), source_(source), blocks_(blocks), next_(first_block) {}
  StagedThread(const StagedThread&) = delete;
  StagedThread& operator=(const StagedThread&) = delete;
  ~StagedThread() {
    for (cudaEvent_t e : events_) {
      if (e != nullptr) cudaEventDestroy(e);
    }
    for (void* b : buffers_) {
      if (b != nullptr) cudaFreeHost(b);
    }
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
    if (device_ != nullptr) cudaFree(device_);
  }

  // Allocates and copies two untimed batches (every buffer and path
  // touched). The caller set the thread's device.
  absl::Status Prepare() {
    for (int b = 0; b < 2; ++b) {
      PINWHEEL_RETURN_IF_ERROR(
          CudaStatus(cudaHostAlloc(&buffers_[b], config_.batch_bytes,
                                   cudaHostAllocPortable),
                     "cudaHostAlloc"));
      std::memset(buffers_[b], 0, config_.batch_bytes);
      PINWHEEL_RETURN_IF_ERROR(CudaStatus(
          cudaEventCreateWithFlags(&events_[b], cudaEventDisableTiming),
          "cudaEventCreateWithFlags"));
    }
    PINWHEEL_RETURN_IF_ERROR(
        CudaStatus(cudaMalloc(&device_, config_.batch_bytes), "cudaMalloc"));
    PINWHEEL_RETURN_IF_ERROR(
        CudaStatus(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking),
                   "cudaStreamCreateWithFlags"));
    return Batches(2);
  }

  // Fills and copies `count` batches, then waits for the last copy.
  absl::Status Batches(int count) {
    for (int i = 0; i < count; ++i, ++issued_) {
      const size_t b = issued_ % 2;
      PINWHEEL_RETURN_IF_ERROR(
          CudaStatus(cudaEventSynchronize(events_[b]), "cudaEventSynchronize"));
      auto* buffer = static_cast<std::byte*>(buffers_[b]);
      CopyIntoSlot(buffer, source_ + (next_++ % blocks_) * config_.batch_bytes,
                   config_.batch_bytes, config_.streaming);
#if defined(__SSE2__)
      if (config_.streaming) _mm_sfence();
#endif
      PINWHEEL_RETURN_IF_ERROR(
          CudaStatus(cudaMemcpyAsync(device_, buffer, config_.batch_bytes,
                                     cudaMemcpyHostToDevice, stream_),
                     "cudaMemcpyAsync"));
      PINWHEEL_RETURN_IF_ERROR(
          CudaStatus(cudaEventRecord(events_[b], stream_), "cudaEventRecord"));
    }
    return CudaStatus(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
  }

 private:
  const StagedCopyConfig config_;
  const std::byte* const source_;
  const size_t blocks_;
  size_t next_;  // the source block the next batch reads
  void* buffers_[2] = {nullptr, nullptr};
  cudaEvent_t events_[2] = {nullptr, nullptr};
  void* device_ = nullptr;
  cudaStream_t stream_ = nullptr;
  uint64_t issued_ = 0;
};

// Runs `work(t)` on `n` threads of the device `ordinal` and returns the
// first error.
template <typename Work>
absl::Status OnThreads(int n, int ordinal, Work work) {
  std::vector<absl::Status> errors(n);
  std::vector<std::thread> threads;
  for (int t = 0; t < n; ++t) {
    threads.emplace_back([&, t] {
      errors[t] = CudaStatus(cudaSetDevice(ordinal), "cudaSetDevice");
      if (errors[t].ok()) errors[t] = work(t);
    });
  }
  for (std::thread& t : threads) t.join();
  for (absl::Status& e : errors) PINWHEEL_RETURN_IF_ERROR(e);
  return absl::OkStatus();
}

}  // namespace
#endif

absl::StatusOr<ProcessShare> StagedCopyAtOnce(const std::vector<Device>& gpus,
                                              const StagedCopyConfig& config,
                                              Rendezvous& rendezvous) {
  if (config.batch_bytes == 0 || config.threads < 1 || config.batches < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "staged copy: batch_bytes, threads and batches must be >= 1; got ",
        config.batch_bytes, ", ", config.threads, ", ", config.batches));
  }
#if PINWHEEL_BENCH_CUDA
  // The source, shared by this process's GPUs as a dataset is; each page
  // written once first so the copies read memory, not the zero page.
  const size_t blocks = std::max<size_t>(
      2, (config.source_bytes + config.batch_bytes - 1) / config.batch_bytes);
  std::vector<std::byte> source(blocks * config.batch_bytes);
  for (size_t i = 0; i < source.size(); i += 4096) {
    source[i] = static_cast<std::byte>(i / 4096);
  }
  // Per GPU, `threads` copying threads; the GPU's batches split among them.
  const int n = static_cast<int>(gpus.size());
  const int threads = config.threads;
  std::vector<std::vector<std::unique_ptr<StagedThread>>> parts(n);
  for (int i = 0; i < n; ++i) {
    for (int t = 0; t < threads; ++t) {
      parts[i].push_back(std::make_unique<StagedThread>(
          config, source.data(), blocks,
          static_cast<size_t>(t) * blocks / threads));
    }
  }
  auto share_of = [&](int t) {
    return config.batches / threads + (t < config.batches % threads ? 1 : 0);
  };
  return AllAtOnce(
      n, rendezvous, "staged",
      [&](int i) {
        return OnThreads(threads, gpus[i].ordinal(),
                         [&](int t) { return parts[i][t]->Prepare(); });
      },
      [&](int i) -> absl::StatusOr<double> {
        PINWHEEL_RETURN_IF_ERROR(OnThreads(
            threads, gpus[i].ordinal(),
            [&](int t) { return parts[i][t]->Batches(share_of(t)); }));
        return static_cast<double>(config.batches);
      });
#else
  (void)gpus;
  (void)rendezvous;
  return absl::FailedPreconditionError(
      "the staged copy needs a build with CUDA");
#endif
}

absl::StatusOr<ProcessShare> LoadersAtOnce(
    const std::vector<Device>& devices, std::shared_ptr<const Dataset> dataset,
    const LoaderRowConfig& config, Rendezvous& rendezvous) {
  const int n = static_cast<int>(devices.size());
  std::vector<std::optional<Loader>> loaders(n);
  std::vector<std::optional<Stream>> streams(n);
  auto consume = [&](int i, int count) -> absl::StatusOr<double> {
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
    return static_cast<double>(count);
  };
  absl::StatusOr<ProcessShare> share = AllAtOnce(
      n, rendezvous, config.gather == GatherMode::kOn ? "gather" : "workers",
      [&](int i) -> absl::Status {
        absl::StatusOr<Loader> loader =
            LoaderBuilder(dataset)
                .batch_size(config.batch_size)
                .drop_last(true)
                .shuffle(config.seed)
                .num_workers(config.workers)
                .prefetch(config.prefetch)
                .keep_launcher_binding(config.keep_launcher_binding)
                .device_buffers(config.device_buffers)
                .gather(config.gather)
                .device(devices[i])
                .Build();
        PINWHEEL_RETURN_IF_ERROR(InDevice(loader.status(), devices[i]));
        loaders[i].emplace(*std::move(loader));
        PINWHEEL_ASSIGN_OR_RETURN(Stream stream, Stream::Create(devices[i]));
        streams[i].emplace(std::move(stream));
        return InDevice(consume(i, std::max(1, config.warmup)).status(),
                        devices[i]);
      },
      [&](int i) -> absl::StatusOr<double> {
        absl::StatusOr<double> done = consume(i, config.batches);
        PINWHEEL_RETURN_IF_ERROR(InDevice(done.status(), devices[i]));
        return done;
      });
  for (std::optional<Loader>& loader : loaders) {
    if (loader) loader->Shutdown();
  }
  return share;
}

}  // namespace pinwheel::bench
