#include "samples/bench/cuda_rows.h"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_format.h"

#if defined(PINWHEEL_BENCH_CUDA)

#include <algorithm>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <numeric>
#include <optional>
#include <random>
#include <vector>

#include "oneapi/tbb/parallel_for.h"
#include "oneapi/tbb/task_arena.h"

#include "pinning/base/cuda_status.h"
#include "pinning/base/status_macros.h"
#include "samples/bench/nvtx_range.h"
#include "samples/bench/process_usage.h"
#include "transfer/device.h"
#include "transfer/device_batch.h"
#include "transfer/device_transform.h"
#include "transfer/stream.h"
#include "transfer/widen_tokens.h"

namespace pinwheel::bench {
namespace {

absl::Status CublasStatus(cublasStatus_t status, const char* call) {
  if (status == CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
  return absl::InternalError(
      absl::StrFormat("%s failed: %s", call, cublasGetStatusString(status)));
}

#define BENCH_CUBLAS(call) PINWHEEL_RETURN_IF_ERROR(CublasStatus((call), #call))

// RAII owners of the raw CUDA handles these rows use. Errors on release are
// ignored: they can only repeat an error already reported.
struct PinnedFree {
  void operator()(void* p) const { cudaFreeHost(p); }
};
struct DeviceFree {
  void operator()(void* p) const { cudaFree(p); }
};
struct HostFree {
  void operator()(void* p) const { std::free(p); }
};
using PinnedBuffer = std::unique_ptr<void, PinnedFree>;
using DeviceBuffer = std::unique_ptr<void, DeviceFree>;
using HostBuffer = std::unique_ptr<void, HostFree>;

absl::StatusOr<PinnedBuffer> AllocatePinned(size_t bytes) {
  void* p = nullptr;
  PINWHEEL_CUDA_RETURN_IF_ERROR(cudaHostAlloc(&p, bytes, cudaHostAllocDefault));
  return PinnedBuffer(p);
}

absl::StatusOr<DeviceBuffer> AllocateDevice(size_t bytes) {
  void* p = nullptr;
  PINWHEEL_CUDA_RETURN_IF_ERROR(cudaMalloc(&p, bytes));
  return DeviceBuffer(p);
}

absl::StatusOr<HostBuffer> AllocatePageable(size_t bytes) {
  void* p = std::malloc(bytes);
  if (p == nullptr) {
    return absl::ResourceExhaustedError(
        absl::StrFormat("malloc(%d) failed", bytes));
  }
  return HostBuffer(p);
}

class OwnedEvent {
 public:
  static absl::StatusOr<OwnedEvent> Create() {
    cudaEvent_t e = nullptr;
    PINWHEEL_CUDA_RETURN_IF_ERROR(cudaEventCreate(&e));
    return OwnedEvent(e);
  }
  OwnedEvent(OwnedEvent&& o) noexcept : e_(std::exchange(o.e_, nullptr)) {}
  OwnedEvent& operator=(OwnedEvent&&) = delete;
  ~OwnedEvent() {
    if (e_ != nullptr) cudaEventDestroy(e_);
  }
  cudaEvent_t get() const { return e_; }

 private:
  explicit OwnedEvent(cudaEvent_t e) : e_(e) {}
  cudaEvent_t e_;
};

// Returns the milliseconds between two recorded events, after waiting for
// the second.
absl::StatusOr<double> ElapsedMs(const OwnedEvent& start,
                                 const OwnedEvent& end) {
  PINWHEEL_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(end.get()));
  float ms = 0;
  PINWHEEL_CUDA_RETURN_IF_ERROR(
      cudaEventElapsedTime(&ms, start.get(), end.get()));
  return static_cast<double>(ms);
}

class OwnedStream {
 public:
  static absl::StatusOr<OwnedStream> Create() {
    cudaStream_t s = nullptr;
    PINWHEEL_CUDA_RETURN_IF_ERROR(
        cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    return OwnedStream(s);
  }
  OwnedStream(OwnedStream&& o) noexcept : s_(std::exchange(o.s_, nullptr)) {}
  OwnedStream& operator=(OwnedStream&&) = delete;
  ~OwnedStream() {
    if (s_ != nullptr) {
      cudaStreamSynchronize(s_);
      cudaStreamDestroy(s_);
    }
  }
  cudaStream_t get() const { return s_; }

 private:
  explicit OwnedStream(cudaStream_t s) : s_(s) {}
  cudaStream_t s_;
};

// Fills `words` 16-bit words with bf16 values uniform in [-1, 1).
void FillBf16(uint16_t* words, size_t count, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  for (size_t i = 0; i < count; ++i) {
    const float v = uniform(rng);
    uint32_t bits;
    std::memcpy(&bits, &v, sizeof(bits));
    words[i] = static_cast<uint16_t>(bits >> 16);  // truncation to bf16
  }
}

}  // namespace

bool CudaRowsBuilt() { return true; }

absl::StatusOr<std::unique_ptr<ConsumerStream>> ConsumerStream::Create(
    int ordinal) {
  PINWHEEL_CUDA_RETURN_IF_ERROR(cudaSetDevice(ordinal));
  cudaStream_t s = nullptr;
  PINWHEEL_CUDA_RETURN_IF_ERROR(
      cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  return std::unique_ptr<ConsumerStream>(new ConsumerStream(s));
}

ConsumerStream::~ConsumerStream() {
  auto s = static_cast<cudaStream_t>(native_);
  cudaStreamSynchronize(s);
  cudaStreamDestroy(s);
}

absl::Status ConsumerStream::Synchronize() const {
  PINWHEEL_CUDA_RETURN_IF_ERROR(
      cudaStreamSynchronize(static_cast<cudaStream_t>(native_)));
  return absl::OkStatus();
}

struct GemmStep::Impl {
  int n = 0;
  int pairs = 1;
  cublasHandle_t handle = nullptr;
  cudaStream_t bound_stream = nullptr;
  DeviceBuffer a, b, c, d;
  std::vector<std::pair<OwnedEvent, OwnedEvent>> timed;  // EnqueueTimed()'s

  ~Impl() {
    if (handle != nullptr) cublasDestroy(handle);
  }
};

GemmStep::GemmStep(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
GemmStep::~GemmStep() = default;

absl::StatusOr<std::unique_ptr<GemmStep>> GemmStep::Create(int ordinal, int n,
                                                           int sm_count_target,
                                                           int pairs) {
  NvtxRange range("GemmStep::Create");
  if (n < 1 || pairs < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "GemmStep: n = ", n, " and pairs = ", pairs, "; both must be >= 1"));
  }
  PINWHEEL_CUDA_RETURN_IF_ERROR(cudaSetDevice(ordinal));
  auto impl = std::make_unique<Impl>();
  impl->n = n;
  impl->pairs = pairs;
  const size_t count = static_cast<size_t>(n) * static_cast<size_t>(n);
  const size_t bytes = count * sizeof(uint16_t);
  for (DeviceBuffer* m : {&impl->a, &impl->b, &impl->c, &impl->d}) {
    absl::StatusOr<DeviceBuffer> buffer = AllocateDevice(bytes);
    if (!buffer.ok()) return buffer.status();
    *m = *std::move(buffer);
  }
  std::vector<uint16_t> host(count);
  FillBf16(host.data(), count, /*seed=*/1);
  PINWHEEL_CUDA_RETURN_IF_ERROR(
      cudaMemcpy(impl->a.get(), host.data(), bytes, cudaMemcpyHostToDevice));
  FillBf16(host.data(), count, /*seed=*/2);
  PINWHEEL_CUDA_RETURN_IF_ERROR(
      cudaMemcpy(impl->b.get(), host.data(), bytes, cudaMemcpyHostToDevice));
  BENCH_CUBLAS(cublasCreate(&impl->handle));
  if (sm_count_target > 0) {
    BENCH_CUBLAS(cublasSetSmCountTarget(impl->handle, sm_count_target));
  }
  return std::unique_ptr<GemmStep>(new GemmStep(std::move(impl)));
}

size_t GemmStep::device_bytes() const {
  return 4 * static_cast<size_t>(impl_->n) * static_cast<size_t>(impl_->n) *
         sizeof(uint16_t);
}

absl::Status GemmStep::Enqueue(void* stream) {
  Impl& s = *impl_;
  auto cuda_stream = static_cast<cudaStream_t>(stream);
  if (cuda_stream != s.bound_stream) {
    BENCH_CUBLAS(cublasSetStream(s.handle, cuda_stream));
    s.bound_stream = cuda_stream;
  }
  const float alpha = 1.0f;
  const float beta = 0.0f;
  // C = A·B, then D = C·B: the second depends on the first, as consecutive
  // layers of a step do.
  for (int pair = 0; pair < s.pairs; ++pair) {
    BENCH_CUBLAS(cublasGemmEx(s.handle, CUBLAS_OP_N, CUBLAS_OP_N, s.n, s.n, s.n,
                              &alpha, s.a.get(), CUDA_R_16BF, s.n, s.b.get(),
                              CUDA_R_16BF, s.n, &beta, s.c.get(), CUDA_R_16BF,
                              s.n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    BENCH_CUBLAS(cublasGemmEx(s.handle, CUBLAS_OP_N, CUBLAS_OP_N, s.n, s.n, s.n,
                              &alpha, s.c.get(), CUDA_R_16BF, s.n, s.b.get(),
                              CUDA_R_16BF, s.n, &beta, s.d.get(), CUDA_R_16BF,
                              s.n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  }
  return absl::OkStatus();
}

absl::Status GemmStep::EnqueueTimed(void* stream) {
  absl::StatusOr<OwnedEvent> start = OwnedEvent::Create();
  if (!start.ok()) return start.status();
  absl::StatusOr<OwnedEvent> end = OwnedEvent::Create();
  if (!end.ok()) return end.status();
  auto cuda_stream = static_cast<cudaStream_t>(stream);
  PINWHEEL_CUDA_RETURN_IF_ERROR(cudaEventRecord(start->get(), cuda_stream));
  PINWHEEL_RETURN_IF_ERROR(Enqueue(stream));
  PINWHEEL_CUDA_RETURN_IF_ERROR(cudaEventRecord(end->get(), cuda_stream));
  impl_->timed.emplace_back(*std::move(start), *std::move(end));
  return absl::OkStatus();
}

absl::StatusOr<double> GemmStep::QueuedGpuMs() {
  double sum = 0;
  for (const auto& [start, end] : impl_->timed) {
    absl::StatusOr<double> ms = ElapsedMs(start, end);
    if (!ms.ok()) return ms.status();
    sum += *ms;
  }
  return impl_->timed.empty() ? 0 : sum / impl_->timed.size();
}

absl::Status GemmStep::EnqueueFor(const void* /*batch*/, void* stream) {
  return Enqueue(stream);
}

struct WidenStep::Impl {
  int ordinal = 0;
  int64_t batch = 0;
  int64_t seq_len = 0;
  DeviceBuffer input, target;  // int64 [batch, seq_len] each
  // The library's transform (transfer/widen_tokens.h), run by hand on the
  // consumer's stream: its views are built once; only the windows' address
  // changes per batch.
  std::shared_ptr<WidenTokens> widen;
  std::vector<FieldView> windows;  // one: "tokens" [batch, seq_len + 1]
  std::vector<FieldView> outputs;  // "input", "target"
  std::optional<Stream> stream;    // borrowed, for the last native handle
  void* native = nullptr;
};

WidenStep::WidenStep(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
WidenStep::~WidenStep() = default;

absl::StatusOr<std::unique_ptr<WidenStep>> WidenStep::Create(int ordinal,
                                                             int token_bytes,
                                                             bool signed_tokens,
                                                             int64_t batch,
                                                             int64_t seq_len) {
  if ((token_bytes != 1 && token_bytes != 2 && token_bytes != 4 &&
       token_bytes != 8) ||
      batch < 1 || seq_len < 1) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "WidenStep: token_bytes %d must be 1, 2, 4 or 8, batch %d and "
        "seq_len %d >= 1",
        token_bytes, batch, seq_len));
  }
  PINWHEEL_CUDA_RETURN_IF_ERROR(cudaSetDevice(ordinal));
  auto impl = std::make_unique<Impl>();
  impl->ordinal = ordinal;
  impl->batch = batch;
  impl->seq_len = seq_len;
  PINWHEEL_ASSIGN_OR_RETURN(impl->widen, WidenTokens::Create({}));
  const DType dtypes[2][4] = {
      {DType::kUInt8, DType::kUInt16, DType::kUInt32, DType::kUInt64},
      {DType::kInt8, DType::kInt16, DType::kInt32, DType::kInt64}};
  const int width = token_bytes == 1   ? 0
                    : token_bytes == 2 ? 1
                    : token_bytes == 4 ? 2
                                       : 3;
  FieldView tokens;
  tokens.name = "tokens";
  tokens.dtype = dtypes[signed_tokens ? 1 : 0][width];
  tokens.shape = {batch, seq_len + 1};
  tokens.bytes = static_cast<size_t>(batch * (seq_len + 1) * token_bytes);
  impl->windows.push_back(std::move(tokens));
  const size_t bytes =
      static_cast<size_t>(batch) * static_cast<size_t>(seq_len) * 8;
  for (DeviceBuffer* m : {&impl->input, &impl->target}) {
    absl::StatusOr<DeviceBuffer> buffer = AllocateDevice(bytes);
    if (!buffer.ok()) return buffer.status();
    *m = *std::move(buffer);
  }
  for (const auto& [name, buffer] :
       {std::pair{"input", &impl->input}, std::pair{"target", &impl->target}}) {
    FieldView out;
    out.name = name;
    out.dtype = DType::kInt64;
    out.shape = {batch, seq_len};
    out.data = buffer->get();
    out.bytes = bytes;
    impl->outputs.push_back(std::move(out));
  }
  return std::unique_ptr<WidenStep>(new WidenStep(std::move(impl)));
}

absl::Status WidenStep::EnqueueFor(const void* batch, void* stream) {
  Impl& s = *impl_;
  if (!s.stream || s.native != stream) {
    PINWHEEL_ASSIGN_OR_RETURN(Device device, Device::Cuda(s.ordinal));
    s.stream.emplace(Stream::Borrow(device, stream));
    s.native = stream;
  }
  s.windows[0].data = const_cast<void*>(batch);
  return s.widen->Run(
      {.input = s.windows, .output = s.outputs, .samples = s.batch}, *s.stream);
}

absl::StatusOr<std::pair<std::vector<int64_t>, std::vector<int64_t>>>
WidenStep::CopyOut(void* stream) const {
  const Impl& s = *impl_;
  PINWHEEL_CUDA_RETURN_IF_ERROR(
      cudaStreamSynchronize(static_cast<cudaStream_t>(stream)));
  const size_t count =
      static_cast<size_t>(s.batch) * static_cast<size_t>(s.seq_len);
  std::pair<std::vector<int64_t>, std::vector<int64_t>> out;
  out.first.resize(count);
  out.second.resize(count);
  PINWHEEL_CUDA_RETURN_IF_ERROR(cudaMemcpy(out.first.data(), s.input.get(),
                                           count * 8, cudaMemcpyDeviceToHost));
  PINWHEEL_CUDA_RETURN_IF_ERROR(cudaMemcpy(out.second.data(), s.target.get(),
                                           count * 8, cudaMemcpyDeviceToHost));
  return out;
}

size_t WidenStep::device_bytes() const {
  return 2 * static_cast<size_t>(impl_->batch) *
         static_cast<size_t>(impl_->seq_len) * 8;
}

absl::StatusOr<double> GemmStep::TimeAloneMs(void* stream, int steps,
                                             int warmup) {
  NvtxRange range("compute alone");
  auto cuda_stream = static_cast<cudaStream_t>(stream);
  for (int i = 0; i < warmup; ++i) PINWHEEL_RETURN_IF_ERROR(Enqueue(stream));
  PINWHEEL_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(cuda_stream));
  absl::StatusOr<OwnedEvent> start = OwnedEvent::Create();
  if (!start.ok()) return start.status();
  absl::StatusOr<OwnedEvent> end = OwnedEvent::Create();
  if (!end.ok()) return end.status();
  PINWHEEL_CUDA_RETURN_IF_ERROR(cudaEventRecord(start->get(), cuda_stream));
  for (int i = 0; i < steps; ++i) PINWHEEL_RETURN_IF_ERROR(Enqueue(stream));
  PINWHEEL_CUDA_RETURN_IF_ERROR(cudaEventRecord(end->get(), cuda_stream));
  absl::StatusOr<double> ms = ElapsedMs(*start, *end);
  if (!ms.ok()) return ms.status();
  return *ms / steps;
}

struct RawPinnedCopier::Impl {
  int ordinal = 0;
  size_t bytes = 0;
  PinnedBuffer src;
  DeviceBuffer dst;
  std::optional<OwnedStream> stream;
  std::optional<OwnedEvent> start;
  std::optional<OwnedEvent> end;
};

RawPinnedCopier::RawPinnedCopier(std::unique_ptr<Impl> impl)
    : impl_(std::move(impl)) {}
RawPinnedCopier::~RawPinnedCopier() = default;

absl::StatusOr<std::unique_ptr<RawPinnedCopier>> RawPinnedCopier::Create(
    int ordinal, size_t bytes) {
  PINWHEEL_CUDA_RETURN_IF_ERROR(cudaSetDevice(ordinal));
  auto impl = std::make_unique<Impl>();
  impl->ordinal = ordinal;
  impl->bytes = bytes;
  absl::StatusOr<PinnedBuffer> src = AllocatePinned(bytes);
  if (!src.ok()) return src.status();
  impl->src = *std::move(src);
  std::memset(impl->src.get(), 0x5a, bytes);
  absl::StatusOr<DeviceBuffer> dst = AllocateDevice(bytes);
  if (!dst.ok()) return dst.status();
  impl->dst = *std::move(dst);
  absl::StatusOr<OwnedStream> stream = OwnedStream::Create();
  if (!stream.ok()) return stream.status();
  impl->stream.emplace(*std::move(stream));
  absl::StatusOr<OwnedEvent> start = OwnedEvent::Create();
  if (!start.ok()) return start.status();
  impl->start.emplace(*std::move(start));
  absl::StatusOr<OwnedEvent> end = OwnedEvent::Create();
  if (!end.ok()) return end.status();
  impl->end.emplace(*std::move(end));
  return std::unique_ptr<RawPinnedCopier>(new RawPinnedCopier(std::move(impl)));
}

absl::StatusOr<Measurement> RawPinnedCopier::Measure(int batches, int warmup) {
  NvtxRange range("raw pinned copy");
  Impl& s = *impl_;
  PINWHEEL_CUDA_RETURN_IF_ERROR(cudaSetDevice(s.ordinal));
  const cudaStream_t stream = s.stream->get();
  for (int i = 0; i < warmup; ++i) {
    PINWHEEL_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(
        s.dst.get(), s.src.get(), s.bytes, cudaMemcpyHostToDevice, stream));
  }
  PINWHEEL_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  const double cpu0 = ProcessCpuSeconds();
  PINWHEEL_CUDA_RETURN_IF_ERROR(cudaEventRecord(s.start->get(), stream));
  for (int i = 0; i < batches; ++i) {
    PINWHEEL_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(
        s.dst.get(), s.src.get(), s.bytes, cudaMemcpyHostToDevice, stream));
  }
  PINWHEEL_CUDA_RETURN_IF_ERROR(cudaEventRecord(s.end->get(), stream));
  absl::StatusOr<double> ms = ElapsedMs(*s.start, *s.end);
  if (!ms.ok()) return ms.status();

  Measurement m;
  m.batches = batches;
  m.bytes = static_cast<int64_t>(s.bytes) * batches;
  m.wall_seconds = *ms / 1e3;
  m.cpu_seconds = ProcessCpuSeconds() - cpu0;
  m.pinned_bytes = m.pinned_bytes_first = s.bytes;
  m.device_bytes = m.device_bytes_first = s.bytes;
  return m;
}

absl::StatusOr<Measurement> MeasureRawPinnedCopy(int ordinal, size_t bytes,
                                                 int batches, int warmup) {
  absl::StatusOr<std::unique_ptr<RawPinnedCopier>> copier =
      RawPinnedCopier::Create(ordinal, bytes);
  if (!copier.ok()) return copier.status();
  return (*copier)->Measure(batches, warmup);
}

absl::StatusOr<Measurement> MeasurePageableCopy(int ordinal, size_t bytes,
                                                int batches, int warmup) {
  NvtxRange range("pageable copy");
  PINWHEEL_CUDA_RETURN_IF_ERROR(cudaSetDevice(ordinal));
  absl::StatusOr<HostBuffer> src = AllocatePageable(bytes);
  if (!src.ok()) return src.status();
  std::memset(src->get(), 0x5a, bytes);
  absl::StatusOr<DeviceBuffer> dst = AllocateDevice(bytes);
  if (!dst.ok()) return dst.status();

  for (int i = 0; i < warmup; ++i) {
    PINWHEEL_CUDA_RETURN_IF_ERROR(
        cudaMemcpy(dst->get(), src->get(), bytes, cudaMemcpyHostToDevice));
  }
  PINWHEEL_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize());
  const double cpu0 = ProcessCpuSeconds();
  const double t0 = MonotonicSeconds();
  for (int i = 0; i < batches; ++i) {
    PINWHEEL_CUDA_RETURN_IF_ERROR(
        cudaMemcpy(dst->get(), src->get(), bytes, cudaMemcpyHostToDevice));
  }
  PINWHEEL_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize());
  Measurement m;
  m.wall_seconds = MonotonicSeconds() - t0;
  m.cpu_seconds = ProcessCpuSeconds() - cpu0;
  m.batches = batches;
  m.bytes = static_cast<int64_t>(bytes) * batches;
  m.device_bytes = m.device_bytes_first = bytes;
  return m;
}

absl::StatusOr<Measurement> MeasureNaiveLoader(
    const Dataset& dataset, const BatchLayout& layout,
    const NaiveLoaderOptions& options) {
  NvtxRange range("naive loader");
  PINWHEEL_CUDA_RETURN_IF_ERROR(cudaSetDevice(options.ordinal));
  const int64_t batch_size = layout.batch_size();
  const int64_t batches_per_epoch = dataset.size() / batch_size;
  if (batches_per_epoch < 1) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "naive loader: dataset of %d samples holds no batch of %d",
        dataset.size(), batch_size));
  }
  const size_t slot_bytes = layout.slot_bytes();
  const size_t copy_bytes = layout.CopyBytes(batch_size);
  absl::StatusOr<DeviceBuffer> device = AllocateDevice(slot_bytes);
  if (!device.ok()) return device.status();
  auto stream = static_cast<cudaStream_t>(options.stream);
  tbb::task_arena arena(std::max(1, options.collate_threads));

  std::vector<int64_t> order(static_cast<size_t>(dataset.size()));
  int64_t epoch = -1;
  int64_t next_batch = batches_per_epoch;  // forces the first shuffle
  std::vector<absl::Status> read_status(static_cast<size_t>(batch_size));

  // One batch, start to finish, the way a pin_memory loader does it.
  auto one_batch = [&]() -> absl::Status {
    if (next_batch == batches_per_epoch) {
      ++epoch;
      std::iota(order.begin(), order.end(), int64_t{0});
      std::shuffle(
          order.begin(), order.end(),
          std::mt19937_64(options.seed + static_cast<uint64_t>(epoch)));
      next_batch = 0;
    }
    const int64_t* indices = order.data() + next_batch * batch_size;
    ++next_batch;

    absl::StatusOr<HostBuffer> collated = AllocatePageable(slot_bytes);
    if (!collated.ok()) return collated.status();
    auto* slot = static_cast<std::byte*>(collated->get());
    arena.execute([&] {
      tbb::parallel_for(int64_t{0}, batch_size, [&](int64_t position) {
        SampleView view(layout, slot, position, indices[position]);
        read_status[static_cast<size_t>(position)] =
            dataset.Read(indices[position], view);
      });
    });
    for (const absl::Status& s : read_status) PINWHEEL_RETURN_IF_ERROR(s);

    absl::StatusOr<PinnedBuffer> pinned = AllocatePinned(copy_bytes);
    if (!pinned.ok()) return pinned.status();
    std::memcpy(pinned->get(), slot, copy_bytes);
    PINWHEEL_CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(device->get(), pinned->get(), copy_bytes,
                        cudaMemcpyHostToDevice, stream));
    PINWHEEL_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
    pinned->reset();
    collated->reset();
    if (options.step != nullptr) {
      PINWHEEL_RETURN_IF_ERROR(options.step->EnqueueFor(
          static_cast<std::byte*>(device->get()) + layout.field_offset(0),
          options.stream));
    }
    return absl::OkStatus();
  };

  for (int i = 0; i < options.warmup; ++i)
    PINWHEEL_RETURN_IF_ERROR(one_batch());
  PINWHEEL_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  const double cpu0 = ProcessCpuSeconds();
  const double t0 = MonotonicSeconds();
  for (int i = 0; i < options.batches; ++i)
    PINWHEEL_RETURN_IF_ERROR(one_batch());
  PINWHEEL_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  Measurement m;
  m.wall_seconds = MonotonicSeconds() - t0;
  m.cpu_seconds = ProcessCpuSeconds() - cpu0;
  m.batches = options.batches;
  m.bytes = static_cast<int64_t>(copy_bytes) * options.batches;
  m.pinned_bytes = m.pinned_bytes_first = copy_bytes;  // one batch at a time
  m.device_bytes = m.device_bytes_first = slot_bytes;
  return m;
}

}  // namespace pinwheel::bench

#else  // !PINWHEEL_BENCH_CUDA

namespace pinwheel::bench {
namespace {

absl::Status NoCuda() {
  return absl::FailedPreconditionError(
      "this build has no CUDA (PINWHEEL_ENABLE_CUDA=OFF)");
}

}  // namespace

bool CudaRowsBuilt() { return false; }

absl::StatusOr<std::unique_ptr<ConsumerStream>> ConsumerStream::Create(int) {
  return NoCuda();
}
ConsumerStream::~ConsumerStream() = default;
absl::Status ConsumerStream::Synchronize() const { return NoCuda(); }

struct GemmStep::Impl {};
GemmStep::GemmStep(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
GemmStep::~GemmStep() = default;
absl::StatusOr<std::unique_ptr<GemmStep>> GemmStep::Create(int, int, int, int) {
  return NoCuda();
}
absl::Status GemmStep::Enqueue(void*) { return NoCuda(); }
absl::Status GemmStep::EnqueueTimed(void*) { return NoCuda(); }
absl::StatusOr<double> GemmStep::QueuedGpuMs() { return NoCuda(); }
absl::StatusOr<double> GemmStep::TimeAloneMs(void*, int, int) {
  return NoCuda();
}
size_t GemmStep::device_bytes() const { return 0; }
absl::Status GemmStep::EnqueueFor(const void*, void*) { return NoCuda(); }

struct WidenStep::Impl {};
WidenStep::WidenStep(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
WidenStep::~WidenStep() = default;
absl::StatusOr<std::unique_ptr<WidenStep>> WidenStep::Create(int, int, bool,
                                                             int64_t, int64_t) {
  return NoCuda();
}
absl::Status WidenStep::EnqueueFor(const void*, void*) { return NoCuda(); }
absl::StatusOr<std::pair<std::vector<int64_t>, std::vector<int64_t>>>
WidenStep::CopyOut(void*) const {
  return NoCuda();
}
size_t WidenStep::device_bytes() const { return 0; }

struct RawPinnedCopier::Impl {};
RawPinnedCopier::RawPinnedCopier(std::unique_ptr<Impl> impl)
    : impl_(std::move(impl)) {}
RawPinnedCopier::~RawPinnedCopier() = default;
absl::StatusOr<std::unique_ptr<RawPinnedCopier>> RawPinnedCopier::Create(
    int, size_t) {
  return NoCuda();
}
absl::StatusOr<Measurement> RawPinnedCopier::Measure(int, int) {
  return NoCuda();
}
absl::StatusOr<Measurement> MeasureRawPinnedCopy(int, size_t, int, int) {
  return NoCuda();
}
absl::StatusOr<Measurement> MeasurePageableCopy(int, size_t, int, int) {
  return NoCuda();
}
absl::StatusOr<Measurement> MeasureNaiveLoader(const Dataset&,
                                               const BatchLayout&,
                                               const NaiveLoaderOptions&) {
  return NoCuda();
}

}  // namespace pinwheel::bench

#endif  // PINWHEEL_BENCH_CUDA
