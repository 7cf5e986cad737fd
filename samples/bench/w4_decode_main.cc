// pinwheel_w4_decode: W4's decode rows (samples/bench/w4_decode.h) for the
// given decode paths and worker counts.
//
// Usage: pinwheel_w4_decode --root=/tmp/w4 | --shards=PATTERN[,PATTERN...]
//                           [--cache_mib=0] [--cache_dir=]
//                           [--decode=cpu,gpu]
//                           [--workers=4,14] [--batches=40] [--repeat=3]
//                           [--compute_gemm_n=0 (no compute step)]
//                           [--compute_gemm_pairs=1] [--compute_sm_count=0]
//                           [--prefer_cuda_queues=true]
//                           [--gpu_backend=auto] [--gpu_priority=high]
//                           [--gpu_check_threads=8]
// Every list flag multiplies the configurations; each round measures each
// configuration once, and a summary line a configuration ends the run.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"

#include "loader/storage/shard_pattern.h"
#include "pinning/base/cuda_queues.h"
#include "samples/bench/w4_decode.h"

ABSL_FLAG(std::string, root, "", "an ImageFolder root of JPEGs");
ABSL_FLAG(std::string, shards, "",
          "instead of --root: tar shards, a brace pattern "
          "('http://host/w4-{000..015}.tar', 's3://b/w4-{000..015}.tar', a "
          "path) or a comma-separated list");
ABSL_FLAG(int64_t, cache_mib, 0,
          "with --shards: > 0 reads them through a planned cache of this "
          "many MiB");
ABSL_FLAG(std::string, cache_dir, "",
          "with --cache_mib: the cache's folder (empty: memory)");
ABSL_FLAG(int64_t, read_chunk_kib, 0,
          "with remote --shards: bytes a range GET reads, in KiB (0: "
          "TarShardOptions' default)");
ABSL_FLAG(int, read_ahead_chunks, -1,
          "with remote --shards: chunks fetched ahead of the one being "
          "read (-1: TarShardOptions' default)");
ABSL_FLAG(int, io_threads, 0,
          "with remote --shards: the store's I/O threads (0: "
          "StoreOptions' default)");
ABSL_FLAG(std::string, decode, "cpu,gpu", "decode paths, comma-separated");
ABSL_FLAG(std::string, workers, "4,14", "worker counts, comma-separated");
ABSL_FLAG(int, prefetch, 0,
          "pinned slots; 0: with --shards max(4, workers), else the "
          "loader's default");
ABSL_FLAG(int, batches, 40, "timed batches per row");
ABSL_FLAG(int, batch_size, 256, "images per batch");
ABSL_FLAG(int, repeat, 3, "repetitions of each row");
ABSL_FLAG(int, compute_gemm_n, 0,
          "> 0: bf16 GEMMs of this side after each batch (2 x "
          "--compute_gemm_pairs), and the step time against the GEMMs alone");
ABSL_FLAG(int, compute_gemm_pairs, 1,
          "the step's GEMMs: this many pairs (many short kernels when "
          "compute_gemm_n is small, as a real step has)");
ABSL_FLAG(bool, prefer_cuda_queues, true,
          "set CUDA_DEVICE_MAX_CONNECTIONS=32 when unset, as import pinwheel "
          "does (false: CUDA's 8 hardware queues)");
ABSL_FLAG(int, compute_sm_count, 0,
          "> 0: the GEMMs use at most this many SMs (cublasSetSmCountTarget)");
ABSL_FLAG(std::string, gpu_backend, "auto",
          "decode=gpu: nvJPEG backends, comma-separated (auto, hardware, "
          "gpu_hybrid, default)");
ABSL_FLAG(std::string, gpu_check_threads, "8",
          "decode=gpu: threads for a batch's host checks, comma-separated");
ABSL_FLAG(std::string, gpu_priority, "high",
          "decode=gpu: the decode stream's priorities, comma-separated (low, "
          "high)");

// The shard list of --shards: each comma-separated part a pattern.
absl::StatusOr<std::vector<std::string>> Shards(const std::string& flag) {
  std::vector<std::string> out;
  if (flag.empty()) return out;
  for (absl::string_view part : absl::StrSplit(flag, ',')) {
    absl::StatusOr<std::vector<std::string>> expanded =
        pinwheel::ExpandShardPattern(part);
    if (!expanded.ok()) return expanded.status();
    out.insert(out.end(), expanded->begin(), expanded->end());
  }
  return out;
}

// The backend named by --gpu_backend, or nullopt.
std::optional<pinwheel::JpegDecodeBackend> Backend(absl::string_view name) {
  if (name == "auto") return pinwheel::JpegDecodeBackend::kAuto;
  if (name == "hardware") return pinwheel::JpegDecodeBackend::kHardware;
  if (name == "gpu_hybrid") return pinwheel::JpegDecodeBackend::kGpuHybrid;
  if (name == "default") return pinwheel::JpegDecodeBackend::kDefault;
  return std::nullopt;
}

// The numbers of list flag `flag` ("4,14"), or nullopt after saying which
// element is not one.
std::optional<std::vector<int>> Numbers(const char* flag,
                                        const std::string& text) {
  std::vector<int> out;
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    int n = 0;
    if (!absl::SimpleAtoi(part, &n)) {
      std::fprintf(stderr, "%s: %s is not a number\n", flag,
                   std::string(part).c_str());
      return std::nullopt;
    }
    out.push_back(n);
  }
  return out;
}

// "median X img/s [min-max] of N" of one configuration's repetitions.
std::string Summary(std::vector<double> rates) {
  std::sort(rates.begin(), rates.end());
  return absl::StrFormat("median %.0f img/s [%.0f-%.0f] of %d",
                         rates[rates.size() / 2], rates.front(), rates.back(),
                         static_cast<int>(rates.size()));
}

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  // Before any CUDA call: CUDA reads the variable once (Note [hardware
  // queues] in transfer/jpeg/nvjpeg_decoder.h).
  if (absl::GetFlag(FLAGS_prefer_cuda_queues)) pinwheel::PreferCudaQueues();
  int status = 0;
  const absl::StatusOr<std::vector<std::string>> shards =
      Shards(absl::GetFlag(FLAGS_shards));
  if (!shards.ok()) {
    std::fprintf(stderr, "--shards: %s\n", shards.status().ToString().c_str());
    return 2;
  }
  if (shards->empty() == absl::GetFlag(FLAGS_root).empty()) {
    std::fprintf(stderr, "give one of --root (a folder) and --shards\n");
    return 2;
  }
  // Each list flag, parsed; any bad element stops the run.
  std::vector<pinwheel::ImageDecode> decodes;
  for (absl::string_view name :
       absl::StrSplit(absl::GetFlag(FLAGS_decode), ',')) {
    absl::StatusOr<pinwheel::ImageDecode> decode =
        pinwheel::ParseImageDecode(name);
    if (!decode.ok()) {
      std::fprintf(stderr, "%s\n", decode.status().ToString().c_str());
      return 2;
    }
    decodes.push_back(*decode);
  }
  const std::optional<std::vector<int>> worker_counts =
      Numbers("--workers", absl::GetFlag(FLAGS_workers));
  const std::optional<std::vector<int>> check_counts =
      Numbers("--gpu_check_threads", absl::GetFlag(FLAGS_gpu_check_threads));
  if (!worker_counts.has_value() || !check_counts.has_value()) {
    return 2;
  }
  // The GPU choices, parsed once: each with the name the summary gives it.
  struct GpuChoice {
    std::string backend_name;
    pinwheel::JpegDecodeBackend backend;
    std::string priority_name;
    pinwheel::JpegDecodePriority priority;
    int check_threads = 8;
  };
  std::vector<std::pair<std::string, pinwheel::JpegDecodeBackend>> backends;
  for (absl::string_view b :
       absl::StrSplit(absl::GetFlag(FLAGS_gpu_backend), ',')) {
    const std::optional<pinwheel::JpegDecodeBackend> backend = Backend(b);
    if (!backend.has_value()) {
      std::fprintf(stderr,
                   "--gpu_backend: %s is not one of auto, hardware, "
                   "gpu_hybrid, default\n",
                   std::string(b).c_str());
      return 2;
    }
    backends.emplace_back(std::string(b), *backend);
  }
  std::vector<std::pair<std::string, pinwheel::JpegDecodePriority>> priorities;
  for (absl::string_view p :
       absl::StrSplit(absl::GetFlag(FLAGS_gpu_priority), ',')) {
    if (p != "low" && p != "high") {
      std::fprintf(stderr, "--gpu_priority: %s is not low or high\n",
                   std::string(p).c_str());
      return 2;
    }
    priorities.emplace_back(std::string(p),
                            p == "low" ? pinwheel::JpegDecodePriority::kLow
                                       : pinwheel::JpegDecodePriority::kHigh);
  }
  std::vector<GpuChoice> choices;
  for (const auto& [backend_name, backend] : backends) {
    for (const auto& [priority_name, priority] : priorities) {
      for (int checks : *check_counts) {
        choices.push_back(
            {backend_name, backend, priority_name, priority, checks});
      }
    }
  }

  // The configurations, each measured once a round: the rounds interleave
  // them, so that a drift of the machine spreads over all of them. The CPU
  // path has no decoder to choose: one configuration a worker count.
  struct Config {
    std::string name;  // "decode=gpu workers=4 backend=hardware ..."
    pinwheel::bench::W4DecodeOptions options;
    std::vector<double> rates;
  };
  std::vector<Config> configs;
  for (pinwheel::ImageDecode decode : decodes) {
    const bool gpu = decode != pinwheel::ImageDecode::kCpu;
    for (int workers : *worker_counts) {
      for (size_t c = 0; c < (gpu ? choices.size() : 1); ++c) {
        const GpuChoice& choice = choices[c];
        Config config;
        config.name = absl::StrCat(
            "decode=",
            gpu ? (decode == pinwheel::ImageDecode::kGpu ? "gpu" : "auto")
                : "cpu",
            " workers=", workers);
        // Named only when not the defaults: w4_storage.sh reads the
        // summary's fields by place.
        if (gpu && (choice.backend != pinwheel::JpegDecodeBackend::kAuto ||
                    choice.priority != pinwheel::JpegDecodePriority::kHigh ||
                    choice.check_threads != 8)) {
          absl::StrAppend(&config.name, " backend=", choice.backend_name,
                          " priority=", choice.priority_name,
                          " check_threads=", choice.check_threads);
        }
        config.options = {
            .root = absl::GetFlag(FLAGS_root),
            .shards = *shards,
            .cache_bytes = absl::GetFlag(FLAGS_cache_mib) << 20,
            .cache_dir = absl::GetFlag(FLAGS_cache_dir),
            .read_chunk_bytes = absl::GetFlag(FLAGS_read_chunk_kib) << 10,
            .read_ahead_chunks = absl::GetFlag(FLAGS_read_ahead_chunks),
            .io_threads = absl::GetFlag(FLAGS_io_threads),
            .decode = decode,
            .workers = workers,
            .prefetch = absl::GetFlag(FLAGS_prefetch),
            .batch_size = absl::GetFlag(FLAGS_batch_size),
            .batches = absl::GetFlag(FLAGS_batches),
            .compute_gemm_n = absl::GetFlag(FLAGS_compute_gemm_n),
            .compute_sm_count = absl::GetFlag(FLAGS_compute_sm_count),
            .compute_gemm_pairs = absl::GetFlag(FLAGS_compute_gemm_pairs),
            .gpu_backend = choice.backend,
            .gpu_priority = choice.priority,
            .gpu_check_threads = choice.check_threads};
        configs.push_back(std::move(config));
      }
    }
  }
  for (int r = 0; r < absl::GetFlag(FLAGS_repeat); ++r) {
    for (Config& config : configs) {
      absl::StatusOr<pinwheel::bench::W4DecodeRow> row =
          pinwheel::bench::MeasureW4Decode(config.options);
      if (!row.ok()) {
        std::fprintf(stderr, "%s: %s\n", config.name.c_str(),
                     row.status().ToString().c_str());
        status = 1;
        continue;
      }
      std::printf("%s\n", pinwheel::bench::FormatW4DecodeRow(*row).c_str());
      std::fflush(stdout);
      config.rates.push_back(row->images_per_second());
    }
  }
  for (const Config& config : configs) {
    if (config.rates.empty()) continue;
    // One line a configuration, for scripts (w4_storage.sh).
    std::printf("w4 summary %s: %s\n", config.name.c_str(),
                Summary(config.rates).c_str());
  }
  std::fflush(stdout);
  return status;
}
