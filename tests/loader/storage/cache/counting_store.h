// CountingStore: local files as an ObjectStore that counts the bytes asked
// of it and keeps which ranges were asked for, the "remote" under a cache
// in the cache suites. Thread-safe.
#ifndef PINWHEEL_TESTS_LOADER_STORAGE_CACHE_COUNTING_STORE_H_
#define PINWHEEL_TESTS_LOADER_STORAGE_CACHE_COUNTING_STORE_H_

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"

#include "loader/storage/local_file_store.h"
#include "loader/storage/object_store.h"
#include "pinning/base/mutex.h"

namespace pinwheel::testing {

class CountingStore final : public ObjectStore {
 public:
  absl::StatusOr<int64_t> Size(std::string_view url) override {
    return files_.Size(url);
  }
  absl::Status Read(absl::Span<const RangeRead> reads) override {
    {
      ::pinwheel::internal::MutexLock lock(&mu_);
      for (const RangeRead& read : reads) {
        bytes_ += static_cast<int64_t>(read.destination.size());
        requested_.emplace_back(read.url, read.offset);
      }
    }
    return files_.Read(reads);
  }
  int64_t bytes() const {
    ::pinwheel::internal::MutexLock lock(&mu_);
    return bytes_;
  }
  // Whether a range of `url` starting at `offset` was asked for.
  bool Requested(const std::string& url, int64_t offset) const {
    ::pinwheel::internal::MutexLock lock(&mu_);
    return std::find(requested_.begin(), requested_.end(),
                     std::pair(url, offset)) != requested_.end();
  }

 private:
  LocalFileStore files_;
  mutable absl::Mutex mu_;
  int64_t bytes_ = 0;
  std::vector<std::pair<std::string, int64_t>> requested_;
};

}  // namespace pinwheel::testing

#endif  // PINWHEEL_TESTS_LOADER_STORAGE_CACHE_COUNTING_STORE_H_
