#include "samples/bench/workloads.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <sys/stat.h>
#include <unistd.h>
#include <utility>
#include <vector>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"

#include "loader/in_memory_dataset.h"
#include "loader/loader.h"
#include "loader/loader_builder.h"
#include "loader/loader_stats.h"
#include "loader/telemetry/latency_histogram.h"
#include "loader/token_window_dataset.h"
#include "pinning/base/status_macros.h"
#include "samples/bench/nvtx_range.h"
#include "samples/bench/process_usage.h"
#include "samples/bench/thread_pinning.h"
#include "transfer/device_batch.h"
#include "transfer/sample_layout.h"
#include "transfer/stream.h"

namespace pinwheel::bench {
namespace {

// xorshift64*: fast, good enough for filler bytes.
class FillerRandom {
 public:
  explicit FillerRandom(uint64_t seed) : state_(seed * 2654435761u + 1) {}
  uint64_t Next() {
    state_ ^= state_ >> 12;
    state_ ^= state_ << 25;
    state_ ^= state_ >> 27;
    return state_ * 2685821657736338717ull;
  }

 private:
  uint64_t state_;
};

void FillRandomBytes(std::byte* data, size_t bytes, uint64_t seed) {
  FillerRandom random(seed);
  size_t i = 0;
  for (; i + 8 <= bytes; i += 8) {
    const uint64_t word = random.Next();
    std::memcpy(data + i, &word, 8);
  }
  for (; i < bytes; ++i) data[i] = static_cast<std::byte>(random.Next());
}

// The W1 images with Read writing through non-temporal stores (see
// ImageDatasetOptions::streaming_stores). Thread-safe (immutable).
class StreamingImageDataset final : public Dataset {
 public:
  StreamingImageDataset(SampleLayout layout, int64_t size,
                        std::vector<std::vector<std::byte>> fields)
      : layout_(std::move(layout)), size_(size), fields_(std::move(fields)) {}

  int64_t size() const override { return size_; }
  const SampleLayout& layout() const override { return layout_; }

  absl::Status Read(int64_t index, SampleView& out) const override {
    if (index < 0 || index >= size_) {
      return absl::OutOfRangeError(absl::StrFormat(
          "StreamingImageDataset: index %d is outside [0, %d)", index, size_));
    }
    for (int f = 0; f < layout_.num_fields(); ++f) {
      const size_t bytes = layout_.fields()[static_cast<size_t>(f)].bytes();
      absl::Span<std::byte> dst = out.field(f);
      if (dst.size() != bytes) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "StreamingImageDataset: field %d of the sample view has %d bytes, "
            "the dataset's has %d",
            f, dst.size(), bytes));
      }
      const std::byte* src = fields_[static_cast<size_t>(f)].data() +
                             static_cast<size_t>(index) * bytes;
#if defined(__SSE2__)
      StreamingCopy(dst.data(), src, bytes);
#else
      std::memcpy(dst.data(), src, bytes);
#endif
    }
#if defined(__SSE2__)
    _mm_sfence();  // the stores are visible before the slot is handed on
#endif
    return absl::OkStatus();
  }

 private:
  SampleLayout layout_;
  int64_t size_;
  std::vector<std::vector<std::byte>> fields_;
};

// Returns the next batch, starting the next epoch when the current one ends.
// Counts ended epochs in `*epochs_ended` (nullable).
absl::StatusOr<DeviceBatch> NextBatch(Loader& loader, int64_t* epochs_ended) {
  for (int attempt = 0; attempt < 2; ++attempt) {
    PINWHEEL_ASSIGN_OR_RETURN(std::optional<DeviceBatch> batch, loader.Next());
    if (batch.has_value()) return std::move(*batch);
    if (epochs_ended != nullptr) ++*epochs_ended;
  }
  return absl::InternalError("the loader delivered an empty epoch");
}

// The consumer's part of one batch: waits on it, queues `step` (nullable)
// on the consumer stream, and releases it there.
absl::Status UseAndRelease(DeviceBatch& batch, const Stream& consumer,
                           ConsumerStep* step, void* consumer_native) {
  PINWHEEL_RETURN_IF_ERROR(batch.WaitOn(consumer));
  if (step != nullptr) {
    NvtxRange range("compute step");  // w2w: the widening
    PINWHEEL_RETURN_IF_ERROR(
        step->EnqueueFor(batch.field(0).data, consumer_native));
  }
  return batch.Release(consumer);
}

// Takes one batch through the consumer's steps; returns the bytes it moved.
absl::StatusOr<size_t> ConsumeOne(Loader& loader, const Stream& consumer,
                                  ConsumerStep* step, void* consumer_native,
                                  int64_t* epochs_ended) {
  std::optional<NvtxRange> next_range(std::in_place, "Next");
  PINWHEEL_ASSIGN_OR_RETURN(DeviceBatch batch, NextBatch(loader, epochs_ended));
  next_range.reset();
  const size_t bytes = loader.input_layout().CopyBytes(batch.size());
  PINWHEEL_RETURN_IF_ERROR(
      UseAndRelease(batch, consumer, step, consumer_native));
  return bytes;
}

absl::StatusOr<Loader> BuildLoader(std::shared_ptr<const Dataset> dataset,
                                   const PinwheelRunOptions& options) {
  return LoaderBuilder(std::move(dataset))
      .batch_size(options.batch_size)
      .drop_last(true)
      .shuffle(options.seed)
      .num_workers(options.workers)
      .prefetch(options.prefetch)
      .device_buffers(options.device_buffers)
      .timeout(options.workers != 0 ? options.timeout
                                    : absl::InfiniteDuration())
      .device(options.device)
      .gather(options.gather)
      .device_transform(options.device_transform)
      .Build();
}

}  // namespace

#if defined(__SSE2__)
void StreamingCopy(std::byte* dst, const std::byte* src, size_t bytes) {
  const size_t misalignment = reinterpret_cast<uintptr_t>(dst) & 15;
  const size_t head =
      std::min(bytes, misalignment == 0 ? 0 : 16 - misalignment);
  std::memcpy(dst, src, head);
  dst += head;
  src += head;
  bytes -= head;
  for (; bytes >= 64; bytes -= 64, dst += 64, src += 64) {
    const auto* in = reinterpret_cast<const __m128i*>(src);
    auto* out = reinterpret_cast<__m128i*>(dst);
    const __m128i a = _mm_loadu_si128(in);
    const __m128i b = _mm_loadu_si128(in + 1);
    const __m128i c = _mm_loadu_si128(in + 2);
    const __m128i d = _mm_loadu_si128(in + 3);
    _mm_stream_si128(out, a);
    _mm_stream_si128(out + 1, b);
    _mm_stream_si128(out + 2, c);
    _mm_stream_si128(out + 3, d);
  }
  std::memcpy(dst, src, bytes);
}
#endif

void CopyIntoSlot(std::byte* dst, const std::byte* src, size_t bytes,
                  bool streaming) {
#if defined(__SSE2__)
  if (streaming) {
    StreamingCopy(dst, src, bytes);
    return;
  }
#endif
  std::memcpy(dst, src, bytes);
}

bool StreamingStoresAvailable() {
#if defined(__SSE2__)
  return true;
#else
  return false;
#endif
}

absl::StatusOr<std::shared_ptr<const Dataset>> MakeImageDataset(
    const ImageDatasetOptions& options) {
  NvtxRange range("make image dataset");
  if (options.streaming_stores && !StreamingStoresAvailable()) {
    return absl::FailedPreconditionError(
        "streaming (non-temporal) stores need x86 with SSE2; this build has "
        "none");
  }
  PINWHEEL_ASSIGN_OR_RETURN(
      SampleLayout layout,
      SampleLayout::Create(
          {{.name = "image",
            .dtype = DType::kUInt8,
            .shape = {3, options.side, options.side}},
           {.name = "label", .dtype = DType::kInt64, .shape = {}}}));
  const size_t samples = static_cast<size_t>(options.samples);
  std::vector<std::byte> images(samples * layout.fields()[0].bytes());
  FillRandomBytes(images.data(), images.size(), options.seed);
  std::vector<std::byte> labels(samples * sizeof(int64_t));
  for (size_t i = 0; i < samples; ++i) {
    const int64_t label = static_cast<int64_t>(i % 1000);
    std::memcpy(labels.data() + i * sizeof(int64_t), &label, sizeof(label));
  }
  std::vector<std::vector<std::byte>> fields;
  fields.push_back(std::move(images));
  fields.push_back(std::move(labels));
  if (options.streaming_stores) {
    return std::shared_ptr<const Dataset>(
        std::make_shared<StreamingImageDataset>(
            std::move(layout), options.samples, std::move(fields)));
  }
  PINWHEEL_ASSIGN_OR_RETURN(
      std::shared_ptr<InMemoryDataset> dataset,
      InMemoryDataset::CreateOwning(std::move(layout), options.samples,
                                    std::move(fields)));
  return std::shared_ptr<const Dataset>(std::move(dataset));
}

absl::StatusOr<bool> EnsureTokenFile(const std::string& path, int64_t tokens) {
  const int64_t bytes = tokens * static_cast<int64_t>(sizeof(uint16_t));
  struct stat info {};
  if (stat(path.c_str(), &info) == 0 && info.st_size == bytes) return false;

  NvtxRange range("write token file");
  const std::string temporary =
      absl::StrFormat("%s.tmp.%d", path, static_cast<int>(getpid()));
  std::FILE* file = std::fopen(temporary.c_str(), "wb");
  if (file == nullptr) {
    return absl::ErrnoToStatus(
        errno, absl::StrFormat("cannot create token file %s", temporary));
  }
  FillerRandom random(/*seed=*/3);
  std::vector<uint16_t> chunk(1 << 20);
  bool ok = true;
  for (int64_t written = 0; written < tokens && ok;) {
    const int64_t n =
        std::min<int64_t>(tokens - written, static_cast<int64_t>(chunk.size()));
    for (int64_t i = 0; i < n; ++i) {
      chunk[static_cast<size_t>(i)] =
          static_cast<uint16_t>(random.Next() % 50257);  // little-endian host
    }
    ok = std::fwrite(chunk.data(), sizeof(uint16_t), static_cast<size_t>(n),
                     file) == static_cast<size_t>(n);
    written += n;
  }
  ok = (std::fclose(file) == 0) && ok;
  if (!ok || std::rename(temporary.c_str(), path.c_str()) != 0) {
    const int error = errno;
    std::remove(temporary.c_str());
    return absl::ErrnoToStatus(
        error, absl::StrFormat("cannot write token file %s", path));
  }
  return true;
}

absl::Status WriteDocumentOffsets(const std::string& path, int64_t tokens,
                                  int64_t mean_length) {
  const std::string temporary =
      absl::StrFormat("%s.tmp.%d", path, static_cast<int>(getpid()));
  std::FILE* file = std::fopen(temporary.c_str(), "wb");
  if (file == nullptr) {
    return absl::ErrnoToStatus(
        errno, absl::StrFormat("cannot create offsets file %s", temporary));
  }
  FillerRandom random(/*seed=*/5);
  const uint64_t span =
      static_cast<uint64_t>(std::max<int64_t>(1, 2 * mean_length - 1));
  std::vector<uint64_t> offsets = {0};
  while (offsets.back() < static_cast<uint64_t>(tokens)) {
    offsets.push_back(std::min(static_cast<uint64_t>(tokens),
                               offsets.back() + 1 + random.Next() % span));
  }
  bool ok = std::fwrite(offsets.data(), sizeof(uint64_t), offsets.size(),
                        file) == offsets.size();
  ok = (std::fclose(file) == 0) && ok;
  if (!ok || std::rename(temporary.c_str(), path.c_str()) != 0) {
    const int error = errno;
    std::remove(temporary.c_str());
    return absl::ErrnoToStatus(
        error, absl::StrFormat("cannot write offsets file %s", path));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<const Dataset>> OpenTokenDataset(
    const std::string& path, int64_t seq_len, uint64_t seed, bool windows) {
  PINWHEEL_ASSIGN_OR_RETURN(
      std::shared_ptr<TokenWindowDataset> dataset,
      TokenWindowDataset::Open(
          path, {.token_bytes = 2,
                 .seq_len = seq_len,
                 .seed = seed,
                 .output = windows ? TokenOutput::kWindow
                                   : TokenOutput::kInputAndTargetInt64}));
  return std::shared_ptr<const Dataset>(std::move(dataset));
}

absl::StatusOr<Measurement> MeasurePinwheel(
    std::shared_ptr<const Dataset> dataset, const PinwheelRunOptions& options) {
  PINWHEEL_ASSIGN_OR_RETURN(Loader loader,
                            BuildLoader(std::move(dataset), options));
  const Stream consumer =
      Stream::Borrow(loader.device(), options.consumer_stream);
  // After Build(): the loader's own threads exist and stay off the CPU.
  PINWHEEL_ASSIGN_OR_RETURN(std::optional<ConsumerPin> pin,
                            ConsumerPin::Start(options.pin_consumer_cpu));

  Measurement m;
  for (int i = 0; i < std::max(1, options.warmup); ++i) {
    PINWHEEL_ASSIGN_OR_RETURN(size_t bytes,
                              ConsumeOne(loader, consumer, options.step,
                                         options.consumer_stream, nullptr));
    (void)bytes;
  }
  PINWHEEL_RETURN_IF_ERROR(consumer.Synchronize());

  const LoaderStats before = loader.stats();
  // Memory as the timed batches start (auto rows have settled by then:
  // their ring may grow while they settle).
  m.pinned_bytes_first = before.pinned_bytes;
  m.device_bytes_first = before.device_bytes;
  const double cpu0 = ProcessCpuSeconds();
  const double t0 = MonotonicSeconds();
  for (int i = 0; i < options.batches; ++i) {
    PINWHEEL_ASSIGN_OR_RETURN(size_t bytes,
                              ConsumeOne(loader, consumer, options.step,
                                         options.consumer_stream, nullptr));
    m.bytes += static_cast<int64_t>(bytes);
  }
  PINWHEEL_RETURN_IF_ERROR(consumer.Synchronize());
  m.wall_seconds = MonotonicSeconds() - t0;
  m.cpu_seconds = ProcessCpuSeconds() - cpu0;
  const LoaderStats after = loader.stats();

  m.batches = options.batches;
  m.consumer_wait_seconds =
      absl::ToDoubleSeconds(after.consumer_wait - before.consumer_wait);
  m.slot_wait_seconds =
      absl::ToDoubleSeconds(after.ring.time_waited - before.ring.time_waited);
  m.buffer_wait_seconds = absl::ToDoubleSeconds(
      after.transfer.buffer_wait_time - before.transfer.buffer_wait_time);
  m.copy_idle_seconds = absl::ToDoubleSeconds(after.transfer.idle_time -
                                              before.transfer.idle_time);
  m.copy_issue_seconds = absl::ToDoubleSeconds(after.transfer.issue_time -
                                               before.transfer.issue_time);
  const int64_t copied =
      after.transfer.batches_copied - before.transfer.batches_copied;
  if (copied > 0) {
    m.copied_by_submitter = static_cast<double>(after.transfer.inline_copies -
                                                before.transfer.inline_copies) /
                            static_cast<double>(copied);
  }
  m.pinned_bytes = after.pinned_bytes;
  m.device_bytes = after.device_bytes;
  m.order_on_device = after.gather_order_on_device;
  m.pinned_bytes_peak = after.ring.bytes_pinned_peak;
  m.auto_workers = after.auto_tune.workers;
  m.auto_prefetch = after.auto_tune.prefetch;
  m.auto_changes = after.auto_tune.changes;
  m.auto_settled_batch = after.auto_tune.last_change_batch;
  const LatencySummary& wait = after.latency.consumer_wait.total;
  m.consumer_wait_p50_us = absl::ToDoubleMicroseconds(wait.p50);
  m.consumer_wait_p99_us = absl::ToDoubleMicroseconds(wait.p99);
  m.consumer_wait_max_us = absl::ToDoubleMicroseconds(wait.max);
  pin.reset();
  loader.Shutdown();
  return m;
}

absl::StatusOr<MemoryCheck> RunEpochsCheck(
    std::shared_ptr<const Dataset> dataset, const PinwheelRunOptions& options,
    int epochs) {
  NvtxRange range("epochs check");
  PINWHEEL_ASSIGN_OR_RETURN(Loader loader,
                            BuildLoader(std::move(dataset), options));
  const Stream consumer =
      Stream::Borrow(loader.device(), options.consumer_stream);
  MemoryCheck check;
  const double t0 = MonotonicSeconds();
  int64_t epochs_ended = 0;
  PINWHEEL_ASSIGN_OR_RETURN(size_t bytes,
                            ConsumeOne(loader, consumer, options.step,
                                       options.consumer_stream, &epochs_ended));
  (void)bytes;
  PINWHEEL_RETURN_IF_ERROR(consumer.Synchronize());
  check.batches = 1;
  const LoaderStats first = loader.stats();
  check.pinned_bytes_first = first.pinned_bytes;
  check.device_bytes_first = first.device_bytes;
  check.rss_first = ResidentBytes();

  // Reads the rest of epoch 0 and `epochs - 1` more; the nullopt that ends
  // the last one is read explicitly so the loop stops exactly there.
  while (true) {
    PINWHEEL_ASSIGN_OR_RETURN(std::optional<DeviceBatch> batch, loader.Next());
    if (!batch.has_value()) {
      if (++epochs_ended == epochs) break;
      continue;
    }
    PINWHEEL_RETURN_IF_ERROR(
        UseAndRelease(*batch, consumer, options.step, options.consumer_stream));
    ++check.batches;
  }
  PINWHEEL_RETURN_IF_ERROR(consumer.Synchronize());
  check.wall_seconds = MonotonicSeconds() - t0;
  check.epochs = epochs_ended;
  const LoaderStats last = loader.stats();
  check.pinned_bytes_last = last.pinned_bytes;
  check.device_bytes_last = last.device_bytes;
  check.rss_last = ResidentBytes();
  loader.Shutdown();
  return check;
}

}  // namespace pinwheel::bench
