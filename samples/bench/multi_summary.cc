#include "samples/bench/multi_summary.h"

#include <algorithm>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace pinwheel::bench {
namespace {

// Returns `v` printed with printf's `format` (chosen at run time, which
// absl::StrFormat refuses under clang).
std::string Formatted(const char* format, double v) {
  char text[64];
  std::snprintf(text, sizeof(text), format, v);
  return text;
}

std::string SpreadText(const Spread& s, const char* format) {
  if (s.n == 0) return "-";
  const std::string median = Formatted(format, s.median);
  if (s.n == 1) return median;
  return absl::StrCat(median, " [", Formatted(format, s.min), "-",
                      Formatted(format, s.max), "]");
}

}  // namespace

double AggregateGbps(const std::vector<RankShare>& ranks, double batch_bytes) {
  double units = 0;
  double seconds = 0;
  for (const RankShare& r : ranks) {
    units += r.batches;
    seconds = std::max(seconds, r.seconds);
  }
  return seconds > 0 ? units * batch_bytes / seconds / 1e9 : 0;
}

std::vector<MultiLine> Summarize(const MultiRow& row) {
  const size_t world = row.reps.empty() ? 0 : row.reps.front().size();
  std::vector<MultiLine> lines;
  auto line_of = [&](const std::string& who, int only_rank) {
    std::vector<double> gbps, rate, ratio, cores;
    for (size_t r = 0; r < row.reps.size(); ++r) {
      std::vector<RankShare> ranks = row.reps[r];
      if (only_rank >= 0) ranks = {ranks[static_cast<size_t>(only_rank)]};
      const double g = AggregateGbps(ranks, row.batch_bytes);
      gbps.push_back(g);
      if (row.batch_bytes > 0) rate.push_back(g * 1e9 / row.batch_bytes);
      if (r < row.raw_gbps.size() && row.raw_gbps[r] > 0) {
        ratio.push_back(g / row.raw_gbps[r]);
      }
      double c = 0;
      bool known = true;
      for (const RankShare& s : ranks) {
        if (s.cpu_seconds <= 0 || s.seconds <= 0) known = false;
        if (s.seconds > 0) c += s.cpu_seconds / s.seconds;
      }
      if (known) cores.push_back(c);
    }
    lines.push_back({.who = who,
                     .gbps = SpreadOf(gbps),
                     .batches_per_second = SpreadOf(rate),
                     .ratio_to_raw = SpreadOf(ratio),
                     .cores = SpreadOf(cores)});
  };
  if (world > 1) {
    for (size_t k = 0; k < world; ++k) {
      line_of(absl::StrCat("rank ", k), static_cast<int>(k));
    }
  }
  line_of("all", -1);
  return lines;
}

std::string BesideLimits(const MultiRow& row, double memcpy_gbps,
                         double staged_gbps) {
  const MultiLine all = Summarize(row).back();
  std::string line = absl::StrFormat("%s %s: %.1f GB/s", row.workload, row.path,
                                     all.gbps.median);
  if (all.ratio_to_raw.n > 0) {
    absl::StrAppendFormat(&line, ", %.3f of the raw copy",
                          all.ratio_to_raw.median);
  }
  if (memcpy_gbps > 0) {
    absl::StrAppendFormat(&line, ", %.2fx the host memcpy rate (%.1f GB/s)",
                          all.gbps.median / memcpy_gbps, memcpy_gbps);
  }
  if (staged_gbps > 0) {
    absl::StrAppendFormat(&line, ", %.2f of the staged copy (%.1f GB/s)",
                          all.gbps.median / staged_gbps, staged_gbps);
  }
  return line;
}

void PrintMultiHeader() {
  absl::PrintF("%-4s %-8s %-7s  %-26s %-28s %-20s %s\n", "load", "path", "who",
               "GB/s", "batches/s", "of raw (same rep)", "cores used");
}

void PrintMultiLine(const MultiRow& row, const MultiLine& line) {
  absl::PrintF(
      "%-4s %-8s %-7s  %-26s %-28s %-20s %s\n", row.workload, row.path,
      line.who, SpreadText(line.gbps, "%.1f"),
      row.path == "memcpy" ? std::string("-")
                           : SpreadText(line.batches_per_second, "%.0f"),
      SpreadText(line.ratio_to_raw, "%.3f"), SpreadText(line.cores, "%.1f"));
  std::fflush(stdout);
}

std::string MultiLineToJson(
    const MultiRow& row, const MultiLine& line,
    const std::vector<std::pair<std::string, std::string>>& context) {
  std::vector<std::pair<std::string, std::string>> fields = {
      {"kind", JsonString("multi_row")},
      {"workload", JsonString(row.workload)},
      {"path", JsonString(row.path)},
      {"who", JsonString(line.who)},
      {"repetitions", JsonNumber(static_cast<double>(row.reps.size()))},
      {"gbps", JsonNumber(line.gbps.median)},
      {"gbps_min", JsonNumber(line.gbps.min)},
      {"gbps_max", JsonNumber(line.gbps.max)},
  };
  if (row.path != "memcpy") {
    fields.push_back(
        {"batches_per_s", JsonNumber(line.batches_per_second.median)});
  }
  if (line.ratio_to_raw.n > 0) {
    fields.push_back({"ratio_to_raw", JsonNumber(line.ratio_to_raw.median)});
    fields.push_back({"ratio_to_raw_min", JsonNumber(line.ratio_to_raw.min)});
    fields.push_back({"ratio_to_raw_max", JsonNumber(line.ratio_to_raw.max)});
  }
  if (line.cores.n > 0) {
    fields.push_back({"cores", JsonNumber(line.cores.median)});
  }
  fields.insert(fields.end(), context.begin(), context.end());
  return JsonObject(fields);
}

}  // namespace pinwheel::bench
