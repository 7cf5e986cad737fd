// cache_bench: the clairvoyant cache (loader/storage/cache/) against a fake
// object store with a per-request latency and a per-request bandwidth, on a
// TarShards-like plan (shuffled shards read whole by several streams, over
// several epochs), host only.
//
// For each cache budget (a share of the dataset) it runs Belady with
// prefetch, Belady without prefetch and LRU (no prefetch), `repeats` times,
// and prints the medians: bytes fetched per epoch, the offline minimum for
// the same plan (Belady's MIN simulated exactly on the plan's block
// sequence), and the consumers' time waiting in Read().
//
// Byte scale: objects hold shard_mib / scale MiB for real (the cache
// allocates them) and the fake store charges latency + bytes × scale /
// bandwidth per request, so times are those of the full-size run while the
// memory is 1/scale of it. Bytes are reported at full size (× scale).
//
// Example:
//   cache_bench --shards=256 --shard_mib=64 --block_mib=16 --streams=8
//     --epochs=3 --latency_ms=20 --bandwidth_mbps=1000 --scale=256
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"

#include "loader/storage/cache/cached_store.h"
#include "loader/storage/cache/read_plan.h"

ABSL_FLAG(int, shards, 256, "shard files");
ABSL_FLAG(int64_t, shard_mib, 64, "MiB per shard (full size)");
ABSL_FLAG(int64_t, block_mib, 16, "cache block MiB (full size)");
ABSL_FLAG(int, streams, 8, "streams (loader workers) of the process");
ABSL_FLAG(int, epochs, 3, "epochs");
ABSL_FLAG(double, latency_ms, 20, "fake store: latency per request, ms");
ABSL_FLAG(double, bandwidth_mbps, 1000,
          "fake store: bandwidth per request, MB/s (full size)");
ABSL_FLAG(double, compute_ms, 5, "consumer time per block, ms");
ABSL_FLAG(int64_t, scale, 256, "real bytes are full size / scale");
ABSL_FLAG(std::string, budgets, "25,50,75", "cache budgets, % of the dataset");
ABSL_FLAG(int, prefetch_threads, 32, "fetches the prefetcher keeps in flight");
ABSL_FLAG(int, repeats, 3, "runs per row (medians reported)");
ABSL_FLAG(uint64_t, seed, 7, "shard shuffle seed");

namespace pinwheel {
namespace {

// Objects of one size with cheap contents; each request sleeps latency +
// bytes × scale / bandwidth.
class SlowStore final : public ObjectStore {
 public:
  SlowStore(int64_t object_bytes, absl::Duration latency,
            double bytes_per_second)
      : object_bytes_(object_bytes),
        latency_(latency),
        bytes_per_second_(bytes_per_second) {}
  absl::StatusOr<int64_t> Size(std::string_view) override {
    return object_bytes_;
  }
  absl::Status Read(absl::Span<const RangeRead> reads) override {
    int64_t bytes = 0;
    for (const RangeRead& read : reads) {
      if (read.offset < 0 ||
          read.offset + static_cast<int64_t>(read.destination.size()) >
              object_bytes_) {
        return absl::OutOfRangeError(absl::StrCat(read.url, " past its end"));
      }
      bytes += static_cast<int64_t>(read.destination.size());
    }
    absl::SleepFor(latency_ + absl::Seconds(static_cast<double>(bytes) /
                                            bytes_per_second_));
    for (const RangeRead& read : reads) {
      std::memset(read.destination.data(), static_cast<int>(read.offset & 0xff),
                  read.destination.size());
    }
    return absl::OkStatus();
  }

 private:
  int64_t object_bytes_;
  absl::Duration latency_;
  double bytes_per_second_;
};

// Belady's MIN over the plan's block sequence: fetches per epoch.
std::map<int64_t, int64_t> MinimumFetches(const ReadPlan& plan,
                                          int64_t block_bytes,
                                          int64_t capacity) {
  struct Touch {
    std::pair<int32_t, int64_t> key;
    int64_t epoch;
  };
  std::vector<Touch> seq;
  for (const PlannedRead& r : plan.reads) {
    for (int64_t b = r.offset / block_bytes;
         b <= (r.offset + r.length - 1) / block_bytes; ++b) {
      seq.push_back({{r.url, b}, r.epoch});
    }
  }
  const auto n = static_cast<int64_t>(seq.size());
  std::vector<int64_t> next(seq.size());
  std::map<std::pair<int32_t, int64_t>, int64_t> last;
  for (int64_t t = n - 1; t >= 0; --t) {
    const auto it = last.find(seq[t].key);
    next[t] = it == last.end() ? n + t : it->second;  // distinct "never"s
    last[seq[t].key] = t;
  }
  std::set<std::pair<int64_t, std::pair<int32_t, int64_t>>> by_next;
  std::map<std::pair<int32_t, int64_t>, int64_t> cached;  // key -> next
  std::map<int64_t, int64_t> fetches;
  for (int64_t t = 0; t < n; ++t) {
    const auto key = seq[t].key;
    const auto it = cached.find(key);
    if (it != cached.end()) {
      by_next.erase({it->second, key});
    } else {
      ++fetches[seq[t].epoch];
      if (static_cast<int64_t>(cached.size()) == capacity) {
        const auto victim = std::prev(by_next.end());
        cached.erase(victim->second);
        by_next.erase(victim);
      }
    }
    cached[key] = next[t];
    by_next.insert({next[t], key});
  }
  return fetches;
}

struct RunResult {
  std::map<int64_t, int64_t> bytes_by_epoch;
  int64_t bytes = 0;
  double wait_s = 0;  // consumers' time in Read(), all streams
  double wall_s = 0;
  double hit_rate = 0;
  int64_t unplanned = 0;
};

absl::StatusOr<RunResult> RunOnce(const std::vector<std::string>& urls,
                                  const TarShardOptions& tar,
                                  std::shared_ptr<SlowStore> store,
                                  const CacheOptions& options, int streams,
                                  int epochs, double compute_ms) {
  auto cache = CachedStore::Open(store, options);
  if (!cache.ok()) return cache.status();
  const ProcessShare share{.rank = 0, .world_size = 1, .workers = streams};
  std::vector<ReadPlan> plans;
  for (int e = 0; e < epochs; ++e) {
    auto plan =
        PlanTarShards(urls, tar, *store, share, {.first_epoch = e, .epochs = 1},
                      options.block_bytes);
    if (!plan.ok()) return plan.status();
    plans.push_back(*std::move(plan));
  }
  // The cache knows this epoch and the next, as a loader's would.
  for (int e = 0; e < std::min(2, epochs); ++e) {
    if (absl::Status s = (*cache)->AppendPlan(plans[e]); !s.ok()) return s;
  }
  RunResult result;
  std::atomic<int64_t> wait_ns{0};
  std::atomic<bool> failed{false};
  const absl::Time start = absl::Now();
  for (int e = 0; e < epochs; ++e) {
    if (e >= 1 && e + 1 < epochs) {
      if (absl::Status s = (*cache)->AppendPlan(plans[e + 1]); !s.ok()) {
        return s;
      }
    }
    std::vector<std::thread> readers;
    for (int s = 0; s < streams; ++s) {
      readers.emplace_back([&, s] {
        std::vector<std::byte> buffer;
        const ReadPlan& plan = plans[e];
        for (const PlannedRead& r : plan.reads) {
          if (r.stream != s) continue;
          buffer.resize(static_cast<size_t>(r.length));
          const absl::Time t0 = absl::Now();
          const absl::Status status =
              (*cache)->Read({{.url = plan.urls[r.url],
                               .offset = r.offset,
                               .destination = absl::MakeSpan(buffer)}});
          wait_ns += absl::ToInt64Nanoseconds(absl::Now() - t0);
          if (!status.ok()) {
            std::fprintf(stderr, "read failed: %s\n",
                         std::string(status.message()).c_str());
            failed = true;
            return;
          }
          absl::SleepFor(absl::Milliseconds(compute_ms));
        }
      });
    }
    for (std::thread& t : readers) t.join();
    if (failed) return absl::InternalError("a read failed");
  }
  result.wall_s = absl::ToDoubleSeconds(absl::Now() - start);
  const CacheStats stats = (*cache)->Stats();
  result.bytes_by_epoch = stats.bytes_fetched_by_epoch;
  result.bytes = stats.bytes_fetched;
  result.wait_s = static_cast<double>(wait_ns.load()) * 1e-9;
  result.hit_rate = stats.hit_rate();
  result.unplanned = stats.unplanned_reads;
  return result;
}

template <typename T>
T Median(std::vector<T> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int Main() {
  const int shards = absl::GetFlag(FLAGS_shards);
  const int64_t scale = absl::GetFlag(FLAGS_scale);
  const int64_t shard_bytes = (absl::GetFlag(FLAGS_shard_mib) << 20) / scale;
  const int64_t block_bytes = (absl::GetFlag(FLAGS_block_mib) << 20) / scale;
  const int streams = absl::GetFlag(FLAGS_streams);
  const int epochs = absl::GetFlag(FLAGS_epochs);
  const int repeats = absl::GetFlag(FLAGS_repeats);
  const double compute_ms = absl::GetFlag(FLAGS_compute_ms);
  auto store = std::make_shared<SlowStore>(
      shard_bytes, absl::Milliseconds(absl::GetFlag(FLAGS_latency_ms)),
      absl::GetFlag(FLAGS_bandwidth_mbps) * 1e6 / static_cast<double>(scale));
  std::vector<std::string> urls;
  for (int i = 0; i < shards; ++i) {
    urls.push_back(absl::StrCat("s3://bench/shard-", i, ".tar"));
  }
  const TarShardOptions tar{.seed = absl::GetFlag(FLAGS_seed),
                            .shuffle_shards = true};
  const int64_t dataset = shard_bytes * shards;
  const double mib = static_cast<double>(scale) / (1 << 20);
  std::printf(
      "cache_bench: %d shards x %lld MiB, blocks of %lld MiB, %d streams, %d "
      "epochs, shuffle_shards; store %.0f ms + %.0f MB/s per request; "
      "consumer %.1f ms per block; prefetch %d in flight; real bytes 1/%lld; "
      "median of %d\n\n",
      shards, static_cast<long long>(absl::GetFlag(FLAGS_shard_mib)),
      static_cast<long long>(absl::GetFlag(FLAGS_block_mib)), streams, epochs,
      absl::GetFlag(FLAGS_latency_ms), absl::GetFlag(FLAGS_bandwidth_mbps),
      compute_ms, absl::GetFlag(FLAGS_prefetch_threads),
      static_cast<long long>(scale), repeats);
  std::printf(
      "| budget | cache | fetched MiB per epoch | total MiB | vs minimum | vs "
      "LRU | hit rate | consumer wait s | wall s |\n|---|---|---|---|---|---|"
      "---|---|---|\n");
  const std::vector<std::string> budgets =
      absl::StrSplit(absl::GetFlag(FLAGS_budgets), ',', absl::SkipEmpty());
  for (const std::string& b : budgets) {
    int percent = 0;
    if (!absl::SimpleAtoi(b, &percent) || percent < 1 || percent > 100) {
      std::fprintf(stderr, "--budgets: \"%s\" is not a percentage 1..100\n",
                   b.c_str());
      return 1;
    }
    const int64_t budget =
        (dataset * percent / 100) / block_bytes * block_bytes;
    // The minimum for this plan and budget.
    ReadPlan whole;
    for (int e = 0; e < epochs; ++e) {
      auto plan = PlanTarShards(
          urls, tar, *store, {.rank = 0, .world_size = 1, .workers = streams},
          {.first_epoch = e, .epochs = 1}, block_bytes);
      if (!plan.ok()) {
        std::fprintf(stderr, "%s\n",
                     std::string(plan.status().message()).c_str());
        return 1;
      }
      if (whole.urls.empty()) whole.urls = plan->urls;
      whole.reads.insert(whole.reads.end(), plan->reads.begin(),
                         plan->reads.end());
    }
    const std::map<int64_t, int64_t> minimum =
        MinimumFetches(whole, block_bytes, budget / block_bytes);
    int64_t minimum_total = 0;
    std::string minimum_epochs;
    for (const auto& [epoch, fetches] : minimum) {
      minimum_total += fetches * block_bytes;
      absl::StrAppend(&minimum_epochs, minimum_epochs.empty() ? "" : " / ",
                      static_cast<int64_t>(fetches * block_bytes * mib));
    }
    std::printf(
        "| %d%% | minimum (MIN, offline) | %s | %.0f | 1.000 | | | | |\n",
        percent, minimum_epochs.c_str(), minimum_total * mib);
    struct Row {
      const char* name;
      CachePolicy policy;
      bool prefetch;
    };
    double lru_total = 0;
    std::vector<std::pair<Row, std::vector<RunResult>>> rows;
    for (const Row row :
         {Row{"LRU", CachePolicy::kLru, false},
          Row{"Belady, no prefetch", CachePolicy::kBelady, false},
          Row{"Belady + prefetch", CachePolicy::kBelady, true}}) {
      std::vector<RunResult> runs;
      for (int r = 0; r < repeats; ++r) {
        absl::StatusOr<RunResult> run =
            RunOnce(urls, tar, store,
                    {.budget_bytes = budget,
                     .block_bytes = block_bytes,
                     .policy = row.policy,
                     .prefetch = row.prefetch,
                     .prefetch_threads = absl::GetFlag(FLAGS_prefetch_threads),
                     .plan_window_blocks = 16},
                    streams, epochs, compute_ms);
        if (!run.ok()) {
          std::fprintf(stderr, "%s\n",
                       std::string(run.status().message()).c_str());
          return 1;
        }
        runs.push_back(*std::move(run));
      }
      std::vector<int64_t> totals;
      std::vector<double> waits, walls, hits;
      std::map<int64_t, std::vector<int64_t>> per_epoch;
      for (const RunResult& run : runs) {
        totals.push_back(run.bytes);
        waits.push_back(run.wait_s);
        walls.push_back(run.wall_s);
        hits.push_back(run.hit_rate);
        for (int e = 0; e < epochs; ++e) {
          const auto it = run.bytes_by_epoch.find(e);
          per_epoch[e].push_back(it == run.bytes_by_epoch.end() ? 0
                                                                : it->second);
        }
      }
      std::string epochs_text;
      for (auto& [e, values] : per_epoch) {
        absl::StrAppend(&epochs_text, epochs_text.empty() ? "" : " / ",
                        static_cast<int64_t>(Median(values) * mib));
      }
      const double total = static_cast<double>(Median(totals));
      if (row.policy == CachePolicy::kLru) lru_total = total;
      std::printf(
          "| %d%% | %s | %s | %.0f | %.3f | %s | %.3f | %.2f | %.2f |\n",
          percent, row.name, epochs_text.c_str(), total * mib,
          total / static_cast<double>(minimum_total),
          row.policy == CachePolicy::kLru
              ? "1.000"
              : absl::StrFormat("%.3f", total / lru_total).c_str(),
          Median(hits), Median(waits), Median(walls));
      std::fflush(stdout);
    }
  }
  return 0;
}

}  // namespace
}  // namespace pinwheel

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return pinwheel::Main();
}
