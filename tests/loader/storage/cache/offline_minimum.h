// OfflineMinimumFetches: Belady's MIN simulated on a block sequence, the
// yardstick of the cache suites.
#ifndef PINWHEEL_TESTS_LOADER_STORAGE_CACHE_OFFLINE_MINIMUM_H_
#define PINWHEEL_TESTS_LOADER_STORAGE_CACHE_OFFLINE_MINIMUM_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace pinwheel::testing {

// Belady's MIN on a sequence of block ids with room for `capacity`
// blocks: the fewest fetches any demand cache can make. A plain simulation,
// independent of the library.
inline int64_t OfflineMinimumFetches(const std::vector<int>& seq,
                                     size_t capacity) {
  std::vector<int> cache;
  int64_t fetches = 0;
  for (size_t t = 0; t < seq.size(); ++t) {
    if (std::find(cache.begin(), cache.end(), seq[t]) != cache.end()) continue;
    ++fetches;
    if (cache.size() == capacity) {
      size_t victim = 0;
      size_t furthest = 0;
      for (size_t c = 0; c < cache.size(); ++c) {
        size_t next = t + 1;
        while (next < seq.size() && seq[next] != cache[c]) ++next;
        if (next >= furthest) {
          furthest = next;
          victim = c;
        }
      }
      cache.erase(cache.begin() + static_cast<std::ptrdiff_t>(victim));
    }
    cache.push_back(seq[t]);
  }
  return fetches;
}

}  // namespace pinwheel::testing

#endif  // PINWHEEL_TESTS_LOADER_STORAGE_CACHE_OFFLINE_MINIMUM_H_
