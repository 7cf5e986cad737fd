#include "samples/bench/bench_config.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "absl/time/time.h"

#include "loader/loader_options.h"
#include "pinning/base/status_macros.h"
#include "samples/bench/thread_pinning.h"
#include "samples/bench/workloads.h"
#include "transfer/device.h"

ABSL_FLAG(std::string, device, "auto",
          "where batches go: auto (first GPU, else host), cpu, cuda:N");
ABSL_FLAG(std::string, workloads, "w1,w2,w2w,w3",
          "comma-separated workloads to run: w1, w2, w2w, w3 (empty: none)");
ABSL_FLAG(std::string, workers, "1,2,4,8,14",
          "comma-separated pinwheel worker counts (for a workload whose "
          "--wN_configs is empty: every worker count x prefetch depth); "
          "'auto': LoaderOptions::kAuto, sized while the row runs");
ABSL_FLAG(std::string, prefetch, "2,4,8",
          "comma-separated pinwheel prefetch depths (pinned slots); 'auto': "
          "LoaderOptions::kAuto");
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
          "w2p's pinwheel rows, as --w2_configs; empty: w2's rows but its "
          "':g' ones (packed rows have no gather path)");
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
ABSL_FLAG(int, auto_settle, 200,
          "rows with workers or prefetch = auto: this many more untimed "
          "batches first (the settling issue 33 allows)");
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

Sizes SizesFromFlags() {
  Sizes s;
  s.tokens = absl::GetFlag(FLAGS_w2_tokens);
  s.gemm_n = absl::GetFlag(FLAGS_gemm_n);
  s.batches = absl::GetFlag(FLAGS_batches);
  s.w2_batches = absl::GetFlag(FLAGS_w2_batches);
  s.naive_batches = absl::GetFlag(FLAGS_naive_batches);
  s.warmup = absl::GetFlag(FLAGS_warmup);
  s.auto_settle = absl::GetFlag(FLAGS_auto_settle);
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
    s.auto_settle = 8;
    s.w4_batch = 16;
    s.w4_size = 32;
    s.w4_batches = 4;
  }
  return s;
}

// Returns the comma-separated positive integers of flag `name`, "auto"
// read as LoaderOptions::kAuto.
absl::StatusOr<std::vector<int>> ParseIntList(absl::string_view name,
                                              absl::string_view value) {
  std::vector<int> out;
  for (absl::string_view item :
       absl::StrSplit(value, ',', absl::SkipWhitespace())) {
    int v = 0;
    if (item == "auto") {
      v = LoaderOptions::kAuto;
    } else if (!absl::SimpleAtoi(item, &v) || v < 1) {
      return absl::InvalidArgumentError(
          absl::StrFormat("--%s=%s: '%s' is not a positive integer or 'auto'",
                          name, value, item));
    }
    out.push_back(v);
  }
  if (out.empty()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("--%s is empty: give at least one value", name));
  }
  return out;
}

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
      // A gather row may read its keys on the consumer's thread (0 workers).
      const int least = c.gather && v.empty() ? 0 : 1;
      if (part == "auto" && v.size() < 2) {  // workers or prefetch
        v.push_back(LoaderOptions::kAuto);
        continue;
      }
      if (!absl::SimpleAtoi(part, &n) || n < least) {
        v.clear();
        break;
      }
      v.push_back(n);
    }
    if (v.size() < 2 || v.size() > 3) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "--%s=%s: '%s' is not WORKERSxPREFETCH[xDEVICE_BUFFERS][:nt] with "
          "positive integers (e.g. 8x4 or 8x4x2:nt; 'auto' for WORKERS or "
          "PREFETCH: autoxauto), or :g for the gather path (1x32x4:g; 0 "
          "workers: keys read in Next(), 0x32x4:g)",
          name, value, item));
    }
    c.workers = v[0];
    c.prefetch = v[1];
    if (v.size() == 3) c.device_buffers = v[2];
    out.push_back(c);
  }
  return out;
}

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

}  // namespace

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
      if (std::string(workload) == "w2p") {
        // Packed rows are read (PackedTokenDataset has no Gather()): w2's
        // ':g' rows would fail Build(), so w2p leaves them out.
        std::erase_if(configs, [](const PinwheelConfig& config) {
          return config.gather;
        });
      }
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
      s.warmup < 0 || s.auto_settle < 0 || c.naive_threads < 1 ||
      s.gemm_n < 1 || c.epochs_check < 0 || s.tokens < 1 || c.repeat < 1) {
    return absl::InvalidArgumentError(
        "--batches, --w2_batches, --naive_batches, --naive_threads, "
        "--gemm_n, --w2_tokens and --repeat must be >= 1; --warmup, "
        "--auto_settle and --epochs_check >= 0");
  }
  if (c.pin_consumer_cpu >= 0) {
    // Checks the CPU once, up front, rather than in the first pinwheel row.
    PINWHEEL_ASSIGN_OR_RETURN(std::optional<ConsumerPin> pin,
                              ConsumerPin::Start(c.pin_consumer_cpu));
  }
  return c;
}

}  // namespace pinwheel::bench
