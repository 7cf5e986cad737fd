// pinwheel_bench: issue #4's benchmark. Measures, in one run so that ratios
// hold on a noisy machine, the raw pinned copy limit, a pageable copy, a
// naive pin-per-batch loader and pinwheel at several worker counts and
// prefetch depths, on three workloads:
//   w1  images: 256 × (u8[3,224,224], i64) from 2048 in-memory samples
//   w2  tokens: 32 windows of 1024 tokens (i64 input and target) from a
//       file of 50M u16 tokens
//   w3  overlap: w1 with two bf16 8192² GEMMs after each batch on the
//       consumer stream, against the GEMMs alone
// Writes a table to stdout and, with --json=FILE, one JSON object a line
// (see plot.py). On the host backend the rows that need CUDA are skipped
// with a note and pinwheel runs on Device::Host().
//
// Example:
//   pinwheel_bench --device=cuda:0 --json=/tmp/bench.jsonl
//   pinwheel_bench --smoke --device=cpu          # what ctest runs
//   pinwheel_bench --workloads= --epochs_check=100   # memory only
#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>
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
#include "absl/time/clock.h"
#include "absl/time/time.h"

#include "loader/dataset.h"
#include "pinning/status_macros.h"
#include "samples/bench/cuda_rows.h"
#include "samples/bench/nvtx_range.h"
#include "samples/bench/process_usage.h"
#include "samples/bench/report.h"
#include "samples/bench/workloads.h"
#include "transfer/device.h"
#include "transfer/sample_layout.h"

ABSL_FLAG(std::string, device, "auto",
          "where batches go: auto (first GPU, else host), cpu, cuda:N");
ABSL_FLAG(std::string, workloads, "w1,w2,w3",
          "comma-separated workloads to run: w1, w2, w3 (empty: none)");
ABSL_FLAG(std::string, workers, "1,2,4,8,14",
          "comma-separated pinwheel worker counts");
ABSL_FLAG(std::string, prefetch, "2,4,8",
          "comma-separated pinwheel prefetch depths (pinned slots)");
ABSL_FLAG(int, batches, 100, "timed batches per row for w1 and w3");
ABSL_FLAG(int, w2_batches, 5000,
          "timed batches per row for w2 (small batches: more are needed)");
ABSL_FLAG(int, warmup, 5, "untimed batches before each row");
ABSL_FLAG(int, device_buffers, 2, "pinwheel device buffers");
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
ABSL_FLAG(bool, smoke, false,
          "tiny sizes (seconds on a CPU): what ctest runs; no timing is "
          "meaningful");
ABSL_FLAG(std::string, json, "", "append one JSON object a line here");

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
  int warmup = 5;
  // The memory check's dataset: few samples, so epochs are short.
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
  s.warmup = absl::GetFlag(FLAGS_warmup);
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
    s.warmup = 2;
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
  std::vector<int> workers;
  std::vector<int> prefetch;
  int device_buffers = 2;
  int naive_threads = 8;
  uint64_t seed = 7;
  absl::Duration timeout = absl::Seconds(120);
  int epochs_check = 0;
  std::string token_file;
};

absl::StatusOr<Config> ConfigFromFlags() {
  Config c;
  PINWHEEL_ASSIGN_OR_RETURN(c.device,
                            Device::Parse(absl::GetFlag(FLAGS_device)));
  c.sizes = SizesFromFlags();
  for (absl::string_view w : absl::StrSplit(absl::GetFlag(FLAGS_workloads), ',',
                                            absl::SkipWhitespace())) {
    if (w != "w1" && w != "w2" && w != "w3") {
      return absl::InvalidArgumentError(absl::StrFormat(
          "--workloads: unknown workload '%s' (w1, w2 or w3)", w));
    }
    c.workloads.emplace_back(w);
  }
  PINWHEEL_ASSIGN_OR_RETURN(
      c.workers, ParseIntList("workers", absl::GetFlag(FLAGS_workers)));
  PINWHEEL_ASSIGN_OR_RETURN(
      c.prefetch, ParseIntList("prefetch", absl::GetFlag(FLAGS_prefetch)));
  c.device_buffers = absl::GetFlag(FLAGS_device_buffers);
  c.naive_threads = absl::GetFlag(FLAGS_naive_threads);
  c.seed = absl::GetFlag(FLAGS_seed);
  c.timeout = absl::Seconds(absl::GetFlag(FLAGS_timeout_s));
  c.epochs_check = absl::GetFlag(FLAGS_epochs_check);
  c.token_file = absl::GetFlag(FLAGS_token_file);
  if (c.token_file.empty()) {
    c.token_file =
        absl::StrFormat("/tmp/pinwheel_bench_tokens_%d.u16", c.sizes.tokens);
  }
  const Sizes& s = c.sizes;
  if (s.batches < 1 || s.w2_batches < 1 || s.warmup < 0 ||
      c.naive_threads < 1 || s.gemm_n < 1 || c.epochs_check < 0 ||
      s.tokens < 1) {
    return absl::InvalidArgumentError(
        "--batches, --w2_batches, --naive_threads, --gemm_n and --w2_tokens "
        "must be >= 1; --warmup and --epochs_check >= 0");
  }
  return c;
}

// Runs the rows of one workload, printing and recording each as it ends.
class WorkloadRunner {
 public:
  WorkloadRunner(const Config& config, JsonLinesWriter& json,
                 ConsumerStream* consumer)
      : config_(config), json_(json), consumer_(consumer) {}

  absl::Status RunImages(bool with_compute);
  absl::Status RunTokens();
  absl::Status RunMemoryCheck();

 private:
  bool cuda() const { return config_.device.is_cuda(); }
  void* consumer_native() const {
    return consumer_ != nullptr ? consumer_->native() : nullptr;
  }

  absl::Status Emit(const Row& row) {
    PrintRow(row);
    return json_.Write(RowToJson(row));
  }
  absl::Status EmitSkipped(Row row, absl::string_view why) {
    row.skipped = true;
    row.note = std::string(why);
    return Emit(row);
  }

  absl::StatusOr<std::shared_ptr<const Dataset>> Images();

  // Runs the rows of one workload: the raw pinned and pageable copies (or,
  // with a compute `step`, the step alone), the naive loader, and pinwheel
  // for every prefetch depth × worker count.
  absl::Status RunCopyRows(const std::string& workload,
                           std::shared_ptr<const Dataset> dataset,
                           int64_t batch_size, int batches, GemmStep* step);

  const Config& config_;
  JsonLinesWriter& json_;
  ConsumerStream* consumer_;               // null on the host backend
  std::shared_ptr<const Dataset> images_;  // w1 and w3 share it
  double w1_raw_gbps_ = 0;
};

absl::StatusOr<std::shared_ptr<const Dataset>> WorkloadRunner::Images() {
  if (images_ == nullptr) {
    const Sizes& s = config_.sizes;
    PINWHEEL_ASSIGN_OR_RETURN(
        images_,
        MakeImageDataset(
            {.samples = s.image_samples, .side = s.image_side, .seed = 1}));
  }
  return images_;
}

absl::Status WorkloadRunner::RunCopyRows(const std::string& workload,
                                         std::shared_ptr<const Dataset> dataset,
                                         int64_t batch_size, int batches,
                                         GemmStep* step) {
  const Sizes& s = config_.sizes;
  double compute_ms = 0;  // w3: the step alone, measured first
  PINWHEEL_ASSIGN_OR_RETURN(BatchLayout layout,
                            BatchLayout::Create(dataset->layout(), batch_size));
  const size_t bytes = layout.CopyBytes(batch_size);
  const int ordinal = config_.device.ordinal();
  constexpr absl::string_view kNeedsCuda =
      "skipped: needs a CUDA device (host backend)";

  // The copy limit and the pageable copy: meaningless next to a compute
  // step, so w3 has the compute alone in their place.
  double raw_gbps = workload == "w3" ? w1_raw_gbps_ : 0;
  if (step == nullptr) {
    Row raw{.workload = workload, .method = "raw_pinned"};
    Row pageable{.workload = workload, .method = "pageable"};
    if (!cuda()) {
      PINWHEEL_RETURN_IF_ERROR(EmitSkipped(raw, kNeedsCuda));
      PINWHEEL_RETURN_IF_ERROR(EmitSkipped(pageable, kNeedsCuda));
    } else {
      {
        NvtxRange range(workload + " raw_pinned");
        PINWHEEL_ASSIGN_OR_RETURN(
            raw.measurement,
            InRow(MeasureRawPinnedCopy(ordinal, bytes, batches, s.warmup),
                  workload + " raw_pinned"));
      }
      raw_gbps = raw.gbps();
      if (workload == "w1") w1_raw_gbps_ = raw_gbps;
      raw.raw_gbps = raw_gbps;
      raw.note = "cudaMemcpyAsync from one pinned buffer, event-timed";
      PINWHEEL_RETURN_IF_ERROR(Emit(raw));
      {
        NvtxRange range(workload + " pageable");
        PINWHEEL_ASSIGN_OR_RETURN(
            pageable.measurement,
            InRow(MeasurePageableCopy(ordinal, bytes, batches, s.warmup),
                  workload + " pageable"));
      }
      pageable.raw_gbps = raw_gbps;
      pageable.note = "cudaMemcpy from malloc'd memory";
      PINWHEEL_RETURN_IF_ERROR(Emit(pageable));
    }
  } else {
    Row alone{.workload = workload, .method = "compute_alone"};
    {
      NvtxRange range(workload + " compute_alone");
      PINWHEEL_ASSIGN_OR_RETURN(
          alone.compute_ms,
          InRow(step->TimeAloneMs(consumer_native(), batches, s.warmup),
                workload + " compute_alone"));
    }
    alone.measurement.batches = batches;
    alone.measurement.wall_seconds = alone.compute_ms * batches / 1e3;
    alone.measurement.device_bytes = step->device_bytes();
    alone.note =
        absl::StrFormat("2 bf16 GEMMs %d^3, event-timed", config_.sizes.gemm_n);
    compute_ms = alone.compute_ms;
    PINWHEEL_RETURN_IF_ERROR(Emit(alone));
  }

  Row naive{.workload = workload,
            .method = "naive",
            .workers = config_.naive_threads,
            .raw_gbps = raw_gbps,
            .compute_ms = compute_ms};
  if (!cuda()) {
    PINWHEEL_RETURN_IF_ERROR(EmitSkipped(naive, kNeedsCuda));
  } else {
    NvtxRange range(workload + " naive");
    PINWHEEL_ASSIGN_OR_RETURN(
        naive.measurement,
        InRow(MeasureNaiveLoader(*dataset, layout,
                                 {.ordinal = ordinal,
                                  .batches = batches,
                                  .warmup = s.warmup,
                                  .collate_threads = config_.naive_threads,
                                  .seed = config_.seed,
                                  .step = step,
                                  .stream = consumer_native()}),
              workload + " naive"));
    naive.note = "malloc+collate, cudaHostAlloc+memcpy per batch, copy+sync";
    PINWHEEL_RETURN_IF_ERROR(Emit(naive));
  }

  for (int prefetch : config_.prefetch) {
    for (int workers : config_.workers) {
      Row row{.workload = workload,
              .method = "pinwheel",
              .workers = workers,
              .prefetch = prefetch,
              .device_buffers = config_.device_buffers,
              .raw_gbps = raw_gbps,
              .compute_ms = compute_ms};
      const std::string name = absl::StrFormat(
          "%s pinwheel workers=%d prefetch=%d", workload, workers, prefetch);
      NvtxRange range(name);
      PINWHEEL_ASSIGN_OR_RETURN(
          row.measurement,
          InRow(MeasurePinwheel(dataset,
                                {.device = config_.device,
                                 .batch_size = batch_size,
                                 .seed = config_.seed,
                                 .workers = workers,
                                 .prefetch = prefetch,
                                 .device_buffers = config_.device_buffers,
                                 .warmup = s.warmup,
                                 .batches = batches,
                                 .timeout = config_.timeout,
                                 .consumer_stream = consumer_native(),
                                 .step = step}),
                name));
      const Measurement& m = row.measurement;
      const double per_batch_us = 1e6 / std::max<int64_t>(1, m.batches);
      row.note = absl::StrFormat(
          "per batch: slot wait %.1f us, copy thread idle %.1f us, buffer "
          "wait %.1f us, copy issue %.1f us",
          m.slot_wait_seconds * per_batch_us, m.copy_idle_seconds * per_batch_us,
          m.buffer_wait_seconds * per_batch_us,
          m.copy_issue_seconds * per_batch_us);
      if (m.pinned_bytes != m.pinned_bytes_first ||
          m.device_bytes != m.device_bytes_first) {
        row.note =
            absl::StrFormat("MEMORY GREW: pinned %d -> %d, device %d -> %d",
                            m.pinned_bytes_first, m.pinned_bytes,
                            m.device_bytes_first, m.device_bytes);
      }
      PINWHEEL_RETURN_IF_ERROR(Emit(row));
    }
  }
  return absl::OkStatus();
}

absl::Status WorkloadRunner::RunImages(bool with_compute) {
  const Sizes& s = config_.sizes;
  const std::string workload = with_compute ? "w3" : "w1";
  PINWHEEL_ASSIGN_OR_RETURN(std::shared_ptr<const Dataset> dataset, Images());
  PINWHEEL_ASSIGN_OR_RETURN(
      BatchLayout layout,
      BatchLayout::Create(dataset->layout(), s.image_batch));
  const double mb = static_cast<double>(layout.CopyBytes(s.image_batch)) / 1e6;
  PrintTableHeader(absl::StrFormat(
      "%s %s: %d x (%s) = %.2f MB a batch, %d in-memory samples, shuffled; "
      "%d timed batches a row after %d warm-up",
      workload, with_compute ? "overlap (images + 2 GEMMs a step)" : "images",
      s.image_batch, dataset->layout().ToString(), mb, s.image_samples,
      s.batches, s.warmup));
  PINWHEEL_RETURN_IF_ERROR(json_.Write(JsonObject(
      {{"kind", JsonString("workload")},
       {"workload", JsonString(workload)},
       {"batch_size", absl::StrCat(s.image_batch)},
       {"bytes_per_batch", absl::StrCat(layout.CopyBytes(s.image_batch))},
       {"samples", absl::StrCat(s.image_samples)},
       {"layout", JsonString(dataset->layout().ToString())},
       {"gemm_n", absl::StrCat(with_compute ? s.gemm_n : 0)}})));

  if (!with_compute) {
    return RunCopyRows(workload, dataset, s.image_batch, s.batches, nullptr);
  }
  if (!cuda()) {
    constexpr absl::string_view kNeedsCuda =
        "skipped: w3 needs a CUDA device and cuBLAS (host backend)";
    for (const char* method : {"compute_alone", "naive", "pinwheel"}) {
      PINWHEEL_RETURN_IF_ERROR(
          EmitSkipped(Row{.workload = workload, .method = method}, kNeedsCuda));
    }
    return absl::OkStatus();
  }
  PINWHEEL_ASSIGN_OR_RETURN(
      std::unique_ptr<GemmStep> step,
      GemmStep::Create(config_.device.ordinal(), s.gemm_n));
  return RunCopyRows(workload, dataset, s.image_batch, s.batches, step.get());
}

absl::Status WorkloadRunner::RunTokens() {
  const Sizes& s = config_.sizes;
  PINWHEEL_ASSIGN_OR_RETURN(bool written,
                            EnsureTokenFile(config_.token_file, s.tokens));
  PINWHEEL_ASSIGN_OR_RETURN(
      std::shared_ptr<const Dataset> dataset,
      OpenTokenDataset(config_.token_file, s.seq_len, /*seed=*/11));
  PINWHEEL_ASSIGN_OR_RETURN(
      BatchLayout layout,
      BatchLayout::Create(dataset->layout(), s.token_batch));
  const double mb = static_cast<double>(layout.CopyBytes(s.token_batch)) / 1e6;
  PrintTableHeader(absl::StrFormat(
      "w2 tokens: %d x (%s) = %.3f MB a batch, %d windows over %d u16 tokens "
      "in %s%s; %d timed batches a row after %d warm-up",
      s.token_batch, dataset->layout().ToString(), mb, dataset->size(),
      s.tokens, config_.token_file, written ? " (written now)" : "",
      s.w2_batches, s.warmup));
  PINWHEEL_RETURN_IF_ERROR(json_.Write(JsonObject(
      {{"kind", JsonString("workload")},
       {"workload", JsonString("w2")},
       {"batch_size", absl::StrCat(s.token_batch)},
       {"bytes_per_batch", absl::StrCat(layout.CopyBytes(s.token_batch))},
       {"samples", absl::StrCat(dataset->size())},
       {"tokens", absl::StrCat(s.tokens)},
       {"layout", JsonString(dataset->layout().ToString())}})));
  return RunCopyRows("w2", dataset, s.token_batch, s.w2_batches, nullptr);
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
  absl::PrintF("pinwheel_bench on %s, %s%s\n  %s\n", config.device.Describe(),
               date,
               absl::GetFlag(FLAGS_smoke) ? " (SMOKE: tiny sizes, timings "
                                            "meaningless)"
                                          : "",
               command);
  absl::PrintF(
      "  GB/s = 1e9 bytes/s of batch data over wall time; xraw = GB/s over "
      "the same workload's raw pinned copy; cpu ms/b = process user+sys CPU "
      "per batch; wait ms/b = time blocked in Next()\n");
  PINWHEEL_RETURN_IF_ERROR(json.Write(JsonObject({
      {"kind", JsonString("run")},
      {"device", JsonString(config.device.ToString())},
      {"device_description", JsonString(config.device.Describe())},
      {"date", JsonString(date)},
      {"command", JsonString(command)},
      {"smoke", absl::GetFlag(FLAGS_smoke) ? "true" : "false"},
      {"cuda_built", CudaRowsBuilt() ? "true" : "false"},
      {"host_cores", absl::StrCat(std::thread::hardware_concurrency())},
      {"batches", absl::StrCat(config.sizes.batches)},
      {"w2_batches", absl::StrCat(config.sizes.w2_batches)},
      {"warmup", absl::StrCat(config.sizes.warmup)},
      {"device_buffers", absl::StrCat(config.device_buffers)},
  })));

  std::unique_ptr<ConsumerStream> consumer;
  if (config.device.is_cuda()) {
    PINWHEEL_ASSIGN_OR_RETURN(consumer,
                              ConsumerStream::Create(config.device.ordinal()));
  }
  WorkloadRunner runner(config, json, consumer.get());
  for (const std::string& workload : config.workloads) {
    if (workload == "w1") PINWHEEL_RETURN_IF_ERROR(runner.RunImages(false));
    if (workload == "w2") PINWHEEL_RETURN_IF_ERROR(runner.RunTokens());
    if (workload == "w3") PINWHEEL_RETURN_IF_ERROR(runner.RunImages(true));
  }
  if (config.epochs_check > 0) {
    PINWHEEL_RETURN_IF_ERROR(runner.RunMemoryCheck());
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
