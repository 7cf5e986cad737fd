#include "loader/telemetry/stall_verdict.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"

namespace pinwheel {
namespace {

// The window's summary, or the total's when the window is empty.
const LatencySummary& Window(const StageLatency& stage) {
  return stage.recent.count > 0 ? stage.recent : stage.total;
}

// "8.49 ms", "14.3 us".
std::string Ms(absl::Duration d) {
  if (d < absl::Microseconds(100)) {
    return absl::StrFormat("%.3g us", absl::ToDoubleMicroseconds(d));
  }
  return absl::StrFormat("%.3g ms", absl::ToDoubleMilliseconds(d));
}

// "1 worker", "2 workers"; `many` when the plural is not `one` + "s".
std::string Plural(int64_t n, absl::string_view one,
                   absl::string_view many = "") {
  if (n == 1) return absl::StrCat(n, " ", one);
  return many.empty() ? absl::StrCat(n, " ", one, "s")
                      : absl::StrCat(n, " ", many);
}

}  // namespace

absl::string_view StallVerdict::stage() const {
  switch (bound) {
    case Bound::kConsumer:
      return "consumer";
    case Bound::kReads:
      return "reads";
    case Bound::kCopy:
      return "copy";
    case Bound::kUnknown:
      break;
  }
  return "unknown";
}

StallVerdict StallVerdictOf(const LoaderStats& stats) {
  StallVerdict verdict;
  const LatencySummary& wait = Window(stats.latency.consumer_wait);
  if (wait.count < kVerdictMinBatches) {
    verdict.line =
        absl::StrCat("unknown: ", Plural(wait.count, "batch", "batches"),
                     " timed; a verdict needs ", kVerdictMinBatches);
    return verdict;
  }
  const LatencySummary& step = Window(stats.latency.step);
  const LatencySummary& read = Window(stats.latency.read);
  const LatencySummary& copy = Window(stats.latency.copy);
  const int cpus = std::max(1, stats.cpu_budget.cpus);
  // Under num_workers = kAuto the workers reading now, not the threads
  // started (loader/README.md, "Auto-tuning").
  const int active = stats.auto_tune.workers_auto ? stats.auto_tune.workers
                                                  : stats.num_workers;
  const int workers = std::max(1, active);
  // Note [reading a verdict]: the wait behind the consumer's own device
  // buffers is not the data's; data_wait is the rest of each batch's wait.
  const LatencySummary& data_wait = Window(stats.latency.data_wait);
  const double waited = absl::ToDoubleSeconds(wait.mean);
  const double for_data = absl::ToDoubleSeconds(data_wait.mean);
  const double stepped = absl::ToDoubleSeconds(step.mean);
  const double cycle = waited + stepped;
  const double share = cycle > 0 ? for_data / cycle : 0.0;
  const std::string against =
      absl::StrFormat("against a %s step (Next() waits %.0f %% of the time)",
                      Ms(step.p50), 100.0 * share);
  if (share < kLoaderBoundShare && cycle > 0 &&
      waited / cycle >= kLoaderBoundShare) {
    verdict.bound = StallVerdict::Bound::kConsumer;
    verdict.cause = StallVerdict::Cause::kConsumerGpu;
    verdict.line = absl::StrCat(
        "consumer: Next() waits ",
        absl::StrFormat("%.0f %% of the time, %.0f %% of it",
                        100.0 * waited / cycle,
                        100.0 * std::clamp(1 - for_data / waited, 0.0, 1.0)),
        " behind the device buffers its own GPU work still holds: the "
        "training step on the GPU is the bound; the loader keeps up (",
        Plural(active, "worker"), ", ", Plural(cpus, "CPU"), " allowed)");
    return verdict;
  }
  if (share < kLoaderBoundShare) {
    verdict.bound = StallVerdict::Bound::kConsumer;
    verdict.cause = StallVerdict::Cause::kSlowConsumer;
    verdict.line = absl::StrCat(
        "consumer: step p50 ", Ms(step.p50), ", Next() waits for data p50 ",
        Ms(data_wait.p50),
        absl::StrFormat(" (%.0f %% of the time)", 100.0 * share),
        ": the training step is the bound; the loader keeps up (",
        Plural(active, "worker"), ", ", Plural(cpus, "CPU"), " allowed)");
    return verdict;
  }
  const absl::Duration reads_per_batch = read.p50 / workers;
  if (copy.p50 > reads_per_batch) {
    verdict.bound = StallVerdict::Bound::kCopy;
    verdict.cause = StallVerdict::Cause::kSlowCopy;
    verdict.line = absl::StrCat(
        "copy: p50 ", Ms(copy.p50), " a batch ", against,
        ": device-stage-bound; the reads supply a batch every ",
        Ms(reads_per_batch), " over ", Plural(workers, "worker"),
        ", so more workers will not help: write less per batch (fewer or "
        "narrower fields, a lighter device transform)");
    return verdict;
  }
  verdict.bound = StallVerdict::Bound::kReads;
  const double samples = stats.batches_delivered > 0
                             ? static_cast<double>(stats.samples_delivered) /
                                   static_cast<double>(stats.batches_delivered)
                             : 0.0;
  const double ratio = step.p50 > absl::ZeroDuration()
                           ? absl::FDivDuration(read.p50, step.p50)
                           : 1e9;
  verdict.workers_needed =
      static_cast<int>(std::clamp(std::ceil(ratio), 1.0, 1e6));
  const std::string figures =
      absl::StrCat("reads: p50 ", Ms(read.p50), " a batch of ",
                   absl::StrFormat("%.0f", samples), " samples over ",
                   Plural(workers, "worker"), " = ", Ms(reads_per_batch),
                   " a batch ", against, ": loader-bound; ");
  if (active > cpus) {
    verdict.cause = StallVerdict::Cause::kNarrowCpuSet;
    verdict.line = absl::StrCat(
        figures, Plural(active, "worker"), " share ", Plural(cpus, "CPU"),
        " (set by the ", stats.cpu_budget.limited_by, "): give the process ",
        active + 1,
        " CPUs (see LoaderStats::cpu_warning) or lower num_workers to ", cpus);
  } else if (verdict.workers_needed <= cpus) {
    verdict.cause = StallVerdict::Cause::kTooFewWorkers;
    verdict.line = absl::StrCat(figures, verdict.workers_needed,
                                " workers would keep up, ", Plural(cpus, "CPU"),
                                " allowed");
  } else {
    verdict.cause = StallVerdict::Cause::kSlowReads;
    verdict.line = absl::StrCat(
        figures, "keeping up takes ", verdict.workers_needed,
        " workers, more than the ", Plural(cpus, "CPU"),
        " allowed: make Read faster (reads that wait on storage rather "
        "than compute can use more workers than CPUs)");
  }
  return verdict;
}

}  // namespace pinwheel
