// pinwheel_bench's configuration: the run's sizes and rows, read from the
// command line's flags once (ConfigFromFlags) and then only read. See
// bench_main.cc for the flags and what the benchmark measures.
#ifndef PINWHEEL_SAMPLES_BENCH_BENCH_CONFIG_H_
#define PINWHEEL_SAMPLES_BENCH_BENCH_CONFIG_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/flags/declare.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

#include "transfer/device.h"

// Read by Run() (bench_main.cc) as well.
ABSL_DECLARE_FLAG(std::string, json);
ABSL_DECLARE_FLAG(bool, smoke);

namespace pinwheel::bench {

// The sizes of one run: the issue's, or tiny ones for --smoke.
struct Sizes {
  int64_t image_samples = 2048;
  int image_side = 224;
  int64_t image_batch = 256;
  int64_t tokens = 50'000'000;
  int64_t seq_len = 1024;
  int64_t token_batch = 32;
  int gemm_n = 8192;
  int batches = 100;
  int w2_batches = 5000;
  int naive_batches = 30;
  int warmup = 5;
  // Rows with workers or prefetch = auto: this many more untimed batches
  // first, the settling issue 33's goal allows (within 200 batches).
  int auto_settle = 200;
  // The memory check's dataset: few samples, so epochs are short.
  // W4 (--smoke: batch 16 of 32x32 crops, 4 timed batches).
  int64_t w4_batch = 256;
  int w4_size = 224;
  int w4_batches = 40;
  int64_t check_samples = 64;
  int64_t check_batch = 16;
  int check_workers = 4;
  int check_prefetch = 4;
};

// One pinwheel configuration: a row of the table.
struct PinwheelConfig {
  int workers = 1;
  int prefetch = 2;
  int device_buffers = 2;
  bool streaming_stores = false;  // ":nt"
  bool gather = false;            // ":g": the gather path (GatherMode::kOn)
};

// Returns `result`, its error (if any) prefixed with the row it belongs to.
template <typename T>
absl::StatusOr<T> InRow(absl::StatusOr<T> result, absl::string_view row) {
  if (result.ok()) return result;
  return absl::Status(result.status().code(),
                      absl::StrCat(row, ": ", result.status().message()));
}

struct Config {
  Device device;
  Sizes sizes;
  std::vector<std::string> workloads;
  // Pinwheel rows per workload ("w1", "w2", "w3").
  std::map<std::string, std::vector<PinwheelConfig>> configs;
  int repeat = 5;
  bool baselines = true;
  bool quick = false;
  int device_buffers = 2;
  int naive_threads = 8;
  uint64_t seed = 7;
  absl::Duration timeout = absl::Seconds(120);
  int epochs_check = 0;
  int pin_consumer_cpu = -1;
  std::string token_file;
  std::string w4_root;
};

// Returns the run's configuration from the flags, or InvalidArgument naming
// the flag and what was wrong.
absl::StatusOr<Config> ConfigFromFlags();

}  // namespace pinwheel::bench

#endif  // PINWHEEL_SAMPLES_BENCH_BENCH_CONFIG_H_
