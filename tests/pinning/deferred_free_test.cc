// DeferredFree (Note [slots freed off the caller's thread] in
// pinning/deferred_free.h): every block handed over is freed, from any
// thread, and Drain() waits for them; the destructor frees what is left
// (a leak there fails the ASan build's LeakSanitizer).
#include "pinning/deferred_free.h"

#include <gtest/gtest.h>
#include <memory>
#include <thread>
#include <vector>

#include "pinning/host_allocation.h"

namespace pinwheel::internal {
namespace {

HostAllocation Block() {
  absl::StatusOr<HostAllocation> block =
      HostAllocation::Allocate(4096, HostMemoryKind::kPageable);
  EXPECT_TRUE(block.ok()) << block.status();
  return block.ok() ? *std::move(block) : HostAllocation();
}

TEST(DeferredFree, FreesEveryBlockHandedOverFromSeveralThreads) {
  DeferredFree freer;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&freer] {
      for (int i = 0; i < 50; ++i) freer.Free(Block());
    });
  }
  for (std::thread& thread : threads) thread.join();
  freer.Drain();
  EXPECT_EQ(freer.freed(), 200);
}

TEST(DeferredFree, AnEmptyBlockIsNothingToFree) {
  DeferredFree freer;
  freer.Free(HostAllocation());
  freer.Drain();  // returns: nothing was handed over
  EXPECT_EQ(freer.freed(), 0);
}

TEST(DeferredFree, TheDestructorFreesWhatIsStillQueued) {
  auto freer = std::make_unique<DeferredFree>();
  for (int i = 0; i < 100; ++i) freer->Free(Block());
  EXPECT_LE(freer->freed(), 100);
  freer.reset();  // joins after the last free; LeakSanitizer checks the rest
}

}  // namespace
}  // namespace pinwheel::internal
