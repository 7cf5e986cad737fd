// W4's decode rows: the image folder through a loader on the GPU with
// decode = cpu or gpu (loader/image/image_pipeline.h), batches of
// RandomResizedCrop(size) + flip delivered as normalised bf16 CHW, timed
// from the consumer's side: img/s, the process's CPU time (all threads),
// the cores that makes, and the GPU decoder's backend.
//
// Kept apart from the benchmark's other workloads (another change adds
// W4's CPU rows to pinwheel_bench); wire it in by calling
// MeasureW4Decode() for decode = cpu and gpu at the row's worker counts
// and printing FormatW4DecodeRow(), or run pinwheel_w4_decode.
//
// Example:
//   PINWHEEL_ASSIGN_OR_RETURN(W4DecodeRow row, MeasureW4Decode(
//       {.root = "/tmp/w4", .decode = ImageDecode::kGpu, .workers = 4}));
//   std::puts(FormatW4DecodeRow(row).c_str());
#ifndef PINWHEEL_SAMPLES_BENCH_W4_DECODE_H_
#define PINWHEEL_SAMPLES_BENCH_W4_DECODE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

#include "pinwheel/pinwheel.h"

namespace pinwheel::bench {

struct W4DecodeOptions {
  std::string root;  // an ImageFolder of JPEGs (make_images' output)
  // Or tar shards (paths or URLs: folder_to_shards.py's output, served),
  // read as a TarShardDataset with shuffle_shards; `root` is then unused.
  std::vector<std::string> shards;
  // With shards: > 0 reads them through a CachedStore of this many bytes
  // that the loader plans (PlannedTarShards), in memory or in cache_dir.
  int64_t cache_bytes = 0;
  std::string cache_dir;
  // With shards: TarShardOptions' read_chunk_bytes and read_ahead_chunks
  // (remote shards; 0 and -1: the defaults).
  int64_t read_chunk_bytes = 0;
  int read_ahead_chunks = -1;
  // With remote shards: StoreOptions::io_threads (0: the default).
  int io_threads = 0;
  ImageDecode decode = ImageDecode::kGpu;
  int workers = 4;
  // Pinned slots; 0: for tar shards max(4, workers), else the loader's
  // default.
  int prefetch = 0;
  int batch_size = 256;
  int size = 224;
  int warmup_batches = 5;
  int batches = 40;  // timed, after the warm-up (epochs wrap)
  uint64_t seed = 1;
  // > 0: a compute step after each batch, on the consumer stream (W3's
  // GemmStep: compute_gemm_pairs pairs of bf16 GEMMs of this side,
  // samples/bench/cuda_rows.h), and the row reports the step time against
  // the step alone.
  int compute_gemm_n = 0;
  // > 0: the GEMMs use at most this many SMs (cublasSetSmCountTarget).
  int compute_sm_count = 0;
  int compute_gemm_pairs = 1;  // pairs of GEMMs a step
  // The GPU path's decoder and stream priority (ImagePipelineOptions).
  JpegDecodeBackend gpu_backend = JpegDecodeBackend::kAuto;
  JpegDecodePriority gpu_priority = JpegDecodePriority::kHigh;
  int gpu_check_threads = 8;
};

struct W4DecodeRow {
  W4DecodeOptions options;
  std::string decode_report;  // which path, backend, memory
  // The GPU path: per batch of the timed part, the decode's host ms
  // (checks, waits, nvJPEG calls) and GPU ms; empty on the CPU path.
  std::string decode_timing;
  std::string source;           // "folder", "3 tar shards (http://...)"
  std::string cache_report;     // with a cache: its counters after the row
  int64_t images = 0;           // timed
  double seconds = 0;           // wall, timed part
  double cpu_seconds = 0;       // the process's user + system, timed part
  double compute_alone_ms = 0;  // compute_gemm_n > 0: one step alone
  // compute_gemm_n > 0: the GEMMs' mean GPU time a step beside the loader
  // (GemmStep::QueuedGpuMs): near compute_alone_ms when a longer step came
  // from waiting for data, longer when the loader's GPU work slowed them.
  double compute_gpu_ms = 0;
  double images_per_second() const { return images / seconds; }
  double cores() const { return cpu_seconds / seconds; }
  // Milliseconds a batch (a step, with a compute step).
  double step_ms() const {
    return seconds * 1000 / static_cast<double>(images / options.batch_size);
  }
  // With a compute step: the step time with the loader over the step alone
  // minus one (0.01 = 1 % slower).
  double step_overhead() const { return step_ms() / compute_alone_ms - 1; }
};

// Builds the pipeline and loader on the first GPU (on the host backend
// when there is none: decode = cpu only), runs the warm-up, then times
// `batches` batches: Next() -> WaitOn(consumer) -> Release(consumer), the
// consumer stream synchronised at the end. FailedPrecondition for decode =
// gpu or a compute step without a GPU.
[[nodiscard]] absl::StatusOr<W4DecodeRow> MeasureW4Decode(
    const W4DecodeOptions& options);

// "w4 decode=gpu workers=4: 9123 img/s, 1.9 cores, 4801 img/s per core".
std::string FormatW4DecodeRow(const W4DecodeRow& row);

}  // namespace pinwheel::bench

#endif  // PINWHEEL_SAMPLES_BENCH_W4_DECODE_H_
