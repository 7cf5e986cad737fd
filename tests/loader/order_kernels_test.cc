// The order kernels (loader/gather/order_kernels.h) on a GPU against the
// host samplers: DistributedSampler's Fill/At and EpochShuffle::At for every
// size 0..130 (the exact shuffle's boundary is 64), powers of two and their
// neighbours up to 2^40, 10^9, 2^40 + 1 and 300 random sizes, with every
// rank of worlds 1..4, shuffled and not, tails padded and dropped, from the
// start and mid-epoch, under rotating seeds and epochs (the cases of
// tests/support/order_cases.h, which the host test in
// tests/loader/sampler_test.cc runs too); and token windows' starts against
// order::WindowStart and a TokenWindowDataset. GPU only: every case skips,
// saying so, without a device or without CUDA.
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <gtest/gtest.h>
#include <memory>
#include <string>
#include <unistd.h>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"

#include "loader/epoch_order.h"
#include "loader/sampler.h"
#include "loader/token_window_dataset.h"
#include "tests/support/order_cases.h"
#include "tests/support/skip_without_gpu.h"
#include "transfer/device.h"

#ifdef PINWHEEL_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "loader/gather/order_kernels.h"
#endif

namespace pinwheel {
namespace {

#ifdef PINWHEEL_HAVE_CUDA

using internal::LaunchDealIndices;
using internal::LaunchWindowStarts;
using testing_support::DealCase;
using testing_support::PositionRun;

// A stream and a growing device buffer of int64 values, freed at the end.
class DeviceScratch {
 public:
  DeviceScratch() {
    created_ = cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking);
  }
  ~DeviceScratch() {
    if (buffer_ != nullptr) cudaFree(buffer_);
    if (created_ == cudaSuccess) cudaStreamDestroy(stream_);
  }
  DeviceScratch(const DeviceScratch&) = delete;
  DeviceScratch& operator=(const DeviceScratch&) = delete;

  bool ok() const { return created_ == cudaSuccess; }
  void* stream() const { return stream_; }
  // Returns a device buffer of at least `values` int64 values (its old
  // contents lost), or null when cudaMalloc fails.
  int64_t* Reserve(size_t values) {
    if (values <= capacity_) return buffer_;
    if (buffer_ != nullptr) cudaFree(buffer_);
    buffer_ = nullptr;
    capacity_ = 0;
    if (cudaMalloc(reinterpret_cast<void**>(&buffer_),
                   values * sizeof(int64_t)) != cudaSuccess) {
      return nullptr;
    }
    capacity_ = values;
    return buffer_;
  }
  // Copies `out.size()` values from `device` into `out` and waits.
  cudaError_t CopyBack(const int64_t* device, absl::Span<int64_t> out) {
    const cudaError_t copied =
        cudaMemcpyAsync(out.data(), device, out.size() * sizeof(int64_t),
                        cudaMemcpyDeviceToHost, stream_);
    if (copied != cudaSuccess) return copied;
    return cudaStreamSynchronize(stream_);
  }

 private:
  cudaError_t created_ = cudaErrorUnknown;
  cudaStream_t stream_ = nullptr;
  int64_t* buffer_ = nullptr;
  size_t capacity_ = 0;
};

// One run of positions of one case: where its values land in the buffer.
struct PlannedRun {
  size_t case_index = 0;
  PositionRun run;
  size_t offset = 0;
};

TEST(OrderKernels, DealIndicesMatchTheHostSamplersForManySizes_CUDA) {
  SKIP_WITHOUT_GPU();
  DeviceScratch scratch;
  ASSERT_TRUE(scratch.ok());
  uint64_t counter = 0;
  order::SplitMix64Stream draws(2023);
  int64_t checked = 0;
  for (int64_t size : testing_support::OrderSizes(/*random=*/300)) {
    std::vector<DealCase> cases = testing_support::DealCases(size, &counter);
    std::vector<std::unique_ptr<DistributedSampler>> samplers;
    std::vector<PlannedRun> plan;
    size_t total = 0;
    for (size_t k = 0; k < cases.size(); ++k) {
      const DealCase& c = cases[k];
      absl::StatusOr<std::unique_ptr<DistributedSampler>> sampler =
          DistributedSampler::Create(c.size, c.rank, c.world_size, c.shuffle,
                                     c.seed, c.drop_tail, c.start);
      ASSERT_TRUE(sampler.ok()) << c.Describe() << ": " << sampler.status();
      for (const PositionRun& run :
           testing_support::PositionRuns((*sampler)->size(), /*all_up_to=*/4096,
                                         /*random_runs=*/8, &draws)) {
        plan.push_back({k, run, total});
        total += static_cast<size_t>(run.count);
      }
      samplers.push_back(*std::move(sampler));
    }
    // EpochShuffle itself, through a Deal of one rank from the start.
    const DealCase& first = cases.front();
    const EpochShuffle shuffle(size, first.seed, first.epoch);
    order::Deal whole;
    whole.size = size;
    whole.shuffle = true;
    whole.epoch_shuffle = shuffle.shuffle();
    const int64_t whole_count = size < 4096 ? size : 4096;
    const size_t whole_offset = total;
    total += static_cast<size_t>(whole_count);

    int64_t* device = scratch.Reserve(total + 1);  // size 0 reads nothing
    ASSERT_NE(device, nullptr) << "cudaMalloc of " << total << " values";
    for (const PlannedRun& planned : plan) {
      const DealCase& c = cases[planned.case_index];
      ASSERT_EQ(
          LaunchDealIndices(samplers[planned.case_index]->DealFor(c.epoch),
                            planned.run.first, planned.run.count,
                            device + planned.offset, scratch.stream()),
          0)
          << c.Describe();
    }
    ASSERT_EQ(LaunchDealIndices(whole, 0, whole_count, device + whole_offset,
                                scratch.stream()),
              0);
    std::vector<int64_t> got(total);
    ASSERT_EQ(scratch.CopyBack(device, absl::MakeSpan(got)), cudaSuccess);

    for (const PlannedRun& planned : plan) {
      const DealCase& c = cases[planned.case_index];
      const DistributedSampler& sampler = *samplers[planned.case_index];
      std::vector<int64_t> want(static_cast<size_t>(planned.run.count));
      sampler.Fill(c.epoch, planned.run.first, absl::MakeSpan(want));
      for (size_t i = 0; i < want.size(); ++i) {
        ASSERT_EQ(got[planned.offset + i], want[i])
            << c.Describe() << ", position "
            << planned.run.first + static_cast<int64_t>(i);
      }
      if (planned.run.count > 0) {  // and At(), per position
        const int64_t last = planned.run.first + planned.run.count - 1;
        ASSERT_EQ(got[planned.offset + want.size() - 1],
                  sampler.At(c.epoch, last))
            << c.Describe() << ", position " << last;
      }
      checked += planned.run.count;
    }
    for (int64_t p = 0; p < whole_count; ++p) {
      ASSERT_EQ(got[whole_offset + static_cast<size_t>(p)], shuffle.At(p))
          << "EpochShuffle(" << size << ", " << first.seed << ", "
          << first.epoch << ") position " << p;
    }
    checked += whole_count;
  }
  std::printf("compared %lld positions\n", static_cast<long long>(checked));
  EXPECT_GT(checked, 50000000);
}

// More positions than one grid holds (4096 blocks of 256 threads): the
// grid-stride loop reaches every one.
TEST(OrderKernels, DealIndicesCoverCountsBeyondOneGrid_CUDA) {
  SKIP_WITHOUT_GPU();
  DeviceScratch scratch;
  ASSERT_TRUE(scratch.ok());
  const int64_t size = (int64_t{1} << 40) + 1;
  absl::StatusOr<std::unique_ptr<DistributedSampler>> sampler =
      DistributedSampler::Create(size, /*rank=*/1, /*world_size=*/3,
                                 /*shuffle=*/true, /*seed=*/5,
                                 /*drop_tail=*/false, /*start=*/12345);
  ASSERT_TRUE(sampler.ok()) << sampler.status();
  const int64_t count = 3000000;
  const int64_t first = 77;
  int64_t* device = scratch.Reserve(static_cast<size_t>(count));
  ASSERT_NE(device, nullptr);
  ASSERT_EQ(LaunchDealIndices((*sampler)->DealFor(9), first, count, device,
                              scratch.stream()),
            0);
  std::vector<int64_t> got(static_cast<size_t>(count));
  ASSERT_EQ(scratch.CopyBack(device, absl::MakeSpan(got)), cudaSuccess);
  std::vector<int64_t> want(static_cast<size_t>(count));
  (*sampler)->Fill(9, first, absl::MakeSpan(want));
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_EQ(got[i], want[i]) << "position " << first + int64_t(i);
  }
}

TEST(OrderKernels, LaunchNothingForAnEmptyCount_CUDA) {
  SKIP_WITHOUT_GPU();
  order::Deal deal;
  deal.size = 10;
  EXPECT_EQ(LaunchDealIndices(deal, 0, 0, nullptr, nullptr), 0);
  EXPECT_EQ(LaunchWindowStarts(1, 10, nullptr, 0, nullptr, nullptr), 0);
}

// Every kind of `starts` (1, 2, 1000, around 2^31, 2^40, around 2^63, the
// largest, random), several seeds, many indices: the device's window
// starts are order::WindowStart's on the host.
TEST(OrderKernels, WindowStartsMatchTheHostForEveryKindOfStarts_CUDA) {
  SKIP_WITHOUT_GPU();
  DeviceScratch scratch;
  ASSERT_TRUE(scratch.ok());
  std::vector<uint64_t> all_starts = {1,
                                      2,
                                      3,
                                      1000,
                                      (uint64_t{1} << 31) - 1,
                                      uint64_t{1} << 31,
                                      (uint64_t{1} << 31) + 1,
                                      uint64_t{1} << 40,
                                      (uint64_t{1} << 63) - 1,
                                      uint64_t{1} << 63,
                                      (uint64_t{1} << 63) + 1,
                                      0xffffffffffffffffULL};
  order::SplitMix64Stream draws(31);
  for (int i = 0; i < 40; ++i) {
    const int bits = 1 + static_cast<int>(draws.Bounded(64));
    const uint64_t value =
        bits == 64 ? draws.Next() : draws.Bounded(uint64_t{1} << bits);
    all_starts.push_back(value == 0 ? 1 : value);
  }
  std::vector<int64_t> indices;
  for (int64_t i = 0; i < 8192; ++i) indices.push_back(i);
  for (int i = 0; i < 8192; ++i) {
    indices.push_back(static_cast<int64_t>(draws.Next() >> 1));
  }
  indices.push_back(INT64_MAX);
  const size_t n = indices.size();
  int64_t* device = scratch.Reserve(2 * n);
  ASSERT_NE(device, nullptr);
  int64_t* device_indices = device;
  int64_t* device_out = device + n;
  ASSERT_EQ(cudaMemcpy(device_indices, indices.data(), n * sizeof(int64_t),
                       cudaMemcpyHostToDevice),
            cudaSuccess);
  std::vector<int64_t> got(n);
  for (uint64_t seed : {uint64_t{0}, uint64_t{1}, uint64_t{4},
                        uint64_t{0x9e3779b97f4a7c15ULL}, draws.Next()}) {
    for (uint64_t starts : all_starts) {
      ASSERT_EQ(LaunchWindowStarts(seed, starts, device_indices,
                                   static_cast<int64_t>(n), device_out,
                                   scratch.stream()),
                0);
      ASSERT_EQ(scratch.CopyBack(device_out, absl::MakeSpan(got)), cudaSuccess);
      for (size_t i = 0; i < n; ++i) {
        ASSERT_EQ(got[i], order::WindowStart(seed, indices[i], starts))
            << "seed " << seed << ", starts " << starts << ", index "
            << indices[i];
      }
    }
  }
  // In place: the indices overwritten by their starts.
  ASSERT_EQ(LaunchWindowStarts(7, 1000, device_indices, static_cast<int64_t>(n),
                               device_indices, scratch.stream()),
            0);
  ASSERT_EQ(scratch.CopyBack(device_indices, absl::MakeSpan(got)), cudaSuccess);
  for (size_t i = 0; i < n; ++i) {
    ASSERT_EQ(got[i], order::WindowStart(7, indices[i], 1000)) << indices[i];
  }
}

// A token file's windows: the device's starts are the dataset's own
// WindowStart(i) for every window.
TEST(OrderKernels, WindowStartsMatchATokenWindowDataset_CUDA) {
  SKIP_WITHOUT_GPU();
  const std::string path =
      absl::StrCat(::testing::TempDir(), "/order_", getpid(), "_tokens.bin");
  {
    std::vector<uint16_t> tokens(20000);
    for (size_t i = 0; i < tokens.size(); ++i) {
      tokens[i] = static_cast<uint16_t>(i * 7919u);
    }
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(tokens.data()),
              static_cast<std::streamsize>(tokens.size() * 2));
  }
  TokenWindowOptions options = {
      .token_bytes = 2, .seq_len = 33, .windows = 5000, .seed = 99};
  absl::StatusOr<std::shared_ptr<TokenWindowDataset>> dataset =
      TokenWindowDataset::Open(path, options);
  std::remove(path.c_str());
  ASSERT_TRUE(dataset.ok()) << dataset.status();
  const int64_t windows = (*dataset)->size();
  DeviceScratch scratch;
  ASSERT_TRUE(scratch.ok());
  int64_t* device = scratch.Reserve(static_cast<size_t>(windows));
  ASSERT_NE(device, nullptr);
  std::vector<int64_t> indices(static_cast<size_t>(windows));
  for (int64_t i = 0; i < windows; ++i) indices[static_cast<size_t>(i)] = i;
  ASSERT_EQ(cudaMemcpy(device, indices.data(), indices.size() * sizeof(int64_t),
                       cudaMemcpyHostToDevice),
            cudaSuccess);
  const auto starts = static_cast<uint64_t>((*dataset)->tokens() -
                                            (*dataset)->options().seq_len);
  ASSERT_EQ(LaunchWindowStarts((*dataset)->options().seed, starts, device,
                               windows, device, scratch.stream()),
            0);
  std::vector<int64_t> got(static_cast<size_t>(windows));
  ASSERT_EQ(scratch.CopyBack(device, absl::MakeSpan(got)), cudaSuccess);
  for (int64_t i = 0; i < windows; ++i) {
    ASSERT_EQ(got[static_cast<size_t>(i)], (*dataset)->WindowStart(i)) << i;
  }
}

#else  // !PINWHEEL_HAVE_CUDA

TEST(OrderKernels, GpuSuite_CUDA) { SKIP_WITHOUT_GPU(); }

#endif  // PINWHEEL_HAVE_CUDA

}  // namespace
}  // namespace pinwheel
