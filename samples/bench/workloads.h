// The benchmark's datasets (W1 images in memory, W2 token windows from a
// file) and the pinwheel measurement loop that every pinwheel row runs:
// build the loader once, warm up, then time Next() → WaitOn(consumer) →
// [W3: compute step; w2w: widening] → Release(consumer), and synchronize
// the consumer at the end. Also the memory check: pinned bytes, device
// bytes and RSS after the first batch and after many epochs.
//
// Example:
//   PINWHEEL_ASSIGN_OR_RETURN(std::shared_ptr<const Dataset> images,
//       MakeImageDataset({.samples = 2048, .side = 224, .seed = 1}));
//   PINWHEEL_ASSIGN_OR_RETURN(Measurement m, MeasurePinwheel(images, {
//       .device = device, .batch_size = 256, .workers = 8, .prefetch = 4}));
#ifndef PINWHEEL_SAMPLES_BENCH_WORKLOADS_H_
#define PINWHEEL_SAMPLES_BENCH_WORKLOADS_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

#include "loader/dataset.h"
#include "loader/loader_options.h"
#include "samples/bench/cuda_rows.h"
#include "samples/bench/report.h"
#include "transfer/device.h"
#include "transfer/device_transform.h"

namespace pinwheel::bench {

struct ImageDatasetOptions {
  int64_t samples = 2048;  // >= 1
  int side = 224;          // images are u8[3, side, side]; >= 1
  uint64_t seed = 1;       // fixes the pixel and label values
  // false: the library's InMemoryDataset (Read is one memcpy a field).
  // true: the benchmark's own dataset of the same bytes whose Read writes
  // each field into the pinned slot with non-temporal (streaming) stores,
  // which bypass the cache and skip reading the destination lines first
  // (x86 with SSE2 only: FailedPrecondition elsewhere). One of issue 12's
  // hypotheses for why a deeper prefetch slows W1.
  bool streaming_stores = false;
};

// Returns whether this build can write with streaming stores.
bool StreamingStoresAvailable();

#if defined(__SSE2__)
// Copies `bytes` from `src` to `dst` with non-temporal stores where `dst` is
// 16-byte aligned (the head before that and the tail under 64 bytes by
// memcpy). The caller fences (_mm_sfence) before publishing `dst`.
void StreamingCopy(std::byte* dst, const std::byte* src, size_t bytes);
#endif

// Copies `bytes` into a pinned slot: StreamingCopy when `streaming` (and
// the build has it; the caller fences), else memcpy.
void CopyIntoSlot(std::byte* dst, const std::byte* src, size_t bytes,
                  bool streaming);

// Returns an in-memory dataset of random u8[3,side,side] "image" and i64
// "label" samples. It owns its arrays (streaming_stores: see above).
[[nodiscard]] absl::StatusOr<std::shared_ptr<const Dataset>> MakeImageDataset(
    const ImageDatasetOptions& options);

// Makes sure `path` holds `tokens` random little-endian u16 tokens (below
// 50257, GPT-2's vocabulary), writing it (through a temporary file and a
// rename) only when it is missing or has another size. Returns whether it
// was written.
[[nodiscard]] absl::StatusOr<bool> EnsureTokenFile(const std::string& path,
                                                   int64_t tokens);

// Writes `path`: document offsets (PackedTokenOptions::offsets_path) over
// `tokens` tokens, documents of lengths drawn uniformly from
// 1..2 * mean_length - 1 with a fixed seed (w2p's documents).
[[nodiscard]] absl::Status WriteDocumentOffsets(const std::string& path,
                                                int64_t tokens,
                                                int64_t mean_length);

// Returns the token-window dataset over a u16 token file: W2's i64 input
// and target, or (windows) w2w's u16[seq_len + 1] windows.
[[nodiscard]] absl::StatusOr<std::shared_ptr<const Dataset>> OpenTokenDataset(
    const std::string& path, int64_t seq_len, uint64_t seed,
    bool windows = false);

struct PinwheelRunOptions {
  Device device;
  int64_t batch_size = 256;
  uint64_t seed = 7;  // shuffle seed
  int workers = 4;
  int prefetch = 4;  // pinned slots
  int device_buffers = 2;
  int warmup = 3;     // untimed batches first; at least 1 is run
  int batches = 100;  // timed batches
  absl::Duration timeout = absl::Seconds(60);  // longest wait for a batch
  // The consumer's stream: a cudaStream_t on the cuda backend (borrowed),
  // nullptr on the host backend (the calling thread).
  void* consumer_stream = nullptr;
  // W3 (the GEMMs) or w2w (the widening): queued on the consumer stream
  // after each batch, given the batch's first field; borrowed, nullable.
  ConsumerStep* step = nullptr;
  // >= 0: the consumer thread runs alone on this CPU from the first warm-up
  // batch to the end of the timed loop, every other thread off it (see
  // ConsumerPin). -1: no pinning.
  int pin_consumer_cpu = -1;
  // The loader's path (LoaderOptions::gather). kOff, the worker path, by
  // default: what every row measured before the gather path existed (with
  // kAuto the library would pick the gather path for W1 and W2). kOn: the
  // ":g" rows.
  GatherMode gather = GatherMode::kOff;
  // The device stage (W4: NormalizeImage to bf16), run after each batch's
  // copy; null: none.
  std::shared_ptr<const DeviceTransform> device_transform;
};

// Builds a loader over `dataset` and times `options.batches` batches.
// Epochs follow one another (a nullopt from Next() starts the next one).
[[nodiscard]] absl::StatusOr<Measurement> MeasurePinwheel(
    std::shared_ptr<const Dataset> dataset, const PinwheelRunOptions& options);

struct MemoryCheck {
  int64_t epochs = 0;
  int64_t batches = 0;
  double wall_seconds = 0;
  size_t pinned_bytes_first = 0;  // as the timed batches start
  size_t pinned_bytes_last = 0;   // after the last epoch
  size_t device_bytes_first = 0;
  size_t device_bytes_last = 0;
  size_t rss_first = 0;  // resident set size, bytes
  size_t rss_last = 0;

  // Returns whether pinned and device bytes stayed the same.
  bool constant() const {
    return pinned_bytes_first == pinned_bytes_last &&
           device_bytes_first == device_bytes_last;
  }
};

// Runs `epochs` whole epochs (options.batches and warmup are ignored) and
// reports memory after the first batch and at the end.
[[nodiscard]] absl::StatusOr<MemoryCheck> RunEpochsCheck(
    std::shared_ptr<const Dataset> dataset, const PinwheelRunOptions& options,
    int epochs);

}  // namespace pinwheel::bench

#endif  // PINWHEEL_SAMPLES_BENCH_WORKLOADS_H_
