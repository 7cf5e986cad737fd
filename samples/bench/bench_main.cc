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

#include "pinning/base/status_macros.h"
#include "samples/bench/bench_config.h"
#include "samples/bench/cuda_rows.h"
#include "samples/bench/report.h"
#include "samples/bench/workload_runner.h"
#include "samples/bench/workloads.h"
#include "transfer/device.h"
#include "transfer/sample_layout.h"

namespace pinwheel::bench {
namespace {

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
      {"auto_settle", absl::StrCat(config.sizes.auto_settle)},
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
