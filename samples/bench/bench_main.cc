// pinwheel_bench: issues #4 and #12's benchmark. Measures, in one run so
// that ratios hold on a noisy machine, the raw pinned copy limit, a pageable
// copy, a naive pin-per-batch loader and pinwheel at several worker counts
// and prefetch depths, on three workloads:
//   w1  images: 256 × (u8[3,224,224], i64) from 2048 in-memory samples
//   w2  tokens: 32 windows of 1024 tokens (i64 input and target) from a
//       file of 50M u16 tokens
//   w2w w2 shipped as windows: the same file and batches, the dataset's
//       TokenOutput::kWindow (u16[1025] a sample, 8x fewer bytes), widened
//       to w2's i64 input and target on the consumer stream by a kernel
//       (WidenTokens, transfer/widen_tokens.h) into two preallocated device
//       arrays; its rows are
//       also compared with w2's raw copy (same tensors on the device at the
//       end: compare w2w's batches/s with w2's)
//   w2p w2's token file packed (PackedTokenDataset) from documents of
//       uniform random lengths around seq_len / 4 (an offsets file written
//       next to the tokens): [seq_len] i64 input, target, position_ids,
//       document_ids and i32[seq_len + 1] cu_seqlens a row (not in the
//       default --workloads; compare its batches/s with w2's)
//   w3  overlap: w1 with two bf16 8192² GEMMs after each batch on the
//       consumer stream, against the GEMMs alone
//   w4  decode-bound images (issue 19): an ImageFolderDataset over
//       --w4_root (a folder make_images writes), batches of 256
//       RandomResizedCrop(224) + flip decoded by the workers, normalised to
//       bf16 CHW by NormalizeImage on the device stage; rows at
//       --w4_workers (8 and 14), reported in images/s, CPU cores and
//       images/s per core (not in the default --workloads; see Note [w4])
// Note [repetitions]
// Every row is measured --repeat times, in rounds: each round measures every
// row of the workload once, in order, with the workload's reference (w1, w2:
// the raw pinned copy; w3: the compute step alone; w2w: the raw copy of its
// own batch and of w2's) measured before the first row and after every row.
// Each repetition is compared with the mean of the two references next to it,
// so a machine that slows down for a while slows both sides of the ratio. A row
// reports the median and the min-max of its rate and of those per-repetition
// ratios (the median ratio is the median of the ratios, not a ratio of
// medians), and the medians of its CPU cost and waits. JSON lines carry every
// repetition (kind "rep") and every summary (kind "row").
//
// Writes progress lines and a summary table per workload to stdout, the
// summary tables again at the end and, with --json=FILE, one JSON object a
// line (see plot.py). On the host backend the rows that need CUDA are
// skipped with a note and pinwheel runs on Device::Host().
//
// Example:
//   pinwheel_bench --device=cuda:0 --json=/tmp/bench.jsonl
//   pinwheel_bench --quick            # ~20 s: what to set on this machine
//   pinwheel_bench --workloads=w1 --w1_configs=8x2,8x8,8x2:nt,8x8:nt
//   pinwheel_bench --workloads=w1,w2 --w1_configs=8x2,1x8x4:g
//       --w2_configs=14x64x8,1x64x8:g --repeat=5   # both paths, one run
//   pinwheel_bench --smoke --device=cpu --repeat=2   # what ctest runs
//   pinwheel_bench --workloads= --epochs_check=100   # memory only
//   make_images --out=/data/w4 --count=10000 --classes=100
//   pinwheel_bench --workloads=w4 --w4_root=/data/w4 --repeat=3
//
// Note [w4]
// W4's rows are pinwheel's at each worker count against the raw pinned copy
// of its u8 batch (the copy is not what limits it: the decode is). The
// baselines (pageable, naive) are left out: torchvision's DataLoader is
// W4's baseline, in samples/python/bench_images.py. --w4_batches timed
// batches a row (default 40: one epoch of 10,240 images at batch 256, so
// the page cache holds every file after the first row); the warm-up
// batches (--warmup) start the workers and fill the ring first.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

#include "loader/dataset.h"
#include "loader/image/image_folder_dataset.h"
#include "loader/packed_token_dataset.h"
#include "pinning/base/status_macros.h"
#include "samples/bench/cuda_rows.h"
#include "samples/bench/nvtx_range.h"
#include "samples/bench/report.h"
#include "samples/bench/thread_pinning.h"
#include "samples/bench/workloads.h"
#include "transfer/device.h"
#include "transfer/normalize_image.h"
#include "transfer/sample_layout.h"

ABSL_FLAG(std::string, device, "auto",
          "where batches go: auto (first GPU, else host), cpu, cuda:N");
ABSL_FLAG(std::string, workloads, "w1,w2,w2w,w3",
          "comma-separated workloads to run: w1, w2, w2w, w3 (empty: none)");
ABSL_FLAG(std::string, workers, "1,2,4,8,14",
          "comma-separated pinwheel worker counts (for a workload whose "
          "--wN_configs is empty: every worker count x prefetch depth)");
ABSL_FLAG(std::string, prefetch, "2,4,8",
          "comma-separated pinwheel prefetch depths (pinned slots)");
ABSL_FLAG(std::string, w1_configs, "",
          "w1's pinwheel rows, comma-separated WORKERSxPREFETCH[xDEVICE_"
          "BUFFERS][:nt|:g] (':nt': the dataset writes with non-temporal "
          "stores; ':g': the gather path, GatherMode::kOn), e.g. "
          "8x2,8x8,8x2:nt,1x8x4:g; empty: --workers x --prefetch");
ABSL_FLAG(std::string, w2_configs, "",
          "w2's pinwheel rows, as --w1_configs (no ':nt')");
ABSL_FLAG(std::string, w2w_configs, "",
          "w2w's pinwheel rows, as --w2_configs; empty: w2's rows");
ABSL_FLAG(std::string, w3_configs, "", "w3's pinwheel rows, as --w1_configs");
ABSL_FLAG(std::string, w2p_configs, "",
          "w2p's pinwheel rows, as --w2_configs; empty: w2's rows");
ABSL_FLAG(int, repeat, 5,
          "repetitions of every row, interleaved with the workload's "
          "reference (see Note [repetitions])");
ABSL_FLAG(bool, baselines, true,
          "also measure the pageable copy and the naive loader");
ABSL_FLAG(int, batches, 100, "timed batches per row for w1 and w3");
ABSL_FLAG(int, w2_batches, 5000,
          "timed batches per row for w2 and w2w (small batches: more are "
          "needed)");
ABSL_FLAG(int, naive_batches, 30,
          "timed batches per naive-loader row (it is 30-50x slower)");
ABSL_FLAG(int, warmup, 5, "untimed batches before each row");
ABSL_FLAG(int, device_buffers, 2,
          "pinwheel device buffers (where a config does not say)");
ABSL_FLAG(int, naive_threads, 8,
          "threads collating a batch in the naive loader");
ABSL_FLAG(int64_t, w2_tokens, 50'000'000, "tokens in w2's token file");
ABSL_FLAG(std::string, token_file, "",
          "w2's token file (u16); empty: /tmp/pinwheel_bench_tokens_<N>.u16, "
          "written once");
ABSL_FLAG(int, gemm_n, 8192, "w3: the GEMMs' matrix side");
ABSL_FLAG(uint64_t, seed, 7, "shuffle seed");
ABSL_FLAG(double, timeout_s, 120, "longest wait for one batch, seconds");
ABSL_FLAG(int, epochs_check, 0,
          "run this many epochs of a small w1-like dataset and check that "
          "pinned and device bytes stay constant (0: off)");
ABSL_FLAG(int, pin_consumer_cpu, -1,
          "pinwheel rows: run the consumer thread alone on this CPU and every "
          "other thread off it, from the first warm-up batch to the end of "
          "the timed loop (-1: no pinning)");
ABSL_FLAG(bool, quick, false,
          "a short run (w1, w2 and two w2w rows, a few configurations picked "
          "from the core count, 3 repetitions, no baselines) that ends with "
          "what to set num_workers and prefetch to on this machine; overrides "
          "--workloads, --wN_configs, --repeat, --baselines, --batches, "
          "--w2_batches and --epochs_check");
ABSL_FLAG(bool, smoke, false,
          "tiny sizes (seconds on a CPU): what ctest runs; no timing is "
          "meaningful");
ABSL_FLAG(std::string, json, "", "append one JSON object a line here");
ABSL_FLAG(std::string, w4_root, "",
          "w4: an ImageFolder root of JPEGs (make_images --out=DIR "
          "--count=10000 writes one); required for w4");
ABSL_FLAG(std::string, w4_workers, "8,14", "w4: the worker counts of its rows");
ABSL_FLAG(std::string, w4_configs, "",
          "w4's pinwheel rows as WORKERSxPREFETCH[xDEVICE_BUFFERS] (e.g. "
          "8x4,14x8); empty: --w4_workers at --w4_prefetch");
ABSL_FLAG(int, w4_prefetch, 4, "w4: pinned slots of its rows");
ABSL_FLAG(int, w4_batches, 40, "w4: timed batches a row (see Note [w4])");
ABSL_FLAG(int, w4_batch, 256, "w4: images a batch");
ABSL_FLAG(int, w4_size, 224, "w4: the crop's side, pixels");

namespace pinwheel::bench {
namespace {

// The sizes of one run: the issue's, or tiny ones for --smoke.
struct Sizes {
  int64_t image_samples = 2048;
  int image_side = 224;
  int64_t image_batch = 256;
  int64_t tokens = 50'000'000;
  int64_t seq_len = 1024;
  int64_t token_batch = 32;
  int gemm_n = 8192;
  int batches = 100;
  int w2_batches = 5000;
  int naive_batches = 30;
  int warmup = 5;
  // The memory check's dataset: few samples, so epochs are short.
  // W4 (--smoke: batch 16 of 32x32 crops, 4 timed batches).
  int64_t w4_batch = 256;
  int w4_size = 224;
  int w4_batches = 40;
  int64_t check_samples = 64;
  int64_t check_batch = 16;
  int check_workers = 4;
  int check_prefetch = 4;
};

Sizes SizesFromFlags() {
  Sizes s;
  s.tokens = absl::GetFlag(FLAGS_w2_tokens);
  s.gemm_n = absl::GetFlag(FLAGS_gemm_n);
  s.batches = absl::GetFlag(FLAGS_batches);
  s.w2_batches = absl::GetFlag(FLAGS_w2_batches);
  s.naive_batches = absl::GetFlag(FLAGS_naive_batches);
  s.warmup = absl::GetFlag(FLAGS_warmup);
  s.w4_batch = absl::GetFlag(FLAGS_w4_batch);
  s.w4_size = absl::GetFlag(FLAGS_w4_size);
  s.w4_batches = absl::GetFlag(FLAGS_w4_batches);
  if (absl::GetFlag(FLAGS_quick)) {
    s.batches = 200;
    s.w2_batches = 10000;
    s.warmup = 3;
  }
  if (absl::GetFlag(FLAGS_smoke)) {
    s.image_samples = 64;
    s.image_side = 32;
    s.image_batch = 16;
    s.tokens = 200'000;
    s.seq_len = 128;
    s.token_batch = 8;
    s.gemm_n = 256;
    s.batches = 8;
    s.w2_batches = 16;
    s.naive_batches = 4;
    s.warmup = 2;
    s.w4_batch = 16;
    s.w4_size = 32;
    s.w4_batches = 4;
  }
  return s;
}

// Returns the comma-separated positive integers of flag `name`.
absl::StatusOr<std::vector<int>> ParseIntList(absl::string_view name,
                                              absl::string_view value) {
  std::vector<int> out;
  for (absl::string_view item :
       absl::StrSplit(value, ',', absl::SkipWhitespace())) {
    int v = 0;
    if (!absl::SimpleAtoi(item, &v) || v < 1) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "--%s=%s: '%s' is not a positive integer", name, value, item));
    }
    out.push_back(v);
  }
  if (out.empty()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("--%s is empty: give at least one value", name));
  }
  return out;
}

// One pinwheel configuration: a row of the table.
struct PinwheelConfig {
  int workers = 1;
  int prefetch = 2;
  int device_buffers = 2;
  bool streaming_stores = false;  // ":nt"
  bool gather = false;            // ":g": the gather path (GatherMode::kOn)
};

// Parses flag `name`'s WORKERSxPREFETCH[xDEVICE_BUFFERS][:nt] list.
absl::StatusOr<std::vector<PinwheelConfig>> ParseConfigs(
    absl::string_view name, absl::string_view value, int device_buffers,
    bool nt_allowed) {
  std::vector<PinwheelConfig> out;
  for (absl::string_view item :
       absl::StrSplit(value, ',', absl::SkipWhitespace())) {
    PinwheelConfig c{.device_buffers = device_buffers};
    absl::string_view numbers = item;
    if (absl::ConsumeSuffix(&numbers, ":g")) {
      c.gather = true;
    }
    if (absl::ConsumeSuffix(&numbers, ":nt")) {
      if (c.gather) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "--%s=%s: '%s': ':nt' and ':g' do not mix (the gather path has "
            "no Read() to store with)",
            name, value, item));
      }
      if (!nt_allowed) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "--%s=%s: '%s': ':nt' applies to the image workloads (w1, w3) "
            "only",
            name, value, item));
      }
      if (!StreamingStoresAvailable()) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "--%s=%s: '%s': ':nt' needs x86 with SSE2", name, value, item));
      }
      c.streaming_stores = true;
    }
    std::vector<absl::string_view> parts = absl::StrSplit(numbers, 'x');
    std::vector<int> v;
    for (absl::string_view part : parts) {
      int n = 0;
      if (!absl::SimpleAtoi(part, &n) || n < 1) {
        v.clear();
        break;
      }
      v.push_back(n);
    }
    if (v.size() < 2 || v.size() > 3) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "--%s=%s: '%s' is not WORKERSxPREFETCH[xDEVICE_BUFFERS][:nt] with "
          "positive integers (e.g. 8x4 or 8x4x2:nt), or :g for the gather "
          "path (1x32x4:g)",
          name, value, item));
    }
    c.workers = v[0];
    c.prefetch = v[1];
    if (v.size() == 3) c.device_buffers = v[2];
    out.push_back(c);
  }
  return out;
}

// Returns `result`, its error (if any) prefixed with the row it belongs to.
template <typename T>
absl::StatusOr<T> InRow(absl::StatusOr<T> result, absl::string_view row) {
  if (result.ok()) return result;
  return absl::Status(result.status().code(),
                      absl::StrCat(row, ": ", result.status().message()));
}

struct Config {
  Device device;
  Sizes sizes;
  std::vector<std::string> workloads;
  // Pinwheel rows per workload ("w1", "w2", "w3").
  std::map<std::string, std::vector<PinwheelConfig>> configs;
  int repeat = 5;
  bool baselines = true;
  bool quick = false;
  int device_buffers = 2;
  int naive_threads = 8;
  uint64_t seed = 7;
  absl::Duration timeout = absl::Seconds(120);
  int epochs_check = 0;
  int pin_consumer_cpu = -1;
  std::string token_file;
  std::string w4_root;
};

// --quick's rows: a few worker counts up to the machine's cores.
void SetQuickConfigs(Config& c) {
  const int cores =
      std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  std::vector<int> workers;
  for (int w : {2, 4, 8, cores - 2}) {
    if (w >= 1 && w <= cores &&
        std::find(workers.begin(), workers.end(), w) == workers.end()) {
      workers.push_back(w);
    }
  }
  if (workers.empty()) workers.push_back(1);
  std::sort(workers.begin(), workers.end());
  const int most = workers.back();
  c.configs["w1"].clear();
  c.configs["w2"].clear();
  for (int w : workers) {
    c.configs["w1"].push_back(
        {.workers = w, .prefetch = 2, .device_buffers = 2});
    c.configs["w2"].push_back(
        {.workers = w, .prefetch = 8, .device_buffers = 2});
  }
  c.configs["w1"].push_back(
      {.workers = most, .prefetch = 4, .device_buffers = 2});
  c.configs["w2"].push_back(
      {.workers = most, .prefetch = 32, .device_buffers = 4});
  // The best W2 setting on the H100 (README, Performance): small batches
  // want many slots and device buffers in flight.
  c.configs["w2"].push_back(
      {.workers = most, .prefetch = 64, .device_buffers = 8});
  // The gather path beside them (issue 23): one producer thread, no
  // workers; its slots hold 8 bytes a sample, so many are cheap.
  c.configs["w1"].push_back(
      {.workers = 1, .prefetch = 8, .device_buffers = 4, .gather = true});
  c.configs["w2"].push_back(
      {.workers = 1, .prefetch = 32, .device_buffers = 4, .gather = true});
  c.configs["w2"].push_back(
      {.workers = 1, .prefetch = 64, .device_buffers = 8, .gather = true});
  // w2w: the most workers only, at both of w2's prefetch depths: enough to
  // say whether shipping windows beats shipping i64 here.
  c.configs["w2w"] = {{.workers = most, .prefetch = 8, .device_buffers = 2},
                      {.workers = most, .prefetch = 32, .device_buffers = 4}};
  c.workloads = {"w1", "w2", "w2w"};
  c.repeat = 3;
  c.baselines = false;
  c.epochs_check = 0;
}

absl::StatusOr<Config> ConfigFromFlags() {
  Config c;
  PINWHEEL_ASSIGN_OR_RETURN(c.device,
                            Device::Parse(absl::GetFlag(FLAGS_device)));
  c.sizes = SizesFromFlags();
  for (absl::string_view w : absl::StrSplit(absl::GetFlag(FLAGS_workloads), ',',
                                            absl::SkipWhitespace())) {
    if (w != "w1" && w != "w2" && w != "w2w" && w != "w2p" && w != "w3" &&
        w != "w4") {
      return absl::InvalidArgumentError(absl::StrFormat(
          "--workloads: unknown workload '%s' (w1, w2, w2w, w2p, w3 or w4)",
          w));
    }
    c.workloads.emplace_back(w);
  }
  c.device_buffers = absl::GetFlag(FLAGS_device_buffers);
  if (c.device_buffers < 1) {
    return absl::InvalidArgumentError(
        absl::StrFormat("--device_buffers=%d: must be >= 1", c.device_buffers));
  }
  PINWHEEL_ASSIGN_OR_RETURN(
      std::vector<int> workers,
      ParseIntList("workers", absl::GetFlag(FLAGS_workers)));
  PINWHEEL_ASSIGN_OR_RETURN(
      std::vector<int> prefetch,
      ParseIntList("prefetch", absl::GetFlag(FLAGS_prefetch)));
  const std::pair<const char*, std::string> flags[] = {
      {"w1", absl::GetFlag(FLAGS_w1_configs)},
      {"w2", absl::GetFlag(FLAGS_w2_configs)},
      {"w2w", absl::GetFlag(FLAGS_w2w_configs)},
      {"w3", absl::GetFlag(FLAGS_w3_configs)},
      {"w2p", absl::GetFlag(FLAGS_w2p_configs)}};
  for (const auto& [workload, value] : flags) {
    std::vector<PinwheelConfig>& configs = c.configs[workload];
    const bool tokens = std::string(workload) == "w2" ||
                        std::string(workload) == "w2w" ||
                        std::string(workload) == "w2p";
    PINWHEEL_ASSIGN_OR_RETURN(
        configs, ParseConfigs(absl::StrCat(workload, "_configs"), value,
                              c.device_buffers, !tokens));
    if (configs.empty() &&
        (std::string(workload) == "w2w" || std::string(workload) == "w2p")) {
      configs = c.configs.at("w2");  // w2 is parsed (and defaulted) first
    }
    if (configs.empty()) {
      for (int p : prefetch) {
        for (int w : workers) {
          configs.push_back({.workers = w,
                             .prefetch = p,
                             .device_buffers = c.device_buffers});
        }
      }
    }
  }
  {
    std::vector<PinwheelConfig>& w4 = c.configs["w4"];
    PINWHEEL_ASSIGN_OR_RETURN(
        w4, ParseConfigs("w4_configs", absl::GetFlag(FLAGS_w4_configs),
                         c.device_buffers, /*nt_allowed=*/false));
    if (w4.empty()) {
      const int w4_prefetch = absl::GetFlag(FLAGS_w4_prefetch);
      if (w4_prefetch < 1) {
        return absl::InvalidArgumentError(
            absl::StrFormat("--w4_prefetch=%d: must be >= 1", w4_prefetch));
      }
      PINWHEEL_ASSIGN_OR_RETURN(
          std::vector<int> w4_workers,
          ParseIntList("w4_workers", absl::GetFlag(FLAGS_w4_workers)));
      for (int w : w4_workers) {
        w4.push_back({.workers = w,
                      .prefetch = w4_prefetch,
                      .device_buffers = c.device_buffers});
      }
    }
  }
  c.w4_root = absl::GetFlag(FLAGS_w4_root);
  if (c.w4_root.empty() && std::find(c.workloads.begin(), c.workloads.end(),
                                     "w4") != c.workloads.end()) {
    return absl::InvalidArgumentError(
        "--workloads has w4 but --w4_root is empty: give an ImageFolder of "
        "JPEGs (make_images --out=DIR --count=10000 --classes=100 writes "
        "one)");
  }
  if (c.sizes.w4_batch < 1 || c.sizes.w4_size < 1 || c.sizes.w4_batches < 1) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--w4_batch=%d, --w4_size=%d, --w4_batches=%d: each must be >= 1",
        c.sizes.w4_batch, c.sizes.w4_size, c.sizes.w4_batches));
  }
  c.repeat = absl::GetFlag(FLAGS_repeat);
  c.baselines = absl::GetFlag(FLAGS_baselines);
  c.naive_threads = absl::GetFlag(FLAGS_naive_threads);
  c.seed = absl::GetFlag(FLAGS_seed);
  c.timeout = absl::Seconds(absl::GetFlag(FLAGS_timeout_s));
  c.epochs_check = absl::GetFlag(FLAGS_epochs_check);
  c.pin_consumer_cpu = absl::GetFlag(FLAGS_pin_consumer_cpu);
  c.token_file = absl::GetFlag(FLAGS_token_file);
  c.quick = absl::GetFlag(FLAGS_quick);
  if (c.quick) SetQuickConfigs(c);
  if (c.token_file.empty()) {
    c.token_file =
        absl::StrFormat("/tmp/pinwheel_bench_tokens_%d.u16", c.sizes.tokens);
  }
  const Sizes& s = c.sizes;
  if (s.batches < 1 || s.w2_batches < 1 || s.naive_batches < 1 ||
      s.warmup < 0 || c.naive_threads < 1 || s.gemm_n < 1 ||
      c.epochs_check < 0 || s.tokens < 1 || c.repeat < 1) {
    return absl::InvalidArgumentError(
        "--batches, --w2_batches, --naive_batches, --naive_threads, "
        "--gemm_n, --w2_tokens and --repeat must be >= 1; --warmup and "
        "--epochs_check >= 0");
  }
  if (c.pin_consumer_cpu >= 0) {
    // Checks the CPU once, up front, rather than in the first pinwheel row.
    PINWHEEL_ASSIGN_OR_RETURN(std::optional<ConsumerPin> pin,
                              ConsumerPin::Start(c.pin_consumer_cpu));
  }
  return c;
}

// One row of a workload, before it is measured: what to run.
struct RowSpec {
  Row proto;  // workload, method, configuration, note
  std::optional<PinwheelConfig> pinwheel;
  int batches = 0;  // timed batches
};

// A workload's summary table, kept for the end of the run and --quick.
struct WorkloadSummary {
  std::string workload;
  std::string title;
  size_t bytes_per_batch = 0;
  std::vector<RepeatedRow> rows;  // the reference first
};

// What a workload's consumer does after each batch and what its rows are
// compared with.
struct WorkloadSteps {
  // Queued on the consumer stream after each batch (w3: the GEMMs; w2w: the
  // widening); null: nothing.
  ConsumerStep* step = nullptr;
  // w3: the reference is this compute step alone instead of the raw copy.
  GemmStep* compute = nullptr;
  // w2w: also measure the raw pinned copy of this many bytes (w2's batch)
  // next to every row; 0: no.
  size_t w2_reference_bytes = 0;
  // w4: the device stage of the pinwheel rows; null: none.
  std::shared_ptr<const DeviceTransform> device_transform;
  // false: no pageable / naive rows whatever --baselines says (w4).
  bool baselines = true;
};

// Runs the rows of one workload, printing and recording each as it ends.
class WorkloadRunner {
 public:
  WorkloadRunner(const Config& config, JsonLinesWriter& json,
                 ConsumerStream* consumer)
      : config_(config), json_(json), consumer_(consumer) {}

  absl::Status RunImages(bool with_compute);
  // w2, or w2w with `windows`.
  absl::Status RunTokens(bool windows);
  // w2p: w2's tokens packed from documents.
  absl::Status RunPacked();
  // w4: decode-bound images from --w4_root (Note [w4]).
  absl::Status RunImageFolder();
  absl::Status RunMemoryCheck();

  const std::vector<WorkloadSummary>& summaries() const { return summaries_; }

 private:
  bool cuda() const { return config_.device.is_cuda(); }
  void* consumer_native() const {
    return consumer_ != nullptr ? consumer_->native() : nullptr;
  }

  absl::StatusOr<std::shared_ptr<const Dataset>> Images(bool streaming_stores);

  // Runs every row of a workload --repeat times in interleaved rounds (see
  // Note [repetitions]): the pageable copy and the naive loader (with
  // --baselines), then pinwheel at every configuration of the workload.
  // `steps.compute` (w3) makes the compute alone the reference instead of
  // the raw copy.
  absl::Status RunRows(const std::string& workload, const std::string& title,
                       std::shared_ptr<const Dataset> dataset,
                       int64_t batch_size, int batches,
                       const WorkloadSteps& steps);

  absl::StatusOr<Measurement> MeasureRow(const RowSpec& spec,
                                         std::shared_ptr<const Dataset> dataset,
                                         const BatchLayout& layout,
                                         int64_t batch_size,
                                         const WorkloadSteps& steps);

  const Config& config_;
  JsonLinesWriter& json_;
  ConsumerStream* consumer_;  // null on the host backend
  // w1 and w3 share them: memcpy and streaming stores.
  std::shared_ptr<const Dataset> images_[2];
  std::vector<WorkloadSummary> summaries_;
};

absl::StatusOr<std::shared_ptr<const Dataset>> WorkloadRunner::Images(
    bool streaming_stores) {
  std::shared_ptr<const Dataset>& images = images_[streaming_stores ? 1 : 0];
  if (images == nullptr) {
    const Sizes& s = config_.sizes;
    PINWHEEL_ASSIGN_OR_RETURN(
        images, MakeImageDataset({.samples = s.image_samples,
                                  .side = s.image_side,
                                  .seed = 1,
                                  .streaming_stores = streaming_stores}));
  }
  return images;
}

absl::StatusOr<Measurement> WorkloadRunner::MeasureRow(
    const RowSpec& spec, std::shared_ptr<const Dataset> dataset,
    const BatchLayout& layout, int64_t batch_size, const WorkloadSteps& steps) {
  ConsumerStep* const step = steps.step;
  const Sizes& s = config_.sizes;
  const int ordinal = config_.device.ordinal();
  const size_t bytes = layout.CopyBytes(batch_size);
  const std::string name =
      absl::StrCat(spec.proto.workload, " ", spec.proto.Label());
  NvtxRange range(name);
  if (spec.proto.method == "pageable") {
    return InRow(MeasurePageableCopy(ordinal, bytes, spec.batches, s.warmup),
                 name);
  }
  if (spec.proto.method == "naive") {
    return InRow(MeasureNaiveLoader(*dataset, layout,
                                    {.ordinal = ordinal,
                                     .batches = spec.batches,
                                     .warmup = s.warmup,
                                     .collate_threads = config_.naive_threads,
                                     .seed = config_.seed,
                                     .step = step,
                                     .stream = consumer_native()}),
                 name);
  }
  const PinwheelConfig& c = *spec.pinwheel;
  if (c.streaming_stores) {
    PINWHEEL_ASSIGN_OR_RETURN(dataset, Images(/*streaming_stores=*/true));
  }
  return InRow(
      MeasurePinwheel(dataset,
                      {.device = config_.device,
                       .batch_size = batch_size,
                       .seed = config_.seed,
                       .workers = c.workers,
                       .prefetch = c.prefetch,
                       .device_buffers = c.device_buffers,
                       .warmup = s.warmup,
                       .batches = spec.batches,
                       .timeout = config_.timeout,
                       .consumer_stream = consumer_native(),
                       .step = step,
                       .pin_consumer_cpu = config_.pin_consumer_cpu,
                       .gather = c.gather ? GatherMode::kOn : GatherMode::kOff,
                       .device_transform = steps.device_transform}),
      name);
}

absl::Status WorkloadRunner::RunRows(const std::string& workload,
                                     const std::string& title,
                                     std::shared_ptr<const Dataset> dataset,
                                     int64_t batch_size, int batches,
                                     const WorkloadSteps& steps) {
  const Sizes& s = config_.sizes;
  GemmStep* const compute = steps.compute;
  const int repeat = config_.repeat;
  PINWHEEL_ASSIGN_OR_RETURN(BatchLayout layout,
                            BatchLayout::Create(dataset->layout(), batch_size));
  const size_t bytes = layout.CopyBytes(batch_size);
  constexpr absl::string_view kNeedsCuda =
      "skipped: needs a CUDA device (host backend)";

  // The rows, in the order each round measures them.
  std::vector<RowSpec> specs;
  const bool baselines = config_.baselines && steps.baselines;
  if (baselines && compute == nullptr) {
    specs.push_back({.proto = {.workload = workload,
                               .method = "pageable",
                               .note = "cudaMemcpy from malloc'd memory"},
                     .batches = batches});
  }
  if (baselines) {
    specs.push_back(
        {.proto = {.workload = workload,
                   .method = "naive",
                   .workers = config_.naive_threads,
                   .note = "malloc+collate, cudaHostAlloc+memcpy per batch, "
                           "copy+sync"},
         .batches = s.naive_batches});
  }
  for (const PinwheelConfig& c : config_.configs.at(workload)) {
    specs.push_back({.proto = {.workload = workload,
                               .method = "pinwheel",
                               .workers = c.workers,
                               .prefetch = c.prefetch,
                               .device_buffers = c.device_buffers,
                               .stores = c.streaming_stores ? "nt" : "",
                               .gather = c.gather},
                     .pinwheel = c,
                     .batches = batches});
  }

  // The reference: the raw pinned copy, or w3's compute step alone.
  Row reference_proto{
      .workload = workload,
      .method = compute == nullptr ? "raw_pinned" : "compute_alone",
      .note =
          compute == nullptr
              ? "cudaMemcpyAsync from one pinned buffer, event-timed"
              : absl::StrFormat("2 bf16 GEMMs %d^3, event-timed", s.gemm_n)};
  std::unique_ptr<RawPinnedCopier> copier;
  if (cuda() && compute == nullptr) {
    PINWHEEL_ASSIGN_OR_RETURN(
        copier, InRow(RawPinnedCopier::Create(config_.device.ordinal(), bytes),
                      workload + " raw_pinned"));
  }
  // w2w: w2's raw copy too, measured right after the workload's own.
  const Row w2_reference_proto{
      .workload = workload,
      .method = "raw_pinned_w2",
      .note = absl::StrFormat(
          "w2's batch (%d bytes, i64 input+target): the reference of 'vs "
          "w2's raw copy'",
          steps.w2_reference_bytes)};
  std::unique_ptr<RawPinnedCopier> w2_copier;
  if (cuda() && steps.w2_reference_bytes > 0) {
    PINWHEEL_ASSIGN_OR_RETURN(
        w2_copier, InRow(RawPinnedCopier::Create(config_.device.ordinal(),
                                                 steps.w2_reference_bytes),
                         workload + " raw_pinned_w2"));
  }
  const bool has_reference = cuda();
  RepeatedRow reference;
  RepeatedRow w2_reference;
  int reference_count = 0;
  double w2_raw_bps = 0;  // the latest measurement of w2's raw copy
  auto measure_reference = [&]() -> absl::StatusOr<Row> {
    Row row = reference_proto;
    row.repetition = ++reference_count;
    if (w2_copier != nullptr) {
      Row w2_row = w2_reference_proto;
      w2_row.repetition = reference_count;
      NvtxRange range(workload + " raw_pinned_w2");
      PINWHEEL_ASSIGN_OR_RETURN(w2_row.measurement,
                                InRow(w2_copier->Measure(batches, s.warmup),
                                      workload + " raw_pinned_w2"));
      w2_row.raw_gbps = w2_row.gbps();
      w2_raw_bps = w2_row.batches_per_second();
      PINWHEEL_RETURN_IF_ERROR(json_.Write(RowToJson(w2_row)));
      w2_reference.reps.push_back(std::move(w2_row));
    }
    if (compute == nullptr) {
      NvtxRange range(workload + " raw_pinned");
      PINWHEEL_ASSIGN_OR_RETURN(
          row.measurement,
          InRow(copier->Measure(batches, s.warmup), workload + " raw_pinned"));
      row.raw_gbps = row.gbps();
    } else {
      NvtxRange range(workload + " compute_alone");
      PINWHEEL_ASSIGN_OR_RETURN(
          row.compute_ms,
          InRow(compute->TimeAloneMs(consumer_native(), batches, s.warmup),
                workload + " compute_alone"));
      row.measurement.batches = batches;
      row.measurement.wall_seconds = row.compute_ms * batches / 1e3;
      row.measurement.device_bytes = row.measurement.device_bytes_first =
          compute->device_bytes();
    }
    PINWHEEL_RETURN_IF_ERROR(json_.Write(RowToJson(row)));
    reference.reps.push_back(row);
    return row;
  };

  std::vector<RepeatedRow> rows(specs.size());
  for (int round = 1; round <= repeat; ++round) {
    std::optional<Row> before;
    double w2_raw_bps_before = 0;
    if (has_reference) {
      PINWHEEL_ASSIGN_OR_RETURN(before, measure_reference());
      w2_raw_bps_before = w2_raw_bps;
    }
    for (size_t i = 0; i < specs.size(); ++i) {
      Row row = specs[i].proto;
      row.repetition = round;
      const bool needs_cuda = row.method != "pinwheel";
      if (needs_cuda && !cuda()) {
        row.skipped = true;
        row.note = std::string(kNeedsCuda);
        rows[i].reps = {row};
        continue;
      }
      PINWHEEL_ASSIGN_OR_RETURN(
          row.measurement,
          MeasureRow(specs[i], dataset, layout, batch_size, steps));
      if (has_reference) {
        PINWHEEL_ASSIGN_OR_RETURN(Row after, measure_reference());
        if (compute == nullptr) {
          row.raw_gbps = (before->gbps() + after.gbps()) / 2;
        } else {
          row.compute_ms = (before->compute_ms + after.compute_ms) / 2;
        }
        // Rows that end with w2's tensors (the step ran): not the pageable
        // copy.
        if (w2_copier != nullptr && row.method != "pageable") {
          row.w2_raw_batches_per_second = (w2_raw_bps_before + w2_raw_bps) / 2;
        }
        w2_raw_bps_before = w2_raw_bps;
        before = std::move(after);
      }
      PrintRepetition(row, repeat);
      PINWHEEL_RETURN_IF_ERROR(json_.Write(RowToJson(row)));
      rows[i].reps.push_back(std::move(row));
    }
  }

  WorkloadSummary summary{
      .workload = workload, .title = title, .bytes_per_batch = bytes};
  if (has_reference) {
    summary.rows.push_back(std::move(reference));
    if (w2_copier != nullptr) summary.rows.push_back(std::move(w2_reference));
  } else {
    Row skipped = reference_proto;
    skipped.skipped = true;
    skipped.note = compute == nullptr ? std::string(kNeedsCuda)
                                      : "skipped: needs a CUDA device";
    summary.rows.push_back(RepeatedRow{.reps = {skipped}});
  }
  for (RepeatedRow& row : rows) summary.rows.push_back(std::move(row));
  PrintSummaryHeader(absl::StrFormat(
      "%s summary over %d repetitions (medians; [min-max])", workload, repeat));
  for (const RepeatedRow& row : summary.rows) {
    PrintSummaryRow(row);
    PINWHEEL_RETURN_IF_ERROR(json_.Write(RepeatedRowToJson(row)));
  }
  summaries_.push_back(std::move(summary));
  return absl::OkStatus();
}

absl::Status WorkloadRunner::RunImages(bool with_compute) {
  const Sizes& s = config_.sizes;
  const std::string workload = with_compute ? "w3" : "w1";
  PINWHEEL_ASSIGN_OR_RETURN(std::shared_ptr<const Dataset> dataset,
                            Images(/*streaming_stores=*/false));
  PINWHEEL_ASSIGN_OR_RETURN(
      BatchLayout layout,
      BatchLayout::Create(dataset->layout(), s.image_batch));
  const double mb = static_cast<double>(layout.CopyBytes(s.image_batch)) / 1e6;
  const std::string title = absl::StrFormat(
      "%s %s: %d x (%s) = %.2f MB a batch, %d in-memory samples, shuffled; "
      "%d timed batches a row (naive %d) after %d warm-up",
      workload, with_compute ? "overlap (images + 2 GEMMs a step)" : "images",
      s.image_batch, dataset->layout().ToString(), mb, s.image_samples,
      s.batches, s.naive_batches, s.warmup);
  absl::PrintF("\n%s\n", title);
  PINWHEEL_RETURN_IF_ERROR(json_.Write(JsonObject(
      {{"kind", JsonString("workload")},
       {"workload", JsonString(workload)},
       {"batch_size", absl::StrCat(s.image_batch)},
       {"bytes_per_batch", absl::StrCat(layout.CopyBytes(s.image_batch))},
       {"samples", absl::StrCat(s.image_samples)},
       {"layout", JsonString(dataset->layout().ToString())},
       {"gemm_n", absl::StrCat(with_compute ? s.gemm_n : 0)}})));

  if (!with_compute) {
    return RunRows(workload, title, dataset, s.image_batch, s.batches, {});
  }
  if (!cuda()) {
    constexpr absl::string_view kNeedsCuda =
        "skipped: w3 needs a CUDA device and cuBLAS (host backend)";
    WorkloadSummary summary{.workload = workload, .title = title};
    PrintSummaryHeader(absl::StrCat(workload, " summary"));
    for (const char* method : {"compute_alone", "naive", "pinwheel"}) {
      Row row{.workload = workload,
              .method = method,
              .skipped = true,
              .note = std::string(kNeedsCuda)};
      RepeatedRow repeated{.reps = {row}};
      PrintSummaryRow(repeated);
      PINWHEEL_RETURN_IF_ERROR(json_.Write(RepeatedRowToJson(repeated)));
      summary.rows.push_back(std::move(repeated));
    }
    summaries_.push_back(std::move(summary));
    return absl::OkStatus();
  }
  PINWHEEL_ASSIGN_OR_RETURN(
      std::unique_ptr<GemmStep> step,
      GemmStep::Create(config_.device.ordinal(), s.gemm_n));
  return RunRows(workload, title, dataset, s.image_batch, s.batches,
                 {.step = step.get(), .compute = step.get()});
}

absl::Status WorkloadRunner::RunTokens(bool windows) {
  const Sizes& s = config_.sizes;
  const std::string workload = windows ? "w2w" : "w2";
  PINWHEEL_ASSIGN_OR_RETURN(bool written,
                            EnsureTokenFile(config_.token_file, s.tokens));
  PINWHEEL_ASSIGN_OR_RETURN(
      std::shared_ptr<const Dataset> dataset,
      OpenTokenDataset(config_.token_file, s.seq_len, /*seed=*/11, windows));
  PINWHEEL_ASSIGN_OR_RETURN(
      BatchLayout layout,
      BatchLayout::Create(dataset->layout(), s.token_batch));
  const double mb = static_cast<double>(layout.CopyBytes(s.token_batch)) / 1e6;
  // w2w's rows are also compared with w2's batch (the i64 layout).
  WorkloadSteps steps;
  std::unique_ptr<WidenStep> widen;
  std::string consumer = "";
  if (windows) {
    PINWHEEL_ASSIGN_OR_RETURN(
        std::shared_ptr<const Dataset> widened,
        OpenTokenDataset(config_.token_file, s.seq_len, /*seed=*/11));
    PINWHEEL_ASSIGN_OR_RETURN(
        BatchLayout w2_layout,
        BatchLayout::Create(widened->layout(), s.token_batch));
    steps.w2_reference_bytes = w2_layout.CopyBytes(s.token_batch);
    if (cuda()) {
      PINWHEEL_ASSIGN_OR_RETURN(
          widen,
          WidenStep::Create(config_.device.ordinal(), /*token_bytes=*/2,
                            /*signed_tokens=*/false, s.token_batch, s.seq_len));
      steps.step = widen.get();
      consumer = absl::StrFormat(
          "; the consumer widens each batch on its stream into i64 input and "
          "target [%d, %d] (w2's tensors; %.3f MB of device arrays)",
          s.token_batch, s.seq_len,
          static_cast<double>(widen->device_bytes()) / 1e6);
    } else {
      consumer =
          "; host backend: no widening kernel, the rows ship the windows only";
    }
  }
  const std::string title = absl::StrFormat(
      "%s tokens%s: %d x (%s) = %.3f MB a batch, %d windows over %d u16 "
      "tokens in %s%s; %d timed batches a row (naive %d) after %d "
      "warm-up%s",
      workload, windows ? " shipped as windows" : "", s.token_batch,
      dataset->layout().ToString(), mb, dataset->size(), s.tokens,
      config_.token_file, written ? " (written now)" : "", s.w2_batches,
      s.naive_batches, s.warmup, consumer);
  absl::PrintF("\n%s\n", title);
  PINWHEEL_RETURN_IF_ERROR(json_.Write(JsonObject(
      {{"kind", JsonString("workload")},
       {"workload", JsonString(workload)},
       {"batch_size", absl::StrCat(s.token_batch)},
       {"bytes_per_batch", absl::StrCat(layout.CopyBytes(s.token_batch))},
       {"samples", absl::StrCat(dataset->size())},
       {"tokens", absl::StrCat(s.tokens)},
       {"layout", JsonString(dataset->layout().ToString())}})));
  return RunRows(workload, title, dataset, s.token_batch, s.w2_batches, steps);
}

absl::Status WorkloadRunner::RunPacked() {
  const Sizes& s = config_.sizes;
  PINWHEEL_ASSIGN_OR_RETURN(bool written,
                            EnsureTokenFile(config_.token_file, s.tokens));
  const std::string offsets = absl::StrCat(config_.token_file, ".docs");
  PINWHEEL_RETURN_IF_ERROR(WriteDocumentOffsets(
      offsets, s.tokens, std::max<int64_t>(1, s.seq_len / 4)));
  PINWHEEL_ASSIGN_OR_RETURN(
      std::shared_ptr<PackedTokenDataset> packed,
      PackedTokenDataset::Open(
          config_.token_file,
          {.token_bytes = 2, .seq_len = s.seq_len, .offsets_path = offsets}));
  std::shared_ptr<const Dataset> dataset = packed;
  PINWHEEL_ASSIGN_OR_RETURN(
      BatchLayout layout,
      BatchLayout::Create(dataset->layout(), s.token_batch));
  const double mb = static_cast<double>(layout.CopyBytes(s.token_batch)) / 1e6;
  const std::string title = absl::StrFormat(
      "w2p packed tokens: %d x (%s) = %.3f MB a batch, %d rows from %d "
      "documents of %d u16 tokens in %s%s; %d timed batches a row (naive "
      "%d) after %d warm-up",
      s.token_batch, dataset->layout().ToString(), mb, dataset->size(),
      packed->documents(), s.tokens, config_.token_file,
      written ? " (written now)" : "", s.w2_batches, s.naive_batches, s.warmup);
  absl::PrintF("\n%s\n", title);
  PINWHEEL_RETURN_IF_ERROR(json_.Write(JsonObject(
      {{"kind", JsonString("workload")},
       {"workload", JsonString("w2p")},
       {"batch_size", absl::StrCat(s.token_batch)},
       {"bytes_per_batch", absl::StrCat(layout.CopyBytes(s.token_batch))},
       {"samples", absl::StrCat(dataset->size())},
       {"tokens", absl::StrCat(s.tokens)},
       {"layout", JsonString(dataset->layout().ToString())}})));
  return RunRows("w2p", title, dataset, s.token_batch, s.w2_batches, {});
}

absl::Status WorkloadRunner::RunImageFolder() {
  const Sizes& s = config_.sizes;
  const std::string& root = config_.w4_root;
  const std::string make = absl::StrFormat(
      "make it with samples/bench's make_images: make_images --out=%s "
      "--count=10000 --classes=100",
      root.empty() ? "/data/w4" : root);
  if (root.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("w4 needs --w4_root, an ImageFolder of JPEGs; ", make));
  }
  absl::StatusOr<std::shared_ptr<ImageFolderDataset>> folder;
  {
    NvtxRange range("w4 open image folder");
    folder =
        ImageFolderDataset::Open(root, {{.train = true, .size = s.w4_size}});
  }
  if (!folder.ok()) {
    return absl::Status(folder.status().code(),
                        absl::StrCat("w4: --w4_root=", root, ": ",
                                     folder.status().message(), "; ", make));
  }
  if ((*folder)->size() < s.w4_batch) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "w4: --w4_root=%s holds %d images, fewer than a batch (%d)", root,
        (*folder)->size(), s.w4_batch));
  }
  // ImageNet's mean and std in 0..255 units: torchvision's Normalize.
  PINWHEEL_ASSIGN_OR_RETURN(
      std::shared_ptr<NormalizeImage> normalize,
      NormalizeImage::Create({.field = "image",
                              .input_layout = ImageLayout::kHWC,
                              .output_dtype = DType::kBFloat16,
                              .mean = {123.675f, 116.28f, 103.53f},
                              .std = {58.395f, 57.12f, 57.375f}}));
  std::shared_ptr<const Dataset> dataset = *folder;
  PINWHEEL_ASSIGN_OR_RETURN(BatchLayout layout,
                            BatchLayout::Create(dataset->layout(), s.w4_batch));
  const std::string title = absl::StrFormat(
      "w4 decode-bound images: %d x RandomResizedCrop(%d) + flip from %d "
      "JPEGs in %s (%d classes), normalised to bf16 CHW on the device stage; "
      "%d timed batches a row after %d warm-up",
      s.w4_batch, s.w4_size, dataset->size(), root, (*folder)->classes().size(),
      s.w4_batches, s.warmup);
  absl::PrintF("\n%s\n", title);
  PINWHEEL_RETURN_IF_ERROR(json_.Write(JsonObject(
      {{"kind", JsonString("workload")},
       {"workload", JsonString("w4")},
       {"batch_size", absl::StrCat(s.w4_batch)},
       {"bytes_per_batch", absl::StrCat(layout.CopyBytes(s.w4_batch))},
       {"samples", absl::StrCat(dataset->size())},
       {"root", JsonString(root)},
       {"size", absl::StrCat(s.w4_size)},
       {"layout", JsonString(dataset->layout().ToString())}})));
  PINWHEEL_RETURN_IF_ERROR(
      RunRows("w4", title, dataset, s.w4_batch, s.w4_batches,
              {.device_transform = normalize, .baselines = false}));

  // Images, cores and images per core of each pinwheel row: the figures
  // the issue compares with torchvision's DataLoader.
  const WorkloadSummary& summary = summaries_.back();
  absl::PrintF(
      "\nw4 images (%d repetitions a row; median [min-max]; cores = process "
      "CPU time / wall time, every thread)\n",
      config_.repeat);
  absl::PrintF("  %-16s %22s %7s %12s\n", "row", "img/s", "cores",
               "img/s/core");
  for (const RepeatedRow& row : summary.rows) {
    if (row.skipped() || row.config().method != "pinwheel") continue;
    std::vector<double> rates, cores, per_core;
    for (const Row& rep : row.reps) {
      const double rate = rep.batches_per_second() * s.w4_batch;
      rates.push_back(rate);
      cores.push_back(rep.cpu_cores());
      per_core.push_back(rep.cpu_cores() > 0 ? rate / rep.cpu_cores() : 0);
    }
    const Spread rate = SpreadOf(rates);
    const Spread core = SpreadOf(cores);
    const Spread each = SpreadOf(per_core);
    absl::PrintF("  pinwheel %-7s %8.0f [%5.0f-%5.0f] %7.1f %12.0f\n",
                 absl::StrFormat("%dw", row.config().workers), rate.median,
                 rate.min, rate.max, core.median, each.median);
    PINWHEEL_RETURN_IF_ERROR(json_.Write(
        JsonObject({{"kind", JsonString("w4_row")},
                    {"workload", JsonString("w4")},
                    {"method", JsonString("pinwheel")},
                    {"workers", absl::StrCat(row.config().workers)},
                    {"prefetch", absl::StrCat(row.config().prefetch)},
                    {"img_per_s", JsonNumber(rate.median)},
                    {"img_per_s_min", JsonNumber(rate.min)},
                    {"img_per_s_max", JsonNumber(rate.max)},
                    {"cores", JsonNumber(core.median)},
                    {"img_per_s_per_core", JsonNumber(each.median)},
                    {"repetitions", absl::StrCat(rate.n)}})));
  }
  return absl::OkStatus();
}

absl::Status WorkloadRunner::RunMemoryCheck() {
  const Sizes& s = config_.sizes;
  const int epochs = config_.epochs_check;
  PINWHEEL_ASSIGN_OR_RETURN(
      std::shared_ptr<const Dataset> dataset,
      MakeImageDataset(
          {.samples = s.check_samples, .side = s.image_side, .seed = 2}));
  PINWHEEL_ASSIGN_OR_RETURN(
      MemoryCheck check,
      InRow(RunEpochsCheck(dataset,
                           {.device = config_.device,
                            .batch_size = s.check_batch,
                            .seed = config_.seed,
                            .workers = s.check_workers,
                            .prefetch = s.check_prefetch,
                            .device_buffers = config_.device_buffers,
                            .timeout = config_.timeout,
                            .consumer_stream = consumer_native()},
                           epochs),
            "memory check"));
  constexpr double kMB = 1e6;
  absl::PrintF(
      "\nmemory over %d epochs (%d samples of %s, batch %d, %d workers, "
      "prefetch %d; %d batches in %.2f s):\n"
      "  pinned bytes  after batch 1: %d   after the last epoch: %d\n"
      "  device bytes  after batch 1: %d   after the last epoch: %d\n"
      "  RSS           after batch 1: %.1f MB   after the last epoch: %.1f MB "
      "(%+.2f MB)\n"
      "  %s\n",
      check.epochs, s.check_samples, dataset->layout().ToString(),
      s.check_batch, s.check_workers, s.check_prefetch, check.batches,
      check.wall_seconds, check.pinned_bytes_first, check.pinned_bytes_last,
      check.device_bytes_first, check.device_bytes_last, check.rss_first / kMB,
      check.rss_last / kMB,
      (static_cast<double>(check.rss_last) -
       static_cast<double>(check.rss_first)) /
          kMB,
      check.constant() ? "pinned and device bytes constant"
                       : "PINNED OR DEVICE BYTES CHANGED");
  auto integer = [](size_t v) { return absl::StrCat(v); };
  PINWHEEL_RETURN_IF_ERROR(json_.Write(JsonObject({
      {"kind", JsonString("memory")},
      {"epochs", absl::StrCat(check.epochs)},
      {"batches", absl::StrCat(check.batches)},
      {"wall_s", JsonNumber(check.wall_seconds)},
      {"pinned_bytes_first", integer(check.pinned_bytes_first)},
      {"pinned_bytes_last", integer(check.pinned_bytes_last)},
      {"device_bytes_first", integer(check.device_bytes_first)},
      {"device_bytes_last", integer(check.device_bytes_last)},
      {"rss_first", integer(check.rss_first)},
      {"rss_last", integer(check.rss_last)},
      {"constant", check.constant() ? "true" : "false"},
  })));
  if (!check.constant()) {
    return absl::InternalError(
        "pinned or device bytes changed between the first batch and the last "
        "epoch (see above)");
  }
  return absl::OkStatus();
}

// --quick: the row to recommend among a workload's pinwheel rows (memcpy
// stores): the fewest workers, then the smallest prefetch and device
// buffers, whose median is within 3 % of the best median. The figure is
// the median ratio to raw where there is one (w1 on a GPU), else the median
// batches per second. Returns null when there is no measured pinwheel row.
const RepeatedRow* Recommend(const WorkloadSummary& summary,
                             const RepeatedRow** best_out) {
  auto figure = [](const RepeatedRow& row) {
    const Spread ratio = row.ratio_to_raw();
    return ratio.n > 0 ? ratio.median : row.batches_per_second().median;
  };
  std::vector<const RepeatedRow*> candidates;
  for (const RepeatedRow& row : summary.rows) {
    if (!row.skipped() && row.config().method == "pinwheel" &&
        row.config().stores.empty() && !row.config().gather) {
      candidates.push_back(&row);
    }
  }
  if (candidates.empty()) return nullptr;
  const RepeatedRow* best =
      *std::max_element(candidates.begin(), candidates.end(),
                        [&](const RepeatedRow* a, const RepeatedRow* b) {
                          return figure(*a) < figure(*b);
                        });
  *best_out = best;
  const RepeatedRow* chosen = nullptr;
  for (const RepeatedRow* row : candidates) {
    if (figure(*row) < 0.97 * figure(*best)) continue;
    auto key = [](const RepeatedRow* r) {
      const Row& c = r->config();
      return std::make_tuple(c.workers, c.prefetch, c.device_buffers);
    };
    if (chosen == nullptr || key(row) < key(chosen)) chosen = row;
  }
  return chosen;
}

// Writes --quick's sizing: per workload the recommended row, then one line.
absl::Status PrintSizing(const std::vector<WorkloadSummary>& summaries,
                         int repeat, bool cuda, JsonLinesWriter& json) {
  absl::PrintF(
      "\n== sizing: what to set on this machine (%d repetitions a row; "
      "the fewest workers within 3%% of the best median)\n",
      repeat);
  std::vector<std::string> advice;
  const RepeatedRow* best_w2 = nullptr;
  const RepeatedRow* best_w2w = nullptr;
  for (const WorkloadSummary& summary : summaries) {
    if (summary.workload == "w2w") {  // compared with w2 below, no advice
      Recommend(summary, &best_w2w);
      continue;
    }
    const RepeatedRow* best = nullptr;
    const RepeatedRow* chosen = Recommend(summary, &best);
    if (chosen == nullptr) continue;
    const Row& c = chosen->config();
    if (summary.workload == "w2") best_w2 = best;
    const bool large = summary.workload != "w2";
    const std::string size =
        absl::StrFormat("%.3g MB", summary.bytes_per_batch / 1e6);
    const Spread ratio = chosen->ratio_to_raw();
    const Spread rate = chosen->batches_per_second();
    std::string versus = ratio.n > 0
                             ? absl::StrFormat(
                                   "; %.3f [%.3f-%.3f] of this machine's "
                                   "pinned copy limit",
                                   ratio.median, ratio.min, ratio.max)
                             : "; no copy limit measured (host backend)";
    absl::PrintF(
        "  %s batches (%s, %s): num_workers=%d prefetch=%d device_buffers=%d: "
        "%.2f GB/s, %s batches/s [%s-%s]%s; CPU %.1f us a batch (%.1f cores "
        "busy)\n",
        large ? "large" : "small", summary.workload, size, c.workers,
        c.prefetch, c.device_buffers, chosen->gbps().median,
        RateText(rate.median), RateText(rate.min), RateText(rate.max), versus,
        chosen->cpu_ms_per_batch().median * 1e3, chosen->cpu_cores().median);
    if (best != chosen) {
      absl::PrintF("    (best median: %s)\n", best->config().Label());
    }
    advice.push_back(absl::StrFormat(
        "num_workers=%d, prefetch=%d%s for batches %s", c.workers, c.prefetch,
        c.device_buffers != 2
            ? absl::StrFormat(", device_buffers=%d", c.device_buffers)
            : "",
        large ? absl::StrFormat("of about %s", size)
              : absl::StrFormat("of about %s or less", size)));
    PINWHEEL_RETURN_IF_ERROR(json.Write(JsonObject(
        {{"kind", JsonString("sizing")},
         {"workload", JsonString(summary.workload)},
         {"workers", absl::StrCat(c.workers)},
         {"prefetch", absl::StrCat(c.prefetch)},
         {"device_buffers", absl::StrCat(c.device_buffers)},
         {"batches_per_s", JsonNumber(rate.median)},
         {"ratio_to_raw", ratio.n > 0 ? JsonNumber(ratio.median) : "null"},
         {"cpu_ms_per_batch",
          JsonNumber(chosen->cpu_ms_per_batch().median)}})));
  }
  if (best_w2 != nullptr && best_w2w != nullptr) {
    // The same tensors on the device at the end: batches/s compare.
    const double w2 = best_w2->batches_per_second().median;
    const double w2w = best_w2w->batches_per_second().median;
    absl::PrintF(
        "  token windows shipped as u16 and %s (w2w %s): %s batches/s "
        "against %s for i64 shipped from the host (w2 %s): %.2fx (best "
        "medians)\n",
        cuda ? "widened on the GPU" : "not widened (host backend)",
        best_w2w->config().Label(), RateText(w2w), RateText(w2),
        best_w2->config().Label(), w2 > 0 ? w2w / w2 : 0);
    PINWHEEL_RETURN_IF_ERROR(
        json.Write(JsonObject({{"kind", JsonString("sizing_windows")},
                               {"w2_batches_per_s", JsonNumber(w2)},
                               {"w2w_batches_per_s", JsonNumber(w2w)}})));
  }
  if (advice.empty()) {
    absl::PrintF("recommendation: none (no pinwheel row was measured)\n");
    return absl::OkStatus();
  }
  absl::PrintF(
      "recommendation: %s (datasets whose Read copies bytes; one that "
      "decodes needs more workers)\n",
      absl::StrJoin(advice, "; "));
  return absl::OkStatus();
}

absl::Status Run(int argc, char** argv) {
  PINWHEEL_ASSIGN_OR_RETURN(Config config, ConfigFromFlags());
  JsonLinesWriter json;
  if (!absl::GetFlag(FLAGS_json).empty()) {
    PINWHEEL_ASSIGN_OR_RETURN(json,
                              JsonLinesWriter::Open(absl::GetFlag(FLAGS_json)));
  }
  const std::string command = absl::StrJoin(argv, argv + argc, " ");
  const std::string date = absl::FormatTime("%Y-%m-%d %H:%M:%S UTC",
                                            absl::Now(), absl::UTCTimeZone());
  const char* tunables = std::getenv("GLIBC_TUNABLES");
  absl::PrintF("pinwheel_bench on %s, %s%s\n  %s\n", config.device.Describe(),
               date,
               absl::GetFlag(FLAGS_smoke) ? " (SMOKE: tiny sizes, timings "
                                            "meaningless)"
                                          : "",
               command);
  absl::PrintF(
      "  %d repetition(s) a row, each against the mean of the reference "
      "measured just before and just after it; consumer %s; "
      "GLIBC_TUNABLES=%s\n",
      config.repeat,
      config.pin_consumer_cpu >= 0
          ? absl::StrFormat("pinned to CPU %d", config.pin_consumer_cpu)
          : "not pinned",
      tunables != nullptr ? tunables : "(unset)");
  absl::PrintF(
      "  GB/s = 1e9 bytes/s of batch data over wall time; vs ref = GB/s "
      "over the raw pinned copy (w3: step time over the compute alone); "
      "cpu us/b = process user+sys CPU per batch, every thread; cores = CPU "
      "time / wall time; wait us/b = the consumer blocked in Next()\n");
  PINWHEEL_RETURN_IF_ERROR(json.Write(JsonObject({
      {"kind", JsonString("run")},
      {"device", JsonString(config.device.ToString())},
      {"device_description", JsonString(config.device.Describe())},
      {"date", JsonString(date)},
      {"command", JsonString(command)},
      {"smoke", absl::GetFlag(FLAGS_smoke) ? "true" : "false"},
      {"quick", config.quick ? "true" : "false"},
      {"cuda_built", CudaRowsBuilt() ? "true" : "false"},
      {"host_cores", absl::StrCat(std::thread::hardware_concurrency())},
      {"repeat", absl::StrCat(config.repeat)},
      {"batches", absl::StrCat(config.sizes.batches)},
      {"w2_batches", absl::StrCat(config.sizes.w2_batches)},
      {"naive_batches", absl::StrCat(config.sizes.naive_batches)},
      {"warmup", absl::StrCat(config.sizes.warmup)},
      {"device_buffers", absl::StrCat(config.device_buffers)},
      {"pin_consumer_cpu", absl::StrCat(config.pin_consumer_cpu)},
      {"glibc_tunables",
       tunables != nullptr ? JsonString(tunables) : std::string("null")},
  })));

  std::unique_ptr<ConsumerStream> consumer;
  if (config.device.is_cuda()) {
    PINWHEEL_ASSIGN_OR_RETURN(consumer,
                              ConsumerStream::Create(config.device.ordinal()));
  }
  WorkloadRunner runner(config, json, consumer.get());
  for (const std::string& workload : config.workloads) {
    if (workload == "w1") PINWHEEL_RETURN_IF_ERROR(runner.RunImages(false));
    if (workload == "w2") PINWHEEL_RETURN_IF_ERROR(runner.RunTokens(false));
    if (workload == "w2w") PINWHEEL_RETURN_IF_ERROR(runner.RunTokens(true));
    if (workload == "w2p") PINWHEEL_RETURN_IF_ERROR(runner.RunPacked());
    if (workload == "w3") PINWHEEL_RETURN_IF_ERROR(runner.RunImages(true));
    if (workload == "w4") PINWHEEL_RETURN_IF_ERROR(runner.RunImageFolder());
  }
  if (config.epochs_check > 0) {
    PINWHEEL_RETURN_IF_ERROR(runner.RunMemoryCheck());
  }
  if (!runner.summaries().empty()) {
    absl::PrintF("\n== summary (%s; %d repetitions a row)\n",
                 config.device.Describe(), config.repeat);
    for (const WorkloadSummary& summary : runner.summaries()) {
      PrintSummaryHeader(summary.title);
      for (const RepeatedRow& row : summary.rows) PrintSummaryRow(row);
    }
  }
  if (config.quick) {
    PINWHEEL_RETURN_IF_ERROR(PrintSizing(runner.summaries(), config.repeat,
                                         config.device.is_cuda(), json));
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace pinwheel::bench

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const absl::Status status = pinwheel::bench::Run(argc, argv);
  if (!status.ok()) {
    absl::FPrintF(stderr, "pinwheel_bench: %s\n", status.ToString());
    return 1;
  }
  return 0;
}
