#include "loader/telemetry/rank_wait.h"

#include <algorithm>
#include <cstring>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

#include "loader/telemetry/stall_verdict.h"

namespace pinwheel {
namespace {

// The window's summary, or the total's when the window is empty.
const LatencySummary& Window(const StageLatency& stage) {
  return stage.recent.count > 0 ? stage.recent : stage.total;
}

int64_t Nanos(absl::Duration d) { return absl::ToInt64Nanoseconds(d); }

// "8.49 ms", "14.3 us" (as the verdict writes them).
std::string Ms(int64_t nanos) {
  const absl::Duration d = absl::Nanoseconds(nanos);
  if (d < absl::Microseconds(100)) {
    return absl::StrFormat("%.3g us", absl::ToDoubleMicroseconds(d));
  }
  return absl::StrFormat("%.3g ms", absl::ToDoubleMilliseconds(d));
}

// The share of the rank's time waiting in Next() for data, 0..1.
double WaitShare(const RankWait& r) {
  const double total = static_cast<double>(
      r.wait_mean_ns + r.behind_buffers_mean_ns + r.step_mean_ns);
  return total > 0 ? static_cast<double>(r.wait_mean_ns) / total : 0.0;
}

std::string BoundOf(const RankWait& r) {
  switch (static_cast<StallVerdict::Bound>(r.bound)) {
    case StallVerdict::Bound::kReads:
      return absl::StrCat("bound by reads: p50 ", Ms(r.read_p50_ns),
                          " a batch over ", r.num_workers,
                          r.num_workers == 1 ? " worker" : " workers", " (",
                          r.cpus, r.cpus == 1 ? " CPU" : " CPUs",
                          ") against a ", Ms(r.step_p50_ns), " step");
    case StallVerdict::Bound::kCopy:
      return absl::StrCat("bound by the device stage: p50 ", Ms(r.copy_p50_ns),
                          " a batch against a ", Ms(r.step_p50_ns), " step");
    case StallVerdict::Bound::kConsumer:
      return "its own step is the bound";
    case StallVerdict::Bound::kUnknown:
      break;
  }
  return absl::StrCat("bound unknown (", r.batches, " batches timed)");
}

}  // namespace

RankWait RankWaitOf(const LoaderStats& stats, int rank) {
  RankWait r;
  r.rank = rank;
  r.num_workers = stats.num_workers;
  r.cpus = stats.cpu_budget.cpus;
  r.bound = static_cast<int32_t>(StallVerdictOf(stats).bound);
  // Note [the slowest rank]: the wait for data, not the part behind the
  // rank's own device buffers.
  const LatencySummary& wait = Window(stats.latency.data_wait);
  const LatencySummary& step = Window(stats.latency.step);
  r.batches = wait.count;
  r.wait_p50_ns = Nanos(wait.p50);
  r.wait_p99_ns = Nanos(wait.p99);
  r.wait_mean_ns = Nanos(wait.mean);
  r.step_mean_ns = Nanos(step.mean);
  r.step_p50_ns = Nanos(step.p50);
  r.read_p50_ns = Nanos(Window(stats.latency.read).p50);
  r.copy_p50_ns = Nanos(Window(stats.latency.copy).p50);
  r.behind_buffers_mean_ns = std::max<int64_t>(
      0, Nanos(Window(stats.latency.consumer_wait).mean) - r.wait_mean_ns);
  return r;
}

absl::StatusOr<RankWait> RankWaitFromBytes(absl::Span<const uint8_t> bytes) {
  if (bytes.size() != sizeof(RankWait)) {
    return absl::InvalidArgumentError(
        absl::StrCat("RankWait: ", bytes.size(), " bytes, expected ",
                     sizeof(RankWait), " (one record of RankWaitOf)"));
  }
  RankWait r;
  std::memcpy(&r, bytes.data(), sizeof r);
  if (r.magic != RankWait::kMagic) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "RankWait: magic 0x%08x, expected 0x%08x: not a RankWait record",
        r.magic, RankWait::kMagic));
  }
  if (r.version != RankWait::kVersion) {
    return absl::InvalidArgumentError(
        absl::StrCat("RankWait: version ", r.version, ", expected ",
                     RankWait::kVersion, " (ranks built from other versions)"));
  }
  return r;
}

absl::StatusOr<SlowestRank> SlowestRankOf(absl::Span<const RankWait> ranks) {
  if (ranks.empty()) {
    return absl::InvalidArgumentError("SlowestRankOf: no ranks");
  }
  std::set<int> seen;
  for (size_t i = 0; i < ranks.size(); ++i) {
    const RankWait& r = ranks[i];
    if (r.magic != RankWait::kMagic || r.version != RankWait::kVersion) {
      return absl::InvalidArgumentError(absl::StrCat(
          "SlowestRankOf: record ", i,
          " is not a RankWait of this version (magic or version wrong)"));
    }
    if (r.rank < 0 || !seen.insert(r.rank).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("SlowestRankOf: record ", i, " has rank ", r.rank,
                       r.rank < 0 ? ": must be >= 0" : ", seen before"));
    }
  }
  // The longest mean wait; the lowest rank on a tie.
  const RankWait* slowest = &ranks[0];
  for (const RankWait& r : ranks) {
    if (r.wait_mean_ns > slowest->wait_mean_ns ||
        (r.wait_mean_ns == slowest->wait_mean_ns && r.rank < slowest->rank)) {
      slowest = &r;
    }
  }
  int64_t others_p50 = 0;
  for (const RankWait& r : ranks) {
    if (&r != slowest) others_p50 = std::max(others_p50, r.wait_p50_ns);
  }
  SlowestRank out;
  out.rank = slowest->rank;
  const double share = WaitShare(*slowest);
  out.loader_bound = share >= kLoaderBoundShare;
  const std::string waits = absl::StrFormat(
      "Next() waits for data p50 %s, p99 %s a batch (%.0f %% of its time%s)",
      Ms(slowest->wait_p50_ns), Ms(slowest->wait_p99_ns), 100 * share,
      ranks.size() > 1
          ? absl::StrCat("; the other ranks at most p50 ", Ms(others_p50))
          : std::string());
  const std::string of = absl::StrCat(" of ", ranks.size());
  if (!out.loader_bound) {
    out.line = absl::StrCat("no rank waits for data: the slowest, rank ",
                            slowest->rank, of, ", ", waits);
  } else {
    out.line = absl::StrCat("slowest rank ", slowest->rank, of, ": ", waits,
                            "; ", BoundOf(*slowest));
  }
  return out;
}

}  // namespace pinwheel
