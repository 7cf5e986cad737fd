#include "pinning/host_registration.h"

#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"

#include "tests/support/skip_without_gpu.h"
#include "transfer/device.h"
#include "transfer/device_buffer_pool.h"
#include "transfer/stream.h"

namespace pinwheel {
namespace {

// A registrar that counts its calls and refuses while `refuse` is set.
struct CountingRegistrar {
  std::atomic<int> registered{0};
  std::atomic<int> unregistered{0};
  std::atomic<bool> refuse{false};
  // Set when a region was registered while still registered.
  std::atomic<bool> overlapped{false};

  HostRegistrar Make() {
    HostRegistrar r;
    r.register_memory = [this](absl::Span<const std::byte>, int) {
      if (refuse.load()) {
        return absl::ResourceExhaustedError("injected: registration refused");
      }
      if (registered.load() != unregistered.load()) overlapped = true;
      registered.fetch_add(1);
      return absl::OkStatus();
    };
    r.unregister_memory = [this](const std::byte*, bool) {
      unregistered.fetch_add(1);
    };
    r.device_pointer = [](const std::byte* data,
                          int) -> absl::StatusOr<const std::byte*> {
      return data;
    };
    return r;
  }
};

TEST(HostRegistry, RegistersARegionOnceForSeveralHolders) {
  CountingRegistrar counts;
  HostRegistry registry(counts.Make());
  std::vector<std::byte> rows(4096);
  auto first = registry.Register(absl::MakeConstSpan(rows), 0);
  ASSERT_TRUE(first.ok()) << first.status();
  auto second = registry.Register(absl::MakeConstSpan(rows), 1);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(counts.registered, 1);
  EXPECT_EQ(registry.references(absl::MakeConstSpan(rows), true), 2);
  EXPECT_EQ((*first)->device_data(), rows.data());
  first->reset();
  EXPECT_EQ(counts.unregistered, 0);
  EXPECT_EQ(registry.references(absl::MakeConstSpan(rows), true), 1);
  second->reset();
  EXPECT_EQ(counts.unregistered, 1);
  EXPECT_EQ(registry.references(absl::MakeConstSpan(rows), true), 0);
}

TEST(HostRegistry, RegistersAgainAfterTheLastHolderLetGo) {
  CountingRegistrar counts;
  HostRegistry registry(counts.Make());
  std::vector<std::byte> rows(64);
  { auto held = registry.Register(absl::MakeConstSpan(rows), 0); }
  { auto held = registry.Register(absl::MakeConstSpan(rows), 0); }
  EXPECT_EQ(counts.registered, 2);
  EXPECT_EQ(counts.unregistered, 2);
}

TEST(HostRegistry, ARefusedRegistrationIsReportedAndLeavesNothingBehind) {
  CountingRegistrar counts;
  HostRegistry registry(counts.Make());
  std::vector<std::byte> rows(64);
  counts.refuse = true;
  auto refused = registry.Register(absl::MakeConstSpan(rows), 0);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(refused.status().message().find("registering 64 bytes"),
            std::string::npos)
      << refused.status();
  EXPECT_NE(refused.status().message().find("injected"), std::string::npos);
  EXPECT_EQ(registry.references(absl::MakeConstSpan(rows), true), 0);
  counts.refuse = false;
  auto later = registry.Register(absl::MakeConstSpan(rows), 0);
  EXPECT_TRUE(later.ok()) << later.status();
  EXPECT_EQ(counts.unregistered, 0);
}

TEST(HostRegistry, TheHostBackendAndCudaCountApart) {
  CountingRegistrar counts;
  HostRegistry registry(counts.Make());
  std::vector<std::byte> rows(64);
  auto host = registry.Register(absl::MakeConstSpan(rows), -1);
  auto cuda = registry.Register(absl::MakeConstSpan(rows), 0);
  ASSERT_TRUE(host.ok() && cuda.ok());
  EXPECT_EQ(registry.references(absl::MakeConstSpan(rows), false), 1);
  EXPECT_EQ(registry.references(absl::MakeConstSpan(rows), true), 1);
  EXPECT_EQ(counts.registered, 2);
}

TEST(HostRegistry, RefusesAnEmptyRegion) {
  CountingRegistrar counts;
  HostRegistry registry(counts.Make());
  auto empty = registry.Register({}, 0);
  EXPECT_EQ(empty.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(counts.registered, 0);
}

TEST(HostRegistry, CudaRegistrarDoesNothingForTheHostBackend) {
  HostRegistry registry(CudaHostRegistrar());
  std::vector<std::byte> rows(64);
  auto host = registry.Register(absl::MakeConstSpan(rows), -1);
  ASSERT_TRUE(host.ok()) << host.status();
  EXPECT_EQ((*host)->device_data(), rows.data());
}

TEST(HostRegistry, ManyThreadsShareOneRegistrationAndUnregisterOnce) {
  CountingRegistrar counts;
  HostRegistry registry(counts.Make());
  std::vector<std::byte> rows(4096);
  constexpr int kThreads = 8;
  constexpr int kRounds = 200;
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kRounds; ++i) {
        auto held = registry.Register(absl::MakeConstSpan(rows), 0);
        if (!held.ok()) failures.fetch_add(1);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(failures, 0);
  EXPECT_FALSE(counts.overlapped);
  // Every registration was undone exactly once, none overlapped another.
  EXPECT_EQ(counts.registered, counts.unregistered);
  EXPECT_GE(counts.registered, 1);
  EXPECT_EQ(registry.references(absl::MakeConstSpan(rows), true), 0);
}

// The gather registers whole pages (RegisteredRanges), which on the heap
// hold other allocations: a device-to-host copy into one of them (here at
// byte 2048 of the registered page) must land while the page is registered.
// With cudaHostRegisterReadOnly it did not on the H100: Note [registered
// pages stay writable].
TEST(HostRegistry,
     ACopyFromTheDeviceIntoANeighbourOnARegisteredPageLands_CUDA) {
  SKIP_WITHOUT_GPU("GPU case");
  constexpr size_t kPage = 4096;
  constexpr size_t kNeighbour = 2048;
  constexpr size_t kBytes = 256;
  std::unique_ptr<std::byte, decltype(&std::free)> page(
      static_cast<std::byte*>(std::aligned_alloc(kPage, kPage)), &std::free);
  ASSERT_NE(page, nullptr);
  std::memset(page.get(), 0x11, kPage);
  const Device device = *Device::Cuda(0);
  auto registration =
      HostRegistry::Global().Register({page.get(), kPage}, device.ordinal());
  ASSERT_TRUE(registration.ok()) << registration.status();

  std::vector<std::byte> pattern(kBytes);
  for (size_t i = 0; i < kBytes; ++i) {
    pattern[i] = static_cast<std::byte>(i * 7 + 1);
  }
  auto pool = DeviceBufferPool::Create(device, 1, kBytes);
  ASSERT_TRUE(pool.ok()) << pool.status();
  absl::StatusOr<Stream> stream = Stream::Create(device);
  ASSERT_TRUE(stream.ok()) << stream.status();
  std::byte* on_device = (*pool)->buffer_data(0);
  ASSERT_TRUE(
      stream->CopyToDeviceAsync(on_device, pattern.data(), kBytes).ok());
  ASSERT_TRUE(stream->Synchronize().ok());
  const absl::Status copied =
      stream->CopyToHostAsync(page.get() + kNeighbour, on_device, kBytes);
  EXPECT_TRUE(copied.ok()) << copied;
  const absl::Status synced = stream->Synchronize();
  EXPECT_TRUE(synced.ok()) << synced;
  EXPECT_EQ(std::memcmp(page.get() + kNeighbour, pattern.data(), kBytes), 0);
  // The registered bytes around it are untouched.
  EXPECT_EQ(page.get()[kNeighbour - 1], std::byte{0x11});
  EXPECT_EQ(page.get()[kNeighbour + kBytes], std::byte{0x11});
  registration->reset();
}

}  // namespace
}  // namespace pinwheel
