// FakeObjectStore: objects of given sizes whose bytes are a pure function of
// (url, offset), served from memory with optional latency and injected
// errors, counting requests and bytes. Thread-safe.
#ifndef PINWHEEL_TESTS_LOADER_STORAGE_CACHE_FAKE_OBJECT_STORE_H_
#define PINWHEEL_TESTS_LOADER_STORAGE_CACHE_FAKE_OBJECT_STORE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"

#include "loader/storage/object_store.h"
#include "pinning/base/mutex.h"

namespace pinwheel::testing {

inline std::byte ExpectedByte(std::string_view url, int64_t offset) {
  uint64_t h = 1469598103934665603ULL;
  for (const char c : url)
    h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ULL;
  h ^= static_cast<uint64_t>(offset) * 0x9E3779B97F4A7C15ULL;
  h ^= h >> 29;
  return static_cast<std::byte>(h & 0xff);
}

class FakeObjectStore final : public ObjectStore {
 public:
  void Put(const std::string& url, int64_t size) {
    ::pinwheel::internal::MutexLock lock(&mu_);
    sizes_[url] = size;
  }
  // Reads of `url` (and Size of it) fail with `status` until cleared (OK).
  void Fail(const std::string& url, absl::Status status) {
    ::pinwheel::internal::MutexLock lock(&mu_);
    if (status.ok()) {
      failures_.erase(url);
    } else {
      failures_[url] = std::move(status);
    }
  }
  void set_latency(absl::Duration latency) {
    ::pinwheel::internal::MutexLock lock(&mu_);
    latency_ = latency;
  }
  // Called (outside the lock) at every read request.
  void set_on_read(std::function<void()> on_read) {
    ::pinwheel::internal::MutexLock lock(&mu_);
    on_read_ = std::move(on_read);
  }

  absl::StatusOr<int64_t> Size(std::string_view url) override {
    ::pinwheel::internal::MutexLock lock(&mu_);
    ++size_requests_;
    if (const auto f = failures_.find(std::string(url)); f != failures_.end()) {
      return f->second;
    }
    const auto it = sizes_.find(std::string(url));
    if (it == sizes_.end()) {
      return absl::NotFoundError(
          absl::StrCat("fake store: no object ", std::string(url)));
    }
    return it->second;
  }

  // Called (outside the lock) before each range is served: a test may
  // hold one range back.
  void set_on_range(
      std::function<void(std::string_view url, int64_t offset)> on_range) {
    ::pinwheel::internal::MutexLock lock(&mu_);
    on_range_ = std::move(on_range);
  }

  absl::Status Read(absl::Span<const RangeRead> reads) override {
    std::function<void()> on_read;
    std::function<void(std::string_view, int64_t)> on_range;
    absl::Duration latency;
    {
      ::pinwheel::internal::MutexLock lock(&mu_);
      on_read = on_read_;
      on_range = on_range_;
      latency = latency_;
    }
    if (on_read) on_read();
    if (latency > absl::ZeroDuration()) absl::SleepFor(latency);
    for (const RangeRead& read : reads) {
      if (on_range) on_range(read.url, read.offset);
      const auto length = static_cast<int64_t>(read.destination.size());
      {
        ::pinwheel::internal::MutexLock lock(&mu_);
        ++requests_;
        if (const auto f = failures_.find(read.url); f != failures_.end()) {
          return f->second;
        }
        const auto it = sizes_.find(read.url);
        if (it == sizes_.end()) {
          return absl::NotFoundError(
              absl::StrCat("fake store: no object ", read.url));
        }
        if (read.offset < 0 || read.offset + length > it->second) {
          return absl::OutOfRangeError(absl::StrCat(
              "fake store: ", read.url, " has ", it->second, " bytes"));
        }
        bytes_ += length;
        ranges_.push_back({read.url, read.offset, length});
      }
      for (int64_t i = 0; i < length; ++i) {
        read.destination[static_cast<size_t>(i)] =
            ExpectedByte(read.url, read.offset + i);
      }
    }
    return absl::OkStatus();
  }

  struct Range {
    std::string url;
    int64_t offset;
    int64_t length;
  };
  int64_t bytes() const {
    ::pinwheel::internal::MutexLock lock(&mu_);
    return bytes_;
  }
  int64_t requests() const {
    ::pinwheel::internal::MutexLock lock(&mu_);
    return requests_;
  }
  std::vector<Range> ranges() const {
    ::pinwheel::internal::MutexLock lock(&mu_);
    return ranges_;
  }
  void ClearCounts() {
    ::pinwheel::internal::MutexLock lock(&mu_);
    bytes_ = 0;
    requests_ = 0;
    ranges_.clear();
  }

 private:
  mutable absl::Mutex mu_;
  std::map<std::string, int64_t> sizes_;
  std::map<std::string, absl::Status> failures_;
  absl::Duration latency_;
  std::function<void()> on_read_;
  std::function<void(std::string_view, int64_t)> on_range_;
  int64_t bytes_ = 0;
  int64_t requests_ = 0;
  int64_t size_requests_ = 0;
  std::vector<Range> ranges_;
};

}  // namespace pinwheel::testing

#endif  // PINWHEEL_TESTS_LOADER_STORAGE_CACHE_FAKE_OBJECT_STORE_H_
