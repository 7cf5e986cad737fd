#include "samples/bench/multi_rows.h"

#include <algorithm>
#include <barrier>
#include <cstring>
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

// One GPU's part of the staged copy: its slots, stream and events, and the
// threads that fill a slot together, a slice each, when the issuing thread
// (AllAtOnce's) opens the `go` barrier; `done` closes the batch.
class StagedGpu {
 public:
  StagedGpu(const StagedCopyConfig& config, const std::byte* source,
            size_t blocks)
      : config_(config),
        source_(source),
        blocks_(blocks),
        go_(config.threads + 1),
        done_(config.threads + 1) {}
  StagedGpu(const StagedGpu&) = delete;
  StagedGpu& operator=(const StagedGpu&) = delete;
  ~StagedGpu() {
    if (!fillers_.empty()) {
      stop_ = true;
      go_.arrive_and_wait();
      for (std::thread& t : fillers_) t.join();
    }
    for (cudaEvent_t e : events_) cudaEventDestroy(e);
    for (void* slot : slots_) cudaFreeHost(slot);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
    if (device_ != nullptr) cudaFree(device_);
  }

  absl::Status Prepare(const Device& gpu) {
    ordinal_ = gpu.ordinal();
    PINWHEEL_RETURN_IF_ERROR(
        CudaStatus(cudaSetDevice(ordinal_), "cudaSetDevice"));
    for (int s = 0; s < config_.slots; ++s) {
      void* slot = nullptr;
      PINWHEEL_RETURN_IF_ERROR(CudaStatus(
          cudaHostAlloc(&slot, config_.batch_bytes, cudaHostAllocPortable),
          "cudaHostAlloc"));
      slots_.push_back(slot);
      std::memset(slot, 0, config_.batch_bytes);
      cudaEvent_t event = nullptr;
      PINWHEEL_RETURN_IF_ERROR(
          CudaStatus(cudaEventCreateWithFlags(&event, cudaEventDisableTiming),
                     "cudaEventCreateWithFlags"));
      events_.push_back(event);
    }
    PINWHEEL_RETURN_IF_ERROR(
        CudaStatus(cudaMalloc(&device_, config_.batch_bytes), "cudaMalloc"));
    PINWHEEL_RETURN_IF_ERROR(
        CudaStatus(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking),
                   "cudaStreamCreateWithFlags"));
    for (int t = 0; t < config_.threads; ++t) {
      fillers_.emplace_back([this, t] { Fill(t); });
    }
    return Batches(config_.slots);  // untimed: touches every slot and path
  }

  // Fills and copies `count` batches, then waits for the last copy.
  absl::Status Batches(int count) {
    PINWHEEL_RETURN_IF_ERROR(
        CudaStatus(cudaSetDevice(ordinal_), "cudaSetDevice"));
    for (int i = 0; i < count; ++i, ++next_) {
      const size_t s = next_ % slots_.size();
      PINWHEEL_RETURN_IF_ERROR(
          CudaStatus(cudaEventSynchronize(events_[s]), "cudaEventSynchronize"));
      slot_ = static_cast<std::byte*>(slots_[s]);
      block_ = source_ + (next_ % blocks_) * config_.batch_bytes;
      go_.arrive_and_wait();
      done_.arrive_and_wait();
      PINWHEEL_RETURN_IF_ERROR(
          CudaStatus(cudaMemcpyAsync(device_, slot_, config_.batch_bytes,
                                     cudaMemcpyHostToDevice, stream_),
                     "cudaMemcpyAsync"));
      PINWHEEL_RETURN_IF_ERROR(
          CudaStatus(cudaEventRecord(events_[s], stream_), "cudaEventRecord"));
    }
    return CudaStatus(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
  }

 private:
  // Filler `t`: copies its slice of each batch the issuer opens.
  void Fill(int t) {
    const size_t slice =
        (config_.batch_bytes + config_.threads - 1) / config_.threads;
    const size_t begin = std::min(config_.batch_bytes, slice * t);
    const size_t bytes = std::min(config_.batch_bytes - begin, slice);
    for (;;) {
      go_.arrive_and_wait();
      if (stop_) return;
      CopyIntoSlot(slot_ + begin, block_ + begin, bytes, config_.streaming);
#if defined(__SSE2__)
      if (config_.streaming) _mm_sfence();
#endif
      done_.arrive_and_wait();
    }
  }

  const StagedCopyConfig config_;
  const std::byte* const source_;
  const size_t blocks_;
  int ordinal_ = 0;
  std::vector<void*> slots_;
  std::vector<cudaEvent_t> events_;
  void* device_ = nullptr;
  cudaStream_t stream_ = nullptr;
  std::barrier<> go_;
  std::barrier<> done_;
  std::vector<std::thread> fillers_;
  // Set by the issuer before it opens `go_` (the barrier orders them).
  std::byte* slot_ = nullptr;
  const std::byte* block_ = nullptr;
  bool stop_ = false;
  uint64_t next_ = 0;  // batches issued so far
};

}  // namespace
#endif

absl::StatusOr<ProcessShare> StagedCopyAtOnce(const std::vector<Device>& gpus,
                                              const StagedCopyConfig& config,
                                              Rendezvous& rendezvous) {
  if (config.batch_bytes == 0 || config.threads < 1 || config.slots < 1 ||
      config.batches < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "staged copy: batch_bytes, threads, slots and batches must be "
        ">= 1; got ",
        config.batch_bytes, ", ", config.threads, ", ", config.slots, ", ",
        config.batches));
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
  std::vector<std::unique_ptr<StagedGpu>> parts;
  for (size_t i = 0; i < gpus.size(); ++i) {
    parts.push_back(std::make_unique<StagedGpu>(config, source.data(), blocks));
  }
  return AllAtOnce(
      static_cast<int>(gpus.size()), rendezvous, "staged",
      [&](int i) { return parts[i]->Prepare(gpus[i]); },
      [&](int i) -> absl::StatusOr<double> {
        PINWHEEL_RETURN_IF_ERROR(parts[i]->Batches(config.batches));
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
