// A loader on one GPU leaves the others alone: no context created on GPU 0
// for a loader on cuda:1, and the caller's current device (or the absence
// of one) unchanged by Build, Next, Release and Shutdown. Every case skips,
// saying so, without a GPU; the two-GPU cases skip with one.
#include <cstdint>
#include <gtest/gtest.h>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "loader/loader.h"
#include "loader/loader_builder.h"
#include "tests/support/skip_without_gpu.h"
#include "tests/support/test_datasets.h"
#include "transfer/device.h"

#ifdef PINWHEEL_HAVE_CUDA
#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include "pinning/base/cuda_device_guard.h"
#endif

namespace pinwheel {
namespace {

using testing_support::PatternDataset;

#ifdef PINWHEEL_HAVE_CUDA

// A loader with pinned slots and a transfer thread on `device`.
absl::StatusOr<Loader> PinnedLoader(const Device& device) {
  return LoaderBuilder(std::make_shared<PatternDataset>(256))
      .batch_size(16)
      .num_workers(2)
      .prefetch(4)
      .pin_memory(true)
      .device(device)
      .Build();
}

int CurrentDevice() {
  int device = -1;
  EXPECT_EQ(cudaGetDevice(&device), cudaSuccess);
  return device;
}

bool ThreadHasContext() {
  absl::StatusOr<bool> has = internal::CudaThreadHasCurrentContext();
  EXPECT_TRUE(has.ok()) << has.status();
  return has.value_or(true);
}

// NVML's view of a GPU's used memory, which (unlike cudaMemGetInfo) does not
// create a context on the GPU it looks at. nullopt when NVML is missing.
std::optional<uint64_t> UsedBytesFromNvml(int ordinal) {
  static void* nvml = [] {
    void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) return lib;
    auto init = reinterpret_cast<int (*)()>(dlsym(lib, "nvmlInit_v2"));
    if (init == nullptr || init() != 0) return static_cast<void*>(nullptr);
    return lib;
  }();
  if (nvml == nullptr) return std::nullopt;
  struct Memory {
    unsigned long long total, free, used;
  };
  auto by_bus = reinterpret_cast<int (*)(const char*, void**)>(
      dlsym(nvml, "nvmlDeviceGetHandleByPciBusId_v2"));
  auto memory = reinterpret_cast<int (*)(void*, Memory*)>(
      dlsym(nvml, "nvmlDeviceGetMemoryInfo"));
  char bus[64] = {};
  if (by_bus == nullptr || memory == nullptr ||
      cudaDeviceGetPCIBusId(bus, sizeof bus, ordinal) != cudaSuccess) {
    return std::nullopt;
  }
  void* handle = nullptr;
  Memory info{};
  if (by_bus(bus, &handle) != 0 || memory(handle, &info) != 0)
    return std::nullopt;
  return info.used;
}

// Runs in a fresh process (see the test): exits 0 when a loader on cuda:1
// ran an epoch and shut down without creating cuda:0's context or adding
// memory on GPU 0, else 1 (2: the process was not fresh), saying why.
[[noreturn]] void RunLoaderOnCuda1InAFreshProcess() {
  auto fail = [](int code, const std::string& why) {
    std::fprintf(stderr, "%s\n", why.c_str());
    std::fflush(stderr);
    std::_Exit(code);
  };
  absl::StatusOr<bool> active = internal::CudaPrimaryContextActive(0);
  if (!active.ok()) fail(1, active.status().ToString());
  if (*active)
    fail(2, "cuda:0 already had a context: the process is not fresh");
  const std::optional<uint64_t> gpu0_before = UsedBytesFromNvml(0);
  {
    absl::StatusOr<Loader> loader = PinnedLoader(*Device::Cuda(1));
    if (!loader.ok()) fail(1, loader.status().ToString());
    while (true) {
      absl::StatusOr<std::optional<DeviceBatch>> batch = loader->Next();
      if (!batch.ok()) fail(1, batch.status().ToString());
      if (!*batch) break;
      if (absl::Status s = (*batch)->WaitOnHost(); !s.ok())
        fail(1, s.ToString());
      if (absl::Status s = (*batch)->Release(); !s.ok()) fail(1, s.ToString());
    }
    active = internal::CudaPrimaryContextActive(0);
    if (!active.ok() || *active) {
      fail(1, "a loader on cuda:1 created a context on cuda:0 (while running)");
    }
    loader->Shutdown();
  }
  active = internal::CudaPrimaryContextActive(0);
  if (!active.ok() || *active) {
    fail(1, "a loader on cuda:1 created a context on cuda:0 (after Shutdown)");
  }
  const std::optional<uint64_t> gpu0_after = UsedBytesFromNvml(0);
  if (gpu0_before && gpu0_after) {
    const int64_t added =
        static_cast<int64_t>(*gpu0_after) - static_cast<int64_t>(*gpu0_before);
    std::fprintf(stderr, "GPU 0 used memory: %+lld MiB (NVML)\n",
                 static_cast<long long>(added >> 20));
    // A context is ~500 MiB; other processes on a shared machine may move
    // the number a little, so only a context-sized jump fails.
    if (added > (64ll << 20)) {
      fail(1, "GPU 0's used memory grew by a context's worth");
    }
  } else {
    std::fprintf(stderr, "NVML unavailable: GPU 0 memory not measured\n");
  }
  std::_Exit(0);
}

#endif  // PINWHEEL_HAVE_CUDA

// cudaMemGetInfo / a context check on GPU 0 in this test binary would see
// the contexts the earlier cases made; so the check runs in a process of its
// own: a "threadsafe" death test re-executes this binary for this case only,
// and the child checks it starts with no context on cuda:0.
TEST(MultiGpu, LoaderOnCuda1CreatesNoContextAndNoMemoryOnCuda0_CUDA) {
  SKIP_WITHOUT_GPU("multi-GPU case", 2);
#ifdef PINWHEEL_HAVE_CUDA
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(RunLoaderOnCuda1InAFreshProcess(), ::testing::ExitedWithCode(0),
              "");
#endif
}

TEST(MultiGpu, CallersCurrentDeviceIsUnchangedByALoaderOnAnotherGpu_CUDA) {
  SKIP_WITHOUT_GPU("multi-GPU case", 2);
#ifdef PINWHEEL_HAVE_CUDA
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  absl::StatusOr<Loader> loader = PinnedLoader(*Device::Cuda(1));
  ASSERT_TRUE(loader.ok()) << loader.status();
  EXPECT_EQ(CurrentDevice(), 0) << "after Build";
  int64_t batches = 0;
  while (true) {
    absl::StatusOr<std::optional<DeviceBatch>> batch = loader->Next();
    ASSERT_TRUE(batch.ok()) << batch.status();
    if (!*batch) break;
    EXPECT_EQ(CurrentDevice(), 0) << "after Next";
    ASSERT_TRUE((*batch)->WaitOnHost().ok());
    ASSERT_TRUE((*batch)->Release().ok());
    EXPECT_EQ(CurrentDevice(), 0) << "after Release";
    ++batches;
  }
  EXPECT_EQ(batches, 16);
  loader->Shutdown();
  EXPECT_EQ(CurrentDevice(), 0) << "after Shutdown";
  // And the other way round: a caller on cuda:1, a loader on cuda:0.
  ASSERT_EQ(cudaSetDevice(1), cudaSuccess);
  {
    absl::StatusOr<Loader> on0 = PinnedLoader(*Device::Cuda(0));
    ASSERT_TRUE(on0.ok()) << on0.status();
    absl::StatusOr<std::optional<DeviceBatch>> batch = on0->Next();
    ASSERT_TRUE(batch.ok() && *batch);
    ASSERT_TRUE((*batch)->Release().ok());
  }
  EXPECT_EQ(CurrentDevice(), 1) << "after a loader on cuda:0 was destroyed";
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
#endif
}

// One GPU is enough for this one: a thread that never chose a device has no
// current context, and a loader must not leave one behind (cudaSetDevice
// did, making later runtime calls of that thread land on the loader's GPU).
TEST(MultiGpu, ThreadWithoutAContextHasNoneAfterBuildNextReleaseShutdown_CUDA) {
  SKIP_WITHOUT_GPU("multi-GPU case", 1);
#ifdef PINWHEEL_HAVE_CUDA
  const Device device = *Device::Cuda(Device::CudaDeviceCount() - 1);
  std::thread fresh([&] {
    ASSERT_FALSE(ThreadHasContext()) << "a new thread starts without a context";
    absl::StatusOr<Loader> loader = PinnedLoader(device);
    ASSERT_TRUE(loader.ok()) << loader.status();
    EXPECT_FALSE(ThreadHasContext()) << "after Build";
    absl::StatusOr<std::optional<DeviceBatch>> batch = loader->Next();
    ASSERT_TRUE(batch.ok() && *batch);
    EXPECT_FALSE(ThreadHasContext()) << "after Next";
    ASSERT_TRUE((*batch)->WaitOnHost().ok());
    ASSERT_TRUE((*batch)->Release().ok());
    EXPECT_FALSE(ThreadHasContext()) << "after Release";
    loader->Shutdown();
    EXPECT_FALSE(ThreadHasContext()) << "after Shutdown";
  });
  fresh.join();
#endif
}

// The same on a thread that did choose a device: it stays chosen.
TEST(MultiGpu, CallersCurrentDeviceIsUnchangedByALoaderOnTheSameGpu_CUDA) {
  SKIP_WITHOUT_GPU("multi-GPU case", 1);
#ifdef PINWHEEL_HAVE_CUDA
  const int last = Device::CudaDeviceCount() - 1;
  ASSERT_EQ(cudaSetDevice(last), cudaSuccess);
  {
    absl::StatusOr<Loader> loader = PinnedLoader(*Device::Cuda(last));
    ASSERT_TRUE(loader.ok()) << loader.status();
    absl::StatusOr<std::optional<DeviceBatch>> batch = loader->Next();
    ASSERT_TRUE(batch.ok() && *batch);
    ASSERT_TRUE((*batch)->Release().ok());
    loader->Shutdown();
  }
  EXPECT_EQ(CurrentDevice(), last);
  EXPECT_TRUE(ThreadHasContext());
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
#endif
}

}  // namespace
}  // namespace pinwheel
