// CountingStore: local files as an ObjectStore that counts the bytes asked
// of it, the "remote" under a cache in the cache suites. Thread-safe.
#ifndef PINWHEEL_TESTS_LOADER_STORAGE_CACHE_COUNTING_STORE_H_
#define PINWHEEL_TESTS_LOADER_STORAGE_CACHE_COUNTING_STORE_H_

#include <cstdint>
#include <string_view>

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
      }
    }
    return files_.Read(reads);
  }
  int64_t bytes() const {
    ::pinwheel::internal::MutexLock lock(&mu_);
    return bytes_;
  }

 private:
  LocalFileStore files_;
  mutable absl::Mutex mu_;
  int64_t bytes_ = 0;
};

}  // namespace pinwheel::testing

#endif  // PINWHEEL_TESTS_LOADER_STORAGE_CACHE_COUNTING_STORE_H_
