// Datasets and helpers shared by the test suites.
#ifndef PINWHEEL_TESTS_SUPPORT_TEST_DATASETS_H_
#define PINWHEEL_TESTS_SUPPORT_TEST_DATASETS_H_

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <unistd.h>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

#include "loader/dataset.h"
#include "tests/support/notification.h"
#include "transfer/device.h"
#include "transfer/device_batch.h"
#include "transfer/stream.h"

namespace pinwheel::testing_support {

// Sample i: "a" u8[37] = bytes of (i * 131 + k), "b" i64[] = i * 7 + 1,
// "c" f32[5] = i + k / 8. Odd sizes exercise the field alignment.
class PatternDataset : public Dataset {
 public:
  explicit PatternDataset(int64_t size) : size_(size) {
    layout_ = *SampleLayout::Create({
        {.name = "a", .dtype = DType::kUInt8, .shape = {37}},
        {.name = "b", .dtype = DType::kInt64, .shape = {}},
        {.name = "c", .dtype = DType::kFloat32, .shape = {5}},
    });
  }
  int64_t size() const override { return size_; }
  const SampleLayout& layout() const override { return layout_; }
  absl::Status Read(int64_t index, SampleView& out) const override {
    reads_.fetch_add(1, std::memory_order_relaxed);
    if (hook_) {
      absl::Status status = hook_(index);
      if (!status.ok()) return status;
    }
    std::vector<std::vector<std::byte>> fields = Expected(index);
    for (int f = 0; f < 3; ++f) {
      std::memcpy(out.field(f).data(), fields[f].data(), fields[f].size());
    }
    return absl::OkStatus();
  }

  std::vector<std::vector<std::byte>> Expected(int64_t i) const {
    std::vector<std::vector<std::byte>> out(3);
    out[0].resize(37);
    for (int k = 0; k < 37; ++k) out[0][k] = std::byte((i * 131 + k) & 0xff);
    const int64_t b = i * 7 + 1;
    out[1].resize(8);
    std::memcpy(out[1].data(), &b, 8);
    out[2].resize(20);
    for (int k = 0; k < 5; ++k) {
      const float c = static_cast<float>(i) + static_cast<float>(k) / 8.0f;
      std::memcpy(out[2].data() + 4 * k, &c, 4);
    }
    return out;
  }

  // Runs before each Read; an error (or a throw) fails that Read.
  void set_hook(std::function<absl::Status(int64_t)> hook) {
    hook_ = std::move(hook);
  }
  int64_t reads() const { return reads_.load(); }

 private:
  int64_t size_;
  SampleLayout layout_;
  std::function<absl::Status(int64_t)> hook_;
  mutable std::atomic<int64_t> reads_{0};
};

// Returns a host copy of `field` (device memory on the cuda backend).
inline std::vector<std::byte> CopyToHost(const FieldView& field,
                                         const Device& device) {
  std::vector<std::byte> out(field.bytes);
  if (!device.is_cuda()) {
    std::memcpy(out.data(), field.data, field.bytes);
    return out;
  }
  // A failed copy fails the test naming why (an empty result alone reads as
  // a field with the wrong bytes).
  absl::StatusOr<Stream> stream = Stream::Create(device);
  absl::Status status = stream.status();
  if (status.ok()) {
    status = stream->CopyToHostAsync(out.data(), field.data, field.bytes);
  }
  if (status.ok()) status = stream->Synchronize();
  if (!status.ok()) {
    ADD_FAILURE() << "CopyToHost of " << field.bytes << " bytes into "
                  << static_cast<const void*>(out.data()) << ": " << status;
    return {};
  }
  return out;
}

// Aborts the test binary, naming `what`, if it is still alive after
// `limit`: turns a hang into a loud failure instead of a CI timeout. The
// limit is a generous bound against hangs, never a timing assertion.
// Not thread-safe; destroy it on the thread that made it.
class Watchdog {
 public:
  Watchdog(std::string what, absl::Duration limit)
      : what_(std::move(what)), thread_([this, limit] {
          if (!done_.WaitForNotificationWithTimeout(limit)) {
            std::fprintf(stderr,
                         "Watchdog: '%s' still running after %s: hang\n",
                         what_.c_str(), absl::FormatDuration(limit).c_str());
            std::fflush(stderr);
            std::abort();
          }
        }) {}
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;
  ~Watchdog() {
    done_.Notify();
    thread_.join();
  }

 private:
  std::string what_;
  ::pinwheel::testing_support::Notification done_;
  std::thread thread_;
};

// Returns the resident set size of this process in bytes (from
// /proc/self/statm), or -1 when it cannot be read.
inline int64_t ResidentBytes() {
  std::ifstream statm("/proc/self/statm");
  int64_t size_pages = 0;
  int64_t resident_pages = 0;
  if (!(statm >> size_pages >> resident_pages)) return -1;
  return resident_pages * static_cast<int64_t>(sysconf(_SC_PAGESIZE));
}

// Returns the integer in environment variable `name`, or `fallback` when it
// is unset or not a positive integer.
inline int64_t PositiveIntFromEnv(const char* name, int64_t fallback) {
  const char* value = std::getenv(name);
  int64_t parsed = 0;
  if (value == nullptr || !absl::SimpleAtoi(value, &parsed) || parsed <= 0) {
    return fallback;
  }
  return parsed;
}

// Returns whether this binary was built with a sanitizer that slows it
// down (ThreadSanitizer or AddressSanitizer).
constexpr bool kSanitized =
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
    true;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer) || __has_feature(address_sanitizer)
    true;
#else
    false;
#endif
#else
    false;
#endif

}  // namespace pinwheel::testing_support

#endif  // PINWHEEL_TESTS_SUPPORT_TEST_DATASETS_H_
