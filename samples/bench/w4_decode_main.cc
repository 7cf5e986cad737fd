// pinwheel_w4_decode: W4's decode rows (samples/bench/w4_decode.h) for the
// given decode paths and worker counts.
//
// Usage: pinwheel_w4_decode --root=/tmp/w4 | --shards=PATTERN[,PATTERN...]
//                           [--cache_mib=0] [--cache_dir=]
//                           [--decode=cpu,gpu]
//                           [--workers=4,14] [--batches=40] [--repeat=3]
//                           [--compute_gemm_n=0 (no compute step)]
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"

#include "loader/storage/shard_pattern.h"
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
          "> 0: two bf16 GEMMs of this side after each batch, and the step "
          "time against the GEMMs alone");
ABSL_FLAG(int, compute_sm_count, 0,
          "> 0: the GEMMs use at most this many SMs (cublasSetSmCountTarget)");

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

// "median X img/s [min-max] of N" of one configuration's repetitions.
std::string Summary(std::vector<double> rates) {
  std::sort(rates.begin(), rates.end());
  return absl::StrFormat("median %.0f img/s [%.0f-%.0f] of %d",
                         rates[rates.size() / 2], rates.front(), rates.back(),
                         static_cast<int>(rates.size()));
}

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
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
  for (absl::string_view name :
       absl::StrSplit(absl::GetFlag(FLAGS_decode), ',')) {
    absl::StatusOr<pinwheel::ImageDecode> decode =
        pinwheel::ParseImageDecode(name);
    if (!decode.ok()) {
      std::fprintf(stderr, "%s\n", decode.status().ToString().c_str());
      return 2;
    }
    for (absl::string_view w :
         absl::StrSplit(absl::GetFlag(FLAGS_workers), ',')) {
      int workers = 0;
      if (!absl::SimpleAtoi(w, &workers)) {
        std::fprintf(stderr, "--workers: %s is not a number\n",
                     std::string(w).c_str());
        return 2;
      }
      std::vector<double> rates;
      for (int r = 0; r < absl::GetFlag(FLAGS_repeat); ++r) {
        absl::StatusOr<pinwheel::bench::W4DecodeRow> row =
            pinwheel::bench::MeasureW4Decode(
                {.root = absl::GetFlag(FLAGS_root),
                 .shards = *shards,
                 .cache_bytes = absl::GetFlag(FLAGS_cache_mib) << 20,
                 .cache_dir = absl::GetFlag(FLAGS_cache_dir),
                 .read_chunk_bytes = absl::GetFlag(FLAGS_read_chunk_kib) << 10,
                 .read_ahead_chunks = absl::GetFlag(FLAGS_read_ahead_chunks),
                 .io_threads = absl::GetFlag(FLAGS_io_threads),
                 .decode = *decode,
                 .workers = workers,
                 .prefetch = absl::GetFlag(FLAGS_prefetch),
                 .batch_size = absl::GetFlag(FLAGS_batch_size),
                 .batches = absl::GetFlag(FLAGS_batches),
                 .compute_gemm_n = absl::GetFlag(FLAGS_compute_gemm_n),
                 .compute_sm_count = absl::GetFlag(FLAGS_compute_sm_count)});
        if (!row.ok()) {
          std::fprintf(stderr, "%s\n", row.status().ToString().c_str());
          status = 1;
          continue;
        }
        std::printf("%s\n", pinwheel::bench::FormatW4DecodeRow(*row).c_str());
        std::fflush(stdout);
        rates.push_back(row->images_per_second());
      }
      if (!rates.empty()) {
        // One line a configuration, for scripts (w4_storage.sh).
        std::printf("w4 summary decode=%s workers=%s: %s\n",
                    std::string(name).c_str(), std::string(w).c_str(),
                    Summary(rates).c_str());
        std::fflush(stdout);
      }
    }
  }
  return status;
}
