#include "samples/bench/w4_decode.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <sys/resource.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"

#include "loader/storage/cache/cached_store.h"
#include "loader/storage/cache/planned_tar_shards.h"
#include "loader/storage/open_object_store.h"
#include "samples/bench/cuda_rows.h"

#if defined(PINWHEEL_HAVE_NVJPEG)
#include "transfer/jpeg/jpeg_decode_transform.h"
#endif

namespace pinwheel::bench {
namespace {

double ProcessCpuSeconds() {
  rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  auto seconds = [](const timeval& t) { return t.tv_sec + t.tv_usec * 1e-6; };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

// The loader of the row's source: the folder, shuffled, or the tar shards
// (through a planned cache when asked).
struct Source {
  std::optional<Loader> loader;
  std::shared_ptr<const DeviceTransform> transform;
  std::string decode_report;
  std::string description;
  std::shared_ptr<CachedStore> cache;
};

absl::StatusOr<Source> OpenSource(const W4DecodeOptions& options,
                                  const Device& device) {
  const ImagePipelineOptions pipeline{
      .decode = options.decode,
      .device = device,
      .batch_size = options.batch_size,
      .gpu_backend = options.gpu_backend,
      .gpu_priority = options.gpu_priority,
      .gpu_check_threads = options.gpu_check_threads};
  Source source;
  if (options.shards.empty()) {
    ImageFolderOptions folder;
    folder.size = options.size;
    PINWHEEL_ASSIGN_OR_RETURN(
        ImageFolderPipeline opened,
        OpenImageFolderPipeline(options.root, folder, pipeline));
    source.transform = opened.transform;
    source.decode_report = opened.decode_report;
    source.description = absl::StrCat("folder ", options.root);
    LoaderBuilder builder(opened.dataset);
    builder.batch_size(options.batch_size)
        .shuffle(options.seed)
        .num_workers(options.workers)
        .device(device)
        .device_transform(opened.transform);
    if (options.prefetch > 0) builder.prefetch(options.prefetch);
    PINWHEEL_ASSIGN_OR_RETURN(source.loader, builder.Build());
    return source;
  }
  TarShardOptions tars;
  tars.transform.size = options.size;
  tars.seed = options.seed;
  tars.shuffle_shards = true;
  if (options.read_chunk_bytes > 0) {
    tars.read_chunk_bytes = options.read_chunk_bytes;
  }
  if (options.read_ahead_chunks >= 0) {
    tars.read_ahead_chunks = options.read_ahead_chunks;
  }
  if (options.io_threads > 0) tars.storage.io_threads = options.io_threads;
  if (options.cache_bytes > 0) {
    PINWHEEL_ASSIGN_OR_RETURN(
        std::shared_ptr<ObjectStore> remote,
        OpenObjectStore(options.shards.front(), tars.storage));
    PINWHEEL_ASSIGN_OR_RETURN(
        source.cache,
        CachedStore::Open(remote, {.budget_bytes = options.cache_bytes,
                                   .directory = options.cache_dir}));
    tars.store = source.cache;
  }
  PINWHEEL_ASSIGN_OR_RETURN(
      TarShardPipeline opened,
      OpenTarShardPipeline(options.shards, tars, pipeline));
  source.transform = opened.transform;
  source.decode_report = opened.decode_report;
  source.description = absl::StrCat(
      options.shards.size(), " tar shards (", options.shards.front(), ", ...)",
      options.cache_bytes > 0
          ? absl::StrCat(", cache ", options.cache_bytes >> 20, " MiB")
          : "",
      ", chunks of ", tars.read_chunk_bytes >> 10, " KiB, ",
      tars.read_ahead_chunks, " ahead, ", tars.storage.io_threads,
      " I/O threads");
  std::shared_ptr<const IterableDataset> dataset = opened.dataset;
  if (source.cache != nullptr) {
    PINWHEEL_ASSIGN_OR_RETURN(
        dataset, PlannedTarShards::Create(opened.dataset, source.cache));
  }
  // A slot a worker unless --prefetch: each streamed batch is read by one
  // worker into a slot of its own (Note [one worker a streamed batch],
  // loader_builder.cc); decode = cpu shares its decode with every worker
  // anyway (Note [a streamed sample finished elsewhere]), decode = gpu
  // does not.
  PINWHEEL_ASSIGN_OR_RETURN(
      source.loader,
      LoaderBuilder(dataset)
          .batch_size(options.batch_size)
          .num_workers(options.workers)
          .prefetch(options.prefetch > 0 ? options.prefetch
                                         : std::max(4, options.workers))
          .device(device)
          .device_transform(opened.transform)
          .Build());
  return source;
}

}  // namespace

absl::StatusOr<W4DecodeRow> MeasureW4Decode(const W4DecodeOptions& options) {
  const Device device = Device::FirstGpuOrHost();
  if (!device.is_cuda() &&
      (options.decode != ImageDecode::kCpu || options.compute_gemm_n > 0)) {
    return absl::FailedPreconditionError(
        "W4 decode rows: no GPU (on the host backend only decode=cpu without "
        "--compute_gemm_n runs)");
  }
  PINWHEEL_ASSIGN_OR_RETURN(Source source, OpenSource(options, device));
  Loader& loader = *source.loader;
  PINWHEEL_ASSIGN_OR_RETURN(Stream consumer, Stream::Create(device));
  W4DecodeRow row;
  row.options = options;
  row.source = source.description;
  std::unique_ptr<GemmStep> gemm;
  if (options.compute_gemm_n > 0) {
    PINWHEEL_ASSIGN_OR_RETURN(
        gemm,
        GemmStep::Create(device.ordinal(), options.compute_gemm_n,
                         options.compute_sm_count, options.compute_gemm_pairs));
    PINWHEEL_ASSIGN_OR_RETURN(
        row.compute_alone_ms,
        gemm->TimeAloneMs(consumer.native_handle(), /*steps=*/20,
                          /*warmup=*/3));
  }
  row.decode_report = source.decode_report;
  auto one = [&](int64_t* images) -> absl::Status {
    for (;;) {
      PINWHEEL_ASSIGN_OR_RETURN(std::optional<DeviceBatch> batch,
                                loader.Next());
      if (!batch.has_value()) continue;  // the epoch ended: the next begins
      PINWHEEL_RETURN_IF_ERROR(batch->WaitOn(consumer));
      if (gemm != nullptr) {
        PINWHEEL_RETURN_IF_ERROR(
            images != nullptr ? gemm->EnqueueTimed(consumer.native_handle())
                              : gemm->Enqueue(consumer.native_handle()));
      }
      if (images != nullptr) *images += batch->size();
      return batch->Release(consumer);
    }
  };
  for (int b = 0; b < options.warmup_batches; ++b) {
    PINWHEEL_RETURN_IF_ERROR(one(nullptr));
  }
  PINWHEEL_RETURN_IF_ERROR(consumer.Synchronize());
#if defined(PINWHEEL_HAVE_NVJPEG)
  const auto* gpu =
      dynamic_cast<const JpegDecodeTransform*>(source.transform.get());
  const JpegDecodeTiming before =
      gpu != nullptr ? gpu->timing() : JpegDecodeTiming{};
#endif
  const double cpu_start = ProcessCpuSeconds();
  const absl::Time start = absl::Now();
  for (int b = 0; b < options.batches; ++b) {
    PINWHEEL_RETURN_IF_ERROR(one(&row.images));
  }
  PINWHEEL_RETURN_IF_ERROR(consumer.Synchronize());
  row.seconds = absl::ToDoubleSeconds(absl::Now() - start);
  row.cpu_seconds = ProcessCpuSeconds() - cpu_start;
  if (gemm != nullptr) {
    PINWHEEL_ASSIGN_OR_RETURN(row.compute_gpu_ms, gemm->QueuedGpuMs());
  }
  if (source.cache != nullptr) {
    const CacheStats c = source.cache->Stats();
    row.cache_report = absl::StrFormat(
        "cache: hit rate %.3f, %d MiB fetched (%d MiB again), readers waited "
        "%.2f s",
        c.hit_rate(), c.bytes_fetched >> 20, c.bytes_fetched_again >> 20,
        absl::ToDoubleSeconds(c.reader_wait));
  }
#if defined(PINWHEEL_HAVE_NVJPEG)
  if (gpu != nullptr) {
    const JpegDecodeTiming after = gpu->timing();
    const double batches = static_cast<double>(after.batches - before.batches);
    const double timed =
        static_cast<double>(after.gpu_batches - before.gpu_batches);
    if (batches > 0 && timed > 0) {
      row.decode_timing = absl::StrFormat(
          "decode per batch: host %.2f ms in the decoder (%.2f ms checks, "
          "%.2f ms waits, %.2f ms nvJPEG calls); GPU %.2f ms",
          (after.host_check_ms + after.host_wait_ms + after.host_submit_ms -
           before.host_check_ms - before.host_wait_ms - before.host_submit_ms) /
              batches,
          (after.host_check_ms - before.host_check_ms) / batches,
          (after.host_wait_ms - before.host_wait_ms) / batches,
          (after.host_submit_ms - before.host_submit_ms) / batches,
          (after.gpu_decode_ms - before.gpu_decode_ms) / timed);
    }
  }
#endif
  return row;
}

std::string FormatW4DecodeRow(const W4DecodeRow& row) {
  return absl::StrFormat(
      "w4 decode=%s workers=%d batch=%d: %.0f img/s, %.2f cores, %.0f img/s "
      "per core (%d images in %.2f s)%s [%s]%s%s [%s]%s%s",
      row.options.decode == ImageDecode::kGpu   ? "gpu"
      : row.options.decode == ImageDecode::kCpu ? "cpu"
                                                : "auto",
      row.options.workers, row.options.batch_size, row.images_per_second(),
      row.cores(), row.images / row.cpu_seconds, static_cast<int>(row.images),
      row.seconds,
      row.compute_alone_ms > 0
          ? absl::StrFormat(
                "; step %.2f ms against %.2f ms alone (GEMMs %d x %d, "
                "SMs %s): %+.2f %%; the GEMMs ran %.2f ms a step on the GPU",
                row.step_ms(), row.compute_alone_ms,
                2 * row.options.compute_gemm_pairs, row.options.compute_gemm_n,
                row.options.compute_sm_count > 0
                    ? absl::StrCat(row.options.compute_sm_count)
                    : std::string("all"),
                100 * row.step_overhead(), row.compute_gpu_ms)
          : std::string(),
      row.decode_report, row.decode_timing.empty() ? "" : " ",
      row.decode_timing, row.source, row.cache_report.empty() ? "" : " ",
      row.cache_report);
}

}  // namespace pinwheel::bench
