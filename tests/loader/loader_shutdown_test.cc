// Bounded shutdown (issue 18 item 4): a Read that never returns no longer
// hangs Shutdown() and ~Loader. They give up after shutdown_timeout, name
// the read, and leave its thread what it touches (the dataset, the pinned
// slot it writes) until it returns. Under AddressSanitizer a write landing
// in freed memory, or anything left unfreed once the read returns, fails.
#include <atomic>
#include <cstdint>
#include <cstring>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

#include "loader/dataset.h"
#include "loader/loader.h"
#include "loader/loader_builder.h"
#include "tests/support/notification.h"
#include "tests/support/test_datasets.h"

namespace pinwheel {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using testing_support::Notification;
using testing_support::Watchdog;

absl::Duration HangLimit() {
  return testing_support::kSanitized ? absl::Minutes(5) : absl::Minutes(1);
}

// Sample i: "x" u8[64], every byte i % 251. Read(stuck_index) waits for
// `release` (notifying `entered` first), then writes its sample like any
// other. The destructor notifies `destroyed`.
class StuckDataset : public Dataset {
 public:
  struct Signals {
    Notification entered;
    Notification release;
    Notification returned;
    Notification destroyed;
  };

  StuckDataset(int64_t size, int64_t stuck_index,
               std::shared_ptr<Signals> signals)
      : size_(size), stuck_index_(stuck_index), signals_(std::move(signals)) {
    layout_ = *SampleLayout::Create(
        {{.name = "x", .dtype = DType::kUInt8, .shape = {64}}});
  }
  ~StuckDataset() override { signals_->destroyed.Notify(); }

  int64_t size() const override { return size_; }
  const SampleLayout& layout() const override { return layout_; }
  absl::Status Read(int64_t index, SampleView& out) const override {
    if (index == stuck_index_) {
      signals_->entered.Notify();
      signals_->release.WaitForNotification();
    }
    // After a late return this writes into the slot and reads layout_:
    // both must still be alive.
    absl::Span<std::byte> x = out.field(0);
    std::memset(x.data(), static_cast<int>(index % 251), x.size());
    if (index == stuck_index_) signals_->returned.Notify();
    return absl::OkStatus();
  }

 private:
  const int64_t size_;
  const int64_t stuck_index_;
  const std::shared_ptr<Signals> signals_;
  SampleLayout layout_;
};

// Builds a loader over a StuckDataset that blocks on index 6 (batch 1 of
// batch_size 4), takes batch 0 and waits until the read of index 6 began.
Loader LoaderStuckInBatch1(std::shared_ptr<StuckDataset::Signals> signals) {
  auto dataset = std::make_shared<StuckDataset>(64, 6, signals);
  absl::StatusOr<Loader> loader = LoaderBuilder(std::move(dataset))
                                      .batch_size(4)
                                      .num_workers(2)
                                      .prefetch(2)
                                      .shutdown_timeout(absl::Milliseconds(200))
                                      .device(Device::Host())
                                      .Build();
  EXPECT_TRUE(loader.ok()) << loader.status();
  absl::StatusOr<std::optional<DeviceBatch>> first = loader->Next();
  EXPECT_TRUE(first.ok() && first->has_value()) << first.status();
  signals->entered.WaitForNotification();
  return *std::move(loader);
}

TEST(LoaderShutdown, GivesUpOnAReadThatNeverReturnsNamingIt) {
  Watchdog watchdog("ShutdownStuckRead", HangLimit());
  auto signals = std::make_shared<StuckDataset::Signals>();
  {
    Loader loader = LoaderStuckInBatch1(signals);
    const absl::Time start = absl::Now();
    loader.Shutdown();
    const absl::Status shut = loader.shutdown_status();
    EXPECT_LT(absl::Now() - start, HangLimit());
    EXPECT_EQ(shut.code(), absl::StatusCode::kDeadlineExceeded) << shut;
    EXPECT_THAT(std::string(shut.message()),
                AllOf(HasSubstr("Read(index 6)"), HasSubstr("batch 1"),
                      HasSubstr("epoch 0"), HasSubstr("worker "),
                      HasSubstr("shutdown_timeout 200ms")));
    loader.Shutdown();  // idempotent
    EXPECT_EQ(loader.shutdown_status(), shut);
    absl::StatusOr<std::optional<DeviceBatch>> next = loader.Next();
    EXPECT_EQ(next.status().code(), absl::StatusCode::kCancelled);
  }
  // The loader is gone; its stuck read still holds the dataset.
  EXPECT_FALSE(signals->destroyed.HasBeenNotified());
  // The read stays blocked for the whole test; let it go only now, so that
  // the sanitizers see every thread end and everything freed.
  signals->release.Notify();
  signals->destroyed.WaitForNotification();
}

TEST(LoaderShutdown, DestructorIsBoundedToo) {
  Watchdog watchdog("DestroyStuckRead", HangLimit());
  auto signals = std::make_shared<StuckDataset::Signals>();
  {
    Loader loader = LoaderStuckInBatch1(signals);
    const absl::Time start = absl::Now();
    {
      Loader doomed = std::move(loader);  // ~Loader, no Shutdown() first
    }
    EXPECT_LT(absl::Now() - start, HangLimit());
  }
  EXPECT_FALSE(signals->destroyed.HasBeenNotified());
  signals->release.Notify();
  signals->destroyed.WaitForNotification();
}

TEST(LoaderShutdown, AReadReturningAfterShutdownWritesIntoLiveMemory) {
  Watchdog watchdog("LateRead", HangLimit());
  auto signals = std::make_shared<StuckDataset::Signals>();
  {
    Loader loader = LoaderStuckInBatch1(signals);
    loader.Shutdown();
    EXPECT_EQ(loader.shutdown_status().code(),
              absl::StatusCode::kDeadlineExceeded);
  }
  // The read returns after the loader is gone: it writes its sample into
  // the pinned slot (AddressSanitizer: a heap-use-after-free if the ring
  // were freed), then the stopped pipeline winds down and frees all.
  signals->release.Notify();
  signals->returned.WaitForNotification();
  signals->destroyed.WaitForNotification();
}

TEST(LoaderShutdown, ReadsThatReturnInTimeShutDownCleanly) {
  Watchdog watchdog("InTime", HangLimit());
  auto signals = std::make_shared<StuckDataset::Signals>();
  {
    Loader loader = LoaderStuckInBatch1(signals);
    signals->release.Notify();  // returns within the default bound
    loader.Shutdown();
    EXPECT_TRUE(loader.shutdown_status().ok()) << loader.shutdown_status();
  }
  // Everything was joined: nothing outlives the loader.
  EXPECT_TRUE(signals->destroyed.HasBeenNotified());
}

TEST(LoaderShutdown, RefusesANonPositiveShutdownTimeout) {
  auto signals = std::make_shared<StuckDataset::Signals>();
  absl::StatusOr<Loader> loader =
      LoaderBuilder(std::make_shared<StuckDataset>(8, -1, signals))
          .shutdown_timeout(absl::ZeroDuration())
          .device(Device::Host())
          .Build();
  ASSERT_FALSE(loader.ok());
  EXPECT_EQ(loader.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(loader.status().message()),
              HasSubstr("shutdown_timeout"));
}

}  // namespace
}  // namespace pinwheel
