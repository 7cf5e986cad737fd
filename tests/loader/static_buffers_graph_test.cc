// The GPU case of LoaderOptions::static_device_buffers: one CUDA graph per
// caller-owned buffer, captured before the loader starts, each a reduction
// reading its buffer's fixed address; every batch of a shuffled epoch is
// summed by replaying the graph of the buffer it landed in, and the sums
// match the host's. A missing release fence (a copy into a buffer a queued
// graph still reads) or a batch in the wrong buffer shows as a wrong sum.
// Skips, saying so, without a GPU.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <gtest/gtest.h>
#include <memory>
#include <numeric>
#include <optional>
#include <set>
#include <vector>

#include "absl/status/status.h"

#include "loader/dataset.h"
#include "loader/loader.h"
#include "loader/loader_builder.h"
#include "tests/support/skip_without_gpu.h"
#include "transfer/device.h"
#include "transfer/device_batch.h"
#include "transfer/sample_layout.h"
#include "transfer/static_device_buffer.h"
#include "transfer/stream.h"

#ifdef PINWHEEL_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "tests/support/spin_kernel.h"
#include "tests/support/sum_kernel.h"
#endif

namespace pinwheel {
namespace {

#ifdef PINWHEEL_HAVE_CUDA

constexpr int64_t kSamples = 1280;
constexpr int64_t kBatch = 64;
constexpr int64_t kBatches = kSamples / kBatch;  // 20, all full
constexpr int kElements = 256;                   // int32 per sample
constexpr int kBuffers = 3;

// Element k of sample i.
int32_t Value(int64_t i, int k) {
  return static_cast<int32_t>((i * 1009 + k * 17) % 100003);
}

// Sample i: "x" i32[kElements] = Value(i, k).
class ValueDataset : public Dataset {
 public:
  ValueDataset() {
    layout_ = *SampleLayout::Create(
        {{.name = "x", .dtype = DType::kInt32, .shape = {kElements}}});
  }
  int64_t size() const override { return kSamples; }
  const SampleLayout& layout() const override { return layout_; }
  absl::Status Read(int64_t index, SampleView& out) const override {
    for (int k = 0; k < kElements; ++k) {
      const int32_t v = Value(index, k);
      std::memcpy(out.field(0).data() + 4 * k, &v, 4);
    }
    return absl::OkStatus();
  }

 private:
  SampleLayout layout_;
};

// cudaFree on destruction.
struct CudaFree {
  void operator()(void* p) const { cudaFree(p); }
};
using DeviceMemory = std::unique_ptr<void, CudaFree>;

DeviceMemory Allocate(size_t bytes) {
  void* p = nullptr;
  EXPECT_EQ(cudaMalloc(&p, bytes), cudaSuccess) << "cudaMalloc " << bytes;
  return DeviceMemory(p);
}

// The instantiated graphs, destroyed with it.
struct GraphExecs {
  std::vector<cudaGraphExec_t> exec;
  ~GraphExecs() {
    for (cudaGraphExec_t g : exec) {
      if (g != nullptr) cudaGraphExecDestroy(g);
    }
  }
};

#define ASSERT_CUDA(call) \
  ASSERT_EQ(static_cast<int>(call), static_cast<int>(cudaSuccess)) << #call

#endif  // PINWHEEL_HAVE_CUDA

TEST(StaticBuffersGraph,
     AGraphPerBufferReplayedOverAnEpochSumsEveryBatch_CUDA) {
  SKIP_WITHOUT_GPU("GPU case");
#ifdef PINWHEEL_HAVE_CUDA
  absl::StatusOr<Device> device = Device::Cuda(0);
  ASSERT_TRUE(device.ok()) << device.status();
  ASSERT_CUDA(cudaSetDevice(0));
  auto dataset = std::make_shared<ValueDataset>();
  LoaderBuilder builder(dataset);
  builder.batch_size(kBatch)
      .shuffle(/*seed=*/5)
      .num_workers(2)
      .prefetch(4)
      .device(*device);
  absl::StatusOr<size_t> bytes = builder.device_buffer_bytes();
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  absl::StatusOr<BatchLayout> layout =
      BatchLayout::Create(dataset->layout(), kBatch);
  ASSERT_TRUE(layout.ok()) << layout.status();
  ASSERT_EQ(*bytes, layout->slot_bytes());
  const size_t x_offset = layout->field_offset(0);

  // The caller's buffers, and what the graphs write: one sum per replay.
  std::vector<DeviceMemory> memory;
  std::vector<StaticDeviceBuffer> buffers;
  for (int b = 0; b < kBuffers; ++b) {
    memory.push_back(Allocate(*bytes));
    ASSERT_NE(memory.back(), nullptr);
    buffers.push_back({memory.back().get(), *bytes});
  }
  constexpr unsigned int kCapacity = 2 * kBatches;
  DeviceMemory sums = Allocate(kCapacity * sizeof(unsigned long long));
  DeviceMemory counter = Allocate(sizeof(unsigned int));
  DeviceMemory total = Allocate(sizeof(unsigned long long));
  ASSERT_TRUE(sums && counter && total);
  ASSERT_CUDA(
      cudaMemset(sums.get(), 0, kCapacity * sizeof(unsigned long long)));
  ASSERT_CUDA(cudaMemset(counter.get(), 0, sizeof(unsigned int)));
  ASSERT_CUDA(cudaMemset(total.get(), 0, sizeof(unsigned long long)));
  ASSERT_CUDA(cudaDeviceSynchronize());

  cudaStream_t compute = nullptr;
  ASSERT_CUDA(cudaStreamCreateWithFlags(&compute, cudaStreamNonBlocking));
  std::unique_ptr<CUstream_st, decltype(&cudaStreamDestroy)> compute_owner(
      compute, &cudaStreamDestroy);

  // One graph per buffer, captured before the loader runs (no other thread
  // makes CUDA calls during the capture).
  GraphExecs graphs;
  graphs.exec.assign(kBuffers, nullptr);
  for (int b = 0; b < kBuffers; ++b) {
    const auto* x = reinterpret_cast<const int32_t*>(
        static_cast<const std::byte*>(buffers[b].data) + x_offset);
    ASSERT_CUDA(
        cudaStreamBeginCapture(compute, cudaStreamCaptureModeThreadLocal));
    const int launch = testing_support::LaunchSumIntoNext(
        compute, x, kBatch * kElements,
        static_cast<unsigned long long*>(sums.get()), kCapacity,
        static_cast<unsigned int*>(counter.get()),
        static_cast<unsigned long long*>(total.get()));
    cudaGraph_t graph = nullptr;
    const cudaError_t end = cudaStreamEndCapture(compute, &graph);
    ASSERT_EQ(launch, static_cast<int>(cudaSuccess)) << "kernel launch";
    ASSERT_CUDA(end);
    ASSERT_NE(graph, nullptr);
    const cudaError_t instantiate =
        cudaGraphInstantiate(&graphs.exec[b], graph, 0);
    cudaGraphDestroy(graph);
    ASSERT_CUDA(instantiate);
  }

  std::vector<unsigned long long> expected;  // per batch, delivery order
  std::vector<int64_t> seen_indices;
  std::set<int> used;
  {
    absl::StatusOr<Loader> loader =
        builder.static_device_buffers(buffers).Build();
    ASSERT_TRUE(loader.ok()) << loader.status();
    const Stream stream = Stream::Borrow(*device, compute);
    bool failed = false;
    while (!failed) {
      absl::StatusOr<std::optional<DeviceBatch>> next = loader->Next();
      if (!next.ok()) {
        ADD_FAILURE() << next.status();
        break;
      }
      if (!next->has_value()) break;
      DeviceBatch& batch = **next;
      const int b = batch.buffer_index();
      if (b < 0 || b >= kBuffers || batch.size() != kBatch) {
        ADD_FAILURE() << "batch " << batch.index() << " in buffer " << b
                      << " with " << batch.size() << " samples";
        break;
      }
      used.insert(b);
      EXPECT_EQ(batch.field(0).data,
                static_cast<std::byte*>(buffers[b].data) + x_offset)
          << "batch " << batch.index() << " not at buffer " << b
          << "'s fixed address";
      unsigned long long sum = 0;
      for (int64_t i : batch.sample_indices()) {
        seen_indices.push_back(i);
        for (int k = 0; k < kElements; ++k) {
          sum += static_cast<uint32_t>(Value(i, k));
        }
      }
      expected.push_back(sum);
      absl::Status status = batch.WaitOn(stream);
      // A slow consumer: the copies run ahead into the other buffers while
      // this step still reads its own.
      if (status.ok() && testing_support::LaunchSpin(compute, 0.2) != 0) {
        status = absl::InternalError("spin kernel launch failed");
      }
      if (status.ok()) {
        const cudaError_t replay = cudaGraphLaunch(graphs.exec[b], compute);
        if (replay != cudaSuccess) {
          status = absl::InternalError(cudaGetErrorString(replay));
        }
      }
      absl::Status released = batch.Release(stream);
      if (!status.ok() || !released.ok()) {
        ADD_FAILURE() << "batch " << batch.index() << ": " << status << " / "
                      << released;
        failed = true;
      }
    }
    // The loader (and its stage) go before the buffers, graphs and stream.
  }
  ASSERT_CUDA(cudaStreamSynchronize(compute));

  unsigned int replays = 0;
  std::vector<unsigned long long> sums_host(kCapacity, 0);
  unsigned long long total_host = 0;
  ASSERT_CUDA(cudaMemcpy(&replays, counter.get(), sizeof(replays),
                         cudaMemcpyDeviceToHost));
  ASSERT_CUDA(cudaMemcpy(sums_host.data(), sums.get(),
                         kCapacity * sizeof(unsigned long long),
                         cudaMemcpyDeviceToHost));
  ASSERT_CUDA(cudaMemcpy(&total_host, total.get(), sizeof(total_host),
                         cudaMemcpyDeviceToHost));

  ASSERT_EQ(expected.size(), static_cast<size_t>(kBatches));
  EXPECT_EQ(replays, static_cast<unsigned int>(kBatches));
  for (size_t k = 0; k < expected.size(); ++k) {
    EXPECT_EQ(sums_host[k], expected[k]) << "batch " << k << " of the epoch";
  }
  EXPECT_EQ(total_host,
            std::accumulate(expected.begin(), expected.end(), 0ULL));
  std::sort(seen_indices.begin(), seen_indices.end());
  std::vector<int64_t> all(kSamples);
  std::iota(all.begin(), all.end(), 0);
  EXPECT_EQ(seen_indices, all) << "the epoch is not every sample once";
  EXPECT_GE(used.size(), 2u) << "the batches did not rotate over the buffers";
#endif
}

TEST(StaticBuffersGraph, HostMemoryIsRefusedOnTheGpu_CUDA) {
  SKIP_WITHOUT_GPU("GPU case");
#ifdef PINWHEEL_HAVE_CUDA
  absl::StatusOr<Device> device = Device::Cuda(0);
  ASSERT_TRUE(device.ok()) << device.status();
  auto dataset = std::make_shared<ValueDataset>();
  LoaderBuilder builder(dataset);
  builder.batch_size(kBatch).device(*device);
  absl::StatusOr<size_t> bytes = builder.device_buffer_bytes();
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  DeviceMemory good = Allocate(*bytes);
  ASSERT_NE(good, nullptr);
  void* pinned = nullptr;
  ASSERT_CUDA(cudaMallocHost(&pinned, *bytes));
  std::unique_ptr<void, decltype(&cudaFreeHost)> pinned_owner(pinned,
                                                              &cudaFreeHost);
  std::vector<std::byte> pageable(*bytes + 256);
  void* pageable_aligned = reinterpret_cast<void*>(
      (reinterpret_cast<uintptr_t>(pageable.data()) + 255) / 256 * 256);
  for (void* bad : {pinned, pageable_aligned}) {
    const absl::Status status =
        LoaderBuilder(builder)
            .static_device_buffers({{good.get(), *bytes}, {bad, *bytes}})
            .Build()
            .status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    EXPECT_NE(status.message().find("static device buffer 1 of 2"),
              absl::string_view::npos)
        << status;
    EXPECT_NE(status.message().find("is not device memory of cuda:0"),
              absl::string_view::npos)
        << status;
  }
#endif
}

}  // namespace
}  // namespace pinwheel
