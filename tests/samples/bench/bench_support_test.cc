// Tests of the benchmark's parts that its numbers rest on: the spread of a
// repeated row (median, min, max; the ratio to raw as the median of the
// per-repetition ratios), its JSON line, the streaming-store image dataset
// (the same bytes as the library's InMemoryDataset), consumer pinning, and
// w2w's widening kernel against the token dataset's CPU widening.
#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <memory>
#include <optional>
#include <sched.h>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

#if defined(PINWHEEL_BENCH_CUDA)
#include <cuda_runtime_api.h>
#endif

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include "loader/dataset.h"
#include "loader/token_window_dataset.h"
#include "samples/bench/cuda_rows.h"
#include "samples/bench/report.h"
#include "samples/bench/thread_pinning.h"
#include "samples/bench/workloads.h"
#include "tests/support/skip_without_gpu.h"
#include "transfer/device_stage/transform_kernels.h"
#include "transfer/sample_layout.h"

namespace pinwheel::bench {
namespace {

using ::testing::HasSubstr;
// The widening kernel moved into the library (the WidenTokens device
// transform); its launcher is tested here as before.
using internal::LaunchWidenTokenWindows;
// [[maybe_unused]]: its cases are CUDA-only (clang warns in a host build).
[[maybe_unused]] constexpr int kWidenBadArguments =
    internal::kBadKernelArguments;

// A repetition moving `gbps` GB/s in one second next to a raw copy of
// `raw_gbps`.
Row Repetition(int repetition, double gbps, double raw_gbps) {
  Row row{.workload = "w1",
          .method = "pinwheel",
          .workers = 8,
          .prefetch = 2,
          .device_buffers = 2,
          .repetition = repetition};
  row.measurement.batches = 100;
  row.measurement.bytes = static_cast<int64_t>(gbps * 1e9);
  row.measurement.wall_seconds = 1.0;
  row.measurement.cpu_seconds = 2.0;
  row.raw_gbps = raw_gbps;
  return row;
}

TEST(SpreadOfTest, TakesTheMiddleValueOfAnOddCount) {
  const Spread s = SpreadOf({5, 1, 3});
  EXPECT_EQ(s.n, 3);
  EXPECT_DOUBLE_EQ(s.median, 3);
  EXPECT_DOUBLE_EQ(s.min, 1);
  EXPECT_DOUBLE_EQ(s.max, 5);
}

TEST(SpreadOfTest, TakesTheMeanOfTheTwoMiddleValuesOfAnEvenCount) {
  EXPECT_DOUBLE_EQ(SpreadOf({4, 1, 2, 10}).median, 3);
}

TEST(SpreadOfTest, LeavesOutValuesThatAreNotFinite) {
  const Spread s = SpreadOf({std::numeric_limits<double>::quiet_NaN(), 2,
                             std::numeric_limits<double>::infinity()});
  EXPECT_EQ(s.n, 1);
  EXPECT_DOUBLE_EQ(s.median, 2);
}

TEST(SpreadOfTest, HasNoValueForNoValues) { EXPECT_EQ(SpreadOf({}).n, 0); }

TEST(RepeatedRowTest, RatioToRawIsTheMedianOfPerRepetitionRatios) {
  // GB/s 20, 35, 54 next to raw 50, 40, 60: per-repetition ratios 0.4,
  // 0.875, 0.9. The median of the ratios is 0.875; the ratio of the medians
  // (35 / 50) would be 0.7.
  RepeatedRow row;
  row.reps = {Repetition(1, 20, 50), Repetition(2, 35, 40),
              Repetition(3, 54, 60)};
  EXPECT_DOUBLE_EQ(row.gbps().median, 35);
  EXPECT_DOUBLE_EQ(row.ratio_to_raw().median, 0.875);
  EXPECT_DOUBLE_EQ(row.ratio_to_raw().min, 0.4);
  EXPECT_DOUBLE_EQ(row.ratio_to_raw().max, 0.9);
}

TEST(RepeatedRowTest, LeavesOutTheRatioWhereNoRawWasMeasured) {
  RepeatedRow row;
  row.reps = {Repetition(1, 40, 0), Repetition(2, 30, 0)};
  EXPECT_EQ(row.ratio_to_raw().n, 0);
  EXPECT_EQ(row.batches_per_second().n, 2);
}

TEST(RepeatedRowTest, ReportsCpuPerBatchAndCoresBusy) {
  RepeatedRow row;
  row.reps = {Repetition(1, 40, 50)};  // 2 CPU seconds, 1 s, 100 batches
  EXPECT_DOUBLE_EQ(row.cpu_ms_per_batch().median, 20);
  EXPECT_DOUBLE_EQ(row.cpu_cores().median, 2);
}

TEST(RepeatedRowTest, RatioToW2RawIsBatchesPerSecondOverW2sRawPerRepetition) {
  // w2w: 100 batches in 1 s each repetition, next to w2 raw copies of 200,
  // 125 and 400 batches/s: ratios 0.5, 0.8, 0.25.
  Row a = Repetition(1, 1, 0);
  a.w2_raw_batches_per_second = 200;
  Row b = Repetition(2, 1, 0);
  b.w2_raw_batches_per_second = 125;
  Row c = Repetition(3, 1, 0);
  c.w2_raw_batches_per_second = 400;
  RepeatedRow row;
  row.reps = {a, b, c};
  EXPECT_DOUBLE_EQ(a.ratio_to_w2_raw(), 0.5);
  EXPECT_DOUBLE_EQ(row.ratio_to_w2_raw().median, 0.5);
  EXPECT_DOUBLE_EQ(row.ratio_to_w2_raw().min, 0.25);
  EXPECT_DOUBLE_EQ(row.ratio_to_w2_raw().max, 0.8);
  EXPECT_THAT(RepeatedRowToJson(row), HasSubstr("\"ratio_to_w2_raw\":0.5,"));
  // Other workloads have none.
  RepeatedRow w1;
  w1.reps = {Repetition(1, 40, 50)};
  EXPECT_EQ(w1.ratio_to_w2_raw().n, 0);
  EXPECT_THAT(RepeatedRowToJson(w1), HasSubstr("\"ratio_to_w2_raw\":null"));
}

TEST(RepeatedRowTest, StepOverheadIsPerRepetitionAgainstItsComputeAlone) {
  Row a = Repetition(1, 10, 0);  // 10 ms a step
  a.compute_ms = 8;              // +25 %
  Row b = Repetition(2, 10, 0);
  b.compute_ms = 10;  // +0 %
  Row c = Repetition(3, 10, 0);
  c.compute_ms = 9.5;  // +5.26 %
  RepeatedRow row;
  row.reps = {a, b, c};
  EXPECT_NEAR(row.step_overhead().median, 10.0 / 9.5 - 1, 1e-12);
  EXPECT_DOUBLE_EQ(row.step_overhead().max, 0.25);
}

TEST(RowTest, LabelNamesTheConfiguration) {
  Row row{.method = "pinwheel", .workers = 8, .prefetch = 4};
  row.device_buffers = 2;
  EXPECT_EQ(row.Label(), "pinwheel 8x4");
  row.device_buffers = 4;
  row.stores = "nt";
  EXPECT_EQ(row.Label(), "pinwheel 8x4x4 nt");
  row.stores = "";
  row.gather = true;
  EXPECT_EQ(row.Label(), "pinwheel 8x4x4 gather");
  EXPECT_EQ(Row{.method = "raw_pinned"}.Label(), "raw_pinned");
}

TEST(RepeatedRowToJsonTest, CarriesMediansRangesAndTheRepetitionCount) {
  RepeatedRow row;
  row.reps = {Repetition(1, 40, 50), Repetition(2, 30, 60),
              Repetition(3, 45, 50)};
  const std::string json = RepeatedRowToJson(row);
  EXPECT_THAT(json, HasSubstr("\"kind\":\"row\""));
  EXPECT_THAT(json, HasSubstr("\"repetitions\":3"));
  EXPECT_THAT(json, HasSubstr("\"gbps\":40,\"gbps_min\":30,\"gbps_max\":45"));
  EXPECT_THAT(json, HasSubstr("\"ratio_to_raw\":0.8,"));  // 0.8, 0.5, 0.9
  EXPECT_THAT(RowToJson(row.reps[1]), HasSubstr("\"repetition\":2"));
  EXPECT_THAT(RowToJson(row.reps[1]), HasSubstr("\"kind\":\"rep\""));
}

// Reads every sample of `dataset` into a batch slot of `batch` samples and
// returns the slots' bytes one after another.
std::vector<std::byte> ReadAll(const Dataset& dataset, int64_t batch) {
  absl::StatusOr<BatchLayout> layout =
      BatchLayout::Create(dataset.layout(), batch);
  EXPECT_TRUE(layout.ok()) << layout.status();
  std::vector<std::byte> out;
  // One byte more than a slot, so the slot can start misaligned.
  std::vector<std::byte> buffer(layout->slot_bytes() + 1);
  std::byte* slot = buffer.data() + 1;
  for (int64_t first = 0; first + batch <= dataset.size(); first += batch) {
    std::fill(buffer.begin(), buffer.end(), std::byte{0xee});
    for (int64_t p = 0; p < batch; ++p) {
      SampleView view(*layout, slot, p, first + p);
      EXPECT_TRUE(dataset.Read(first + p, view).ok());
      EXPECT_TRUE(view.status().ok()) << view.status();
    }
    out.insert(out.end(), slot, slot + layout->slot_bytes());
  }
  return out;
}

TEST(StreamingImageDatasetTest, ReadsTheSameBytesAsTheMemcpyDataset) {
  if (!StreamingStoresAvailable()) {
    GTEST_SKIP() << "no streaming stores in this build (not x86 with SSE2)";
  }
  // Side 7: 147-byte images, so fields start at every alignment and the
  // head and tail paths of the streaming copy both run.
  for (int side : {7, 32}) {
    absl::StatusOr<std::shared_ptr<const Dataset>> memcpy_images =
        MakeImageDataset({.samples = 40, .side = side, .seed = 5});
    absl::StatusOr<std::shared_ptr<const Dataset>> streamed_images =
        MakeImageDataset(
            {.samples = 40, .side = side, .seed = 5, .streaming_stores = true});
    ASSERT_TRUE(memcpy_images.ok()) << memcpy_images.status();
    ASSERT_TRUE(streamed_images.ok()) << streamed_images.status();
    EXPECT_EQ((*streamed_images)->size(), 40);
    EXPECT_EQ((*streamed_images)->layout().ToString(),
              (*memcpy_images)->layout().ToString());
    EXPECT_EQ(ReadAll(**streamed_images, 8), ReadAll(**memcpy_images, 8))
        << "side " << side;
  }
}

TEST(StreamingImageDatasetTest, RejectsAnIndexOutsideTheDataset) {
  if (!StreamingStoresAvailable()) {
    GTEST_SKIP() << "no streaming stores in this build (not x86 with SSE2)";
  }
  absl::StatusOr<std::shared_ptr<const Dataset>> images = MakeImageDataset(
      {.samples = 4, .side = 4, .seed = 1, .streaming_stores = true});
  ASSERT_TRUE(images.ok()) << images.status();
  absl::StatusOr<BatchLayout> layout =
      BatchLayout::Create((*images)->layout(), 1);
  ASSERT_TRUE(layout.ok());
  std::vector<std::byte> slot(layout->slot_bytes());
  SampleView view(*layout, slot.data(), 0, 4);
  EXPECT_EQ((*images)->Read(4, view).code(), absl::StatusCode::kOutOfRange);
}

cpu_set_t AffinityOf(pid_t tid) {
  cpu_set_t set;
  CPU_ZERO(&set);
  EXPECT_EQ(sched_getaffinity(tid, sizeof(set), &set), 0);
  return set;
}

TEST(ConsumerPinTest, NegativeCpuPinsNothing) {
  absl::StatusOr<std::optional<ConsumerPin>> pin = ConsumerPin::Start(-1);
  ASSERT_TRUE(pin.ok()) << pin.status();
  EXPECT_FALSE(pin->has_value());
}

TEST(ConsumerPinTest, RejectsACpuOutsideTheProcessSet) {
  absl::StatusOr<std::optional<ConsumerPin>> pin =
      ConsumerPin::Start(CPU_SETSIZE + 5);
  EXPECT_EQ(pin.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(pin.status().message(), HasSubstr("--pin_consumer_cpu"));
}

TEST(ConsumerPinTest, PinsTheCallerAloneAndRestoresEveryThread) {
  const cpu_set_t original = AffinityOf(0);
  if (CPU_COUNT(&original) < 2) {
    GTEST_SKIP() << "needs a process with at least 2 CPUs";
  }
  int cpu = 0;
  while (!CPU_ISSET(cpu, &original)) ++cpu;

  // Another thread, alive across the pin.
  std::atomic<pid_t> other_tid{0};
  absl::Notification done;
  std::thread other([&] {
    other_tid = static_cast<pid_t>(syscall(SYS_gettid));
    done.WaitForNotification();
  });
  while (other_tid.load() == 0) std::this_thread::yield();

  {
    absl::StatusOr<std::optional<ConsumerPin>> pin = ConsumerPin::Start(cpu);
    ASSERT_TRUE(pin.ok()) << pin.status();
    ASSERT_TRUE(pin->has_value());
    const cpu_set_t mine = AffinityOf(0);
    EXPECT_EQ(CPU_COUNT(&mine), 1);
    EXPECT_TRUE(CPU_ISSET(cpu, &mine));
    const cpu_set_t theirs = AffinityOf(other_tid.load());
    EXPECT_FALSE(CPU_ISSET(cpu, &theirs));
    EXPECT_EQ(CPU_COUNT(&theirs), CPU_COUNT(&original) - 1);
  }
  const cpu_set_t mine_after = AffinityOf(0);
  const cpu_set_t theirs_after = AffinityOf(other_tid.load());
  EXPECT_TRUE(CPU_EQUAL(&mine_after, &original));
  EXPECT_TRUE(CPU_EQUAL(&theirs_after, &original));
  done.Notify();
  other.join();
}

// --- w2w: the widening kernel (transfer/device_stage/transform_kernels.cu)
// ------

#if defined(PINWHEEL_BENCH_CUDA)

struct TokenWidth {
  const char* name;
  int token_bytes;
  bool signed_tokens;
};

// Writes `count` tokens of every bit pattern spread over the width's range
// (both halves: a wrong sign or zero extension shows).
void WriteTokenFile(const std::string& path, int token_bytes, int64_t count) {
  std::vector<std::byte> bytes(static_cast<size_t>(count * token_bytes));
  for (int64_t i = 0; i < count; ++i) {
    const uint64_t pattern = static_cast<uint64_t>(i) * 0x9E3779B97F4A7C15ull;
    std::memcpy(bytes.data() + i * token_bytes, &pattern,
                static_cast<size_t>(token_bytes));
  }
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << path;
}

class WidenTokenWindowsTest : public ::testing::TestWithParam<TokenWidth> {};

// A batch of windows read with TokenOutput::kWindow, widened by WidenStep on
// the GPU, equals the same indices read with kInputAndTargetInt64 (the CPU
// widening). seq_len 300: two blocks of 256 columns, the second partial.
TEST_P(WidenTokenWindowsTest,
       MatchesTheDatasetsCpuWideningOfTheSameWindows_CUDA) {
  SKIP_WITHOUT_GPU("GPU case");
  const TokenWidth width = GetParam();
  const std::string path = absl::StrCat(::testing::TempDir(), "/widen_tokens_",
                                        getpid(), "_", width.name, ".bin");
  WriteTokenFile(path, width.token_bytes, 20000);
  constexpr int64_t kSeqLen = 300;
  constexpr int64_t kBatch = 5;
  TokenWindowOptions options = {.token_bytes = width.token_bytes,
                                .signed_tokens = width.signed_tokens,
                                .seq_len = kSeqLen,
                                .seed = 9};
  absl::StatusOr<std::shared_ptr<TokenWindowDataset>> widened =
      TokenWindowDataset::Open(path, options);
  options.output = TokenOutput::kWindow;
  absl::StatusOr<std::shared_ptr<TokenWindowDataset>> windows =
      TokenWindowDataset::Open(path, options);
  ASSERT_TRUE(widened.ok()) << widened.status();
  ASSERT_TRUE(windows.ok()) << windows.status();
  absl::StatusOr<BatchLayout> window_layout =
      BatchLayout::Create((*windows)->layout(), kBatch);
  absl::StatusOr<BatchLayout> wide_layout =
      BatchLayout::Create((*widened)->layout(), kBatch);
  ASSERT_TRUE(window_layout.ok() && wide_layout.ok());
  std::vector<std::byte> window_slot(window_layout->slot_bytes());
  std::vector<std::byte> wide_slot(wide_layout->slot_bytes());
  const int64_t indices[kBatch] = {0, 17, 3, 42, 11};
  for (int64_t p = 0; p < kBatch; ++p) {
    SampleView window(*window_layout, window_slot.data(), p, indices[p]);
    SampleView wide(*wide_layout, wide_slot.data(), p, indices[p]);
    ASSERT_TRUE((*windows)->Read(indices[p], window).ok());
    ASSERT_TRUE((*widened)->Read(indices[p], wide).ok());
  }

  const size_t window_bytes = window_layout->CopyBytes(kBatch);
  void* device = nullptr;
  ASSERT_EQ(cudaMalloc(&device, window_bytes), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(device, window_slot.data(), window_bytes,
                       cudaMemcpyHostToDevice),
            cudaSuccess);
  absl::StatusOr<std::unique_ptr<WidenStep>> step = WidenStep::Create(
      0, width.token_bytes, width.signed_tokens, kBatch, kSeqLen);
  ASSERT_TRUE(step.ok()) << step.status();
  const auto* field0 =
      static_cast<const std::byte*>(device) + window_layout->field_offset(0);
  ASSERT_TRUE((*step)->EnqueueFor(field0, nullptr).ok());
  absl::StatusOr<std::pair<std::vector<int64_t>, std::vector<int64_t>>> out =
      (*step)->CopyOut(nullptr);
  cudaFree(device);
  ASSERT_TRUE(out.ok()) << out.status();

  std::vector<int64_t> input(kBatch * kSeqLen);
  std::vector<int64_t> target(kBatch * kSeqLen);
  std::memcpy(input.data(), wide_slot.data() + wide_layout->field_offset(0),
              input.size() * 8);
  std::memcpy(target.data(), wide_slot.data() + wide_layout->field_offset(1),
              target.size() * 8);
  EXPECT_EQ(out->first, input);
  EXPECT_EQ(out->second, target);
  std::remove(path.c_str());
}

INSTANTIATE_TEST_SUITE_P(
    EachTokenWidth, WidenTokenWindowsTest,
    ::testing::Values(TokenWidth{"u8", 1, false}, TokenWidth{"i8", 1, true},
                      TokenWidth{"u16", 2, false}, TokenWidth{"i16", 2, true},
                      TokenWidth{"u32", 4, false}, TokenWidth{"i32", 4, true},
                      TokenWidth{"i64", 8, false}),
    [](const ::testing::TestParamInfo<TokenWidth>& info) {
      return std::string(info.param.name);
    });

// More rows than a grid's y dimension holds (65,535): the rows loop.
TEST(WidenTokenWindowsLaunchTest, WidensMoreRowsThanTheGridHolds_CUDA) {
  SKIP_WITHOUT_GPU("GPU case");
  constexpr int64_t kBatch = 70000;
  constexpr int64_t kSeqLen = 3;
  std::vector<uint16_t> tokens(kBatch * (kSeqLen + 1));
  for (size_t i = 0; i < tokens.size(); ++i) {
    tokens[i] = static_cast<uint16_t>(i * 7919u);
  }
  void* device = nullptr;
  int64_t* input = nullptr;
  int64_t* target = nullptr;
  const size_t out_bytes = kBatch * kSeqLen * sizeof(int64_t);
  ASSERT_EQ(cudaMalloc(&device, tokens.size() * 2), cudaSuccess);
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&input), out_bytes),
            cudaSuccess);
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&target), out_bytes),
            cudaSuccess);
  ASSERT_EQ(cudaMemcpy(device, tokens.data(), tokens.size() * 2,
                       cudaMemcpyHostToDevice),
            cudaSuccess);
  ASSERT_EQ(LaunchWidenTokenWindows(device, 2, false, kBatch, kSeqLen, input,
                                    target, nullptr),
            0);
  std::vector<int64_t> got_input(kBatch * kSeqLen);
  std::vector<int64_t> got_target(kBatch * kSeqLen);
  ASSERT_EQ(
      cudaMemcpy(got_input.data(), input, out_bytes, cudaMemcpyDeviceToHost),
      cudaSuccess);
  ASSERT_EQ(
      cudaMemcpy(got_target.data(), target, out_bytes, cudaMemcpyDeviceToHost),
      cudaSuccess);
  cudaFree(device);
  cudaFree(input);
  cudaFree(target);
  for (int64_t b = 0; b < kBatch; ++b) {
    for (int64_t k = 0; k < kSeqLen; ++k) {
      ASSERT_EQ(got_input[b * kSeqLen + k], tokens[b * (kSeqLen + 1) + k])
          << "row " << b << " column " << k;
      ASSERT_EQ(got_target[b * kSeqLen + k], tokens[b * (kSeqLen + 1) + k + 1])
          << "row " << b << " column " << k;
    }
  }
}

// No device needed: the arguments are checked before any CUDA call.
TEST(WidenTokenWindowsLaunchTest, RejectsArgumentsThatDescribeNoWindowBatch) {
  int64_t out[4];
  const uint16_t tokens[5] = {};
  EXPECT_EQ(LaunchWidenTokenWindows(tokens, 3, false, 1, 4, out, out, nullptr),
            kWidenBadArguments);
  EXPECT_EQ(LaunchWidenTokenWindows(tokens, 2, false, -1, 4, out, out, nullptr),
            kWidenBadArguments);
  EXPECT_EQ(LaunchWidenTokenWindows(tokens, 2, false, 1, 0, out, out, nullptr),
            kWidenBadArguments);
  EXPECT_EQ(LaunchWidenTokenWindows(nullptr, 2, false, 1, 4, out, out, nullptr),
            kWidenBadArguments);
  EXPECT_EQ(LaunchWidenTokenWindows(nullptr, 2, false, 0, 4, nullptr, nullptr,
                                    nullptr),
            0);  // an empty batch queues nothing
  EXPECT_EQ(WidenStep::Create(0, 3, false, 1, 4).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(WidenStep::Create(0, 2, false, 0, 4).status().code(),
            absl::StatusCode::kInvalidArgument);
}

#else  // !PINWHEEL_BENCH_CUDA

TEST(WidenTokenWindowsLaunchTest, NeedsACudaBuild_CUDA) {
  GTEST_SKIP() << "built without CUDA: the widening kernel is not built";
}

#endif  // PINWHEEL_BENCH_CUDA

}  // namespace
}  // namespace pinwheel::bench
