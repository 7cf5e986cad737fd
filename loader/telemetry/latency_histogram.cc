#include "loader/telemetry/latency_histogram.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <vector>

namespace pinwheel {
namespace {

constexpr int kSubBits = 5;  // log2(kSubBuckets)
static_assert(LatencyHistogram::kSubBuckets == 1 << kSubBits);

int64_t ToNanos(absl::Duration d) {
  if (d <= absl::ZeroDuration()) return 0;
  // At most 2^50 ns (13 days): the sum cannot overflow.
  constexpr int64_t kLongest = int64_t{1} << 50;
  if (d >= absl::Nanoseconds(kLongest)) return kLongest;
  return absl::ToInt64Nanoseconds(d);
}

// The value at quantile `q` of sorted `values` (nearest rank).
int64_t RankOf(double q, int64_t count) {
  return std::clamp<int64_t>(
      static_cast<int64_t>(std::ceil(q * static_cast<double>(count))), 1,
      count);
}

}  // namespace

// Values below kSubBuckets have a bucket each; above, a power of two 2^e
// (e >= kSubBits) is split into kSubBuckets buckets of 2^(e - kSubBits).
int LatencyHistogram::BucketOf(int64_t nanos) {
  if (nanos < kSubBuckets) return static_cast<int>(std::max<int64_t>(0, nanos));
  const int exponent = 63 - std::countl_zero(static_cast<uint64_t>(nanos));
  if (exponent >= kMaxExponent) return kBuckets - 1;
  const int sub =
      static_cast<int>(nanos >> (exponent - kSubBits)) - kSubBuckets;
  return kSubBuckets * (exponent - kSubBits + 1) + sub;
}

int64_t LatencyHistogram::BucketStart(int index) {
  if (index < kSubBuckets) return index;
  const int exponent = index / kSubBuckets + kSubBits - 1;
  const int64_t sub = index % kSubBuckets;
  return (kSubBuckets + sub) << (exponent - kSubBits);
}

void LatencyHistogram::Record(absl::Duration latency) {
  const int64_t nanos = ToNanos(latency);
  buckets_[static_cast<size_t>(BucketOf(nanos))].fetch_add(
      1, std::memory_order_relaxed);
  sum_nanos_.fetch_add(nanos, std::memory_order_relaxed);
  int64_t max = max_nanos_.load(std::memory_order_relaxed);
  while (nanos > max && !max_nanos_.compare_exchange_weak(
                            max, nanos, std::memory_order_relaxed)) {
  }
  const uint64_t slot = next_recent_.fetch_add(1, std::memory_order_relaxed);
  recent_[slot % kRecent].store(nanos, std::memory_order_relaxed);
}

LatencySummary LatencyHistogram::Summary() const {
  std::array<uint64_t, kBuckets> counts;
  int64_t count = 0;
  for (int i = 0; i < kBuckets; ++i) {
    counts[static_cast<size_t>(i)] =
        buckets_[static_cast<size_t>(i)].load(std::memory_order_relaxed);
    count += static_cast<int64_t>(counts[static_cast<size_t>(i)]);
  }
  LatencySummary summary;
  if (count == 0) return summary;
  summary.count = count;
  const int64_t max = max_nanos_.load(std::memory_order_relaxed);
  summary.max = absl::Nanoseconds(max);
  const int64_t sum = sum_nanos_.load(std::memory_order_relaxed);
  summary.sum = absl::Nanoseconds(sum);
  summary.mean = absl::Nanoseconds(sum / count);
  // A bucket's midpoint, never past the largest value seen.
  auto at = [&](double q) {
    const int64_t rank = RankOf(q, count);
    int64_t seen = 0;
    for (int i = 0; i < kBuckets; ++i) {
      seen += static_cast<int64_t>(counts[static_cast<size_t>(i)]);
      if (seen < rank) continue;
      const int64_t start = BucketStart(i);
      const int64_t end = i + 1 < kBuckets ? BucketStart(i + 1) : max + 1;
      return absl::Nanoseconds(std::min(max, start + (end - 1 - start) / 2));
    }
    return absl::Nanoseconds(max);
  };
  summary.p50 = at(0.50);
  summary.p90 = at(0.90);
  summary.p99 = at(0.99);
  return summary;
}

LatencySummary LatencyHistogram::Recent() const {
  const uint64_t recorded = next_recent_.load(std::memory_order_relaxed);
  const size_t n = static_cast<size_t>(
      std::min<uint64_t>(recorded, static_cast<uint64_t>(kRecent)));
  LatencySummary summary;
  if (n == 0) return summary;
  std::vector<int64_t> values(n);
  for (size_t i = 0; i < n; ++i) {
    values[i] = recent_[i].load(std::memory_order_relaxed);
  }
  std::sort(values.begin(), values.end());
  const int64_t count = static_cast<int64_t>(n);
  int64_t sum = 0;
  for (const int64_t v : values) sum += v;
  summary.count = count;
  summary.max = absl::Nanoseconds(values.back());
  summary.sum = absl::Nanoseconds(sum);
  summary.mean = absl::Nanoseconds(sum / count);
  auto at = [&](double q) {
    return absl::Nanoseconds(values[static_cast<size_t>(RankOf(q, count) - 1)]);
  };
  summary.p50 = at(0.50);
  summary.p90 = at(0.90);
  summary.p99 = at(0.99);
  return summary;
}

}  // namespace pinwheel
