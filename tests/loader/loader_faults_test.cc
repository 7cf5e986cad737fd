// Loader under faults, on the host backend: a Read that fails or throws, a
// worker stuck in Read, a failing worker_init, shutdown with batches in
// flight and held, a consumer holding every device buffer, DLPack views
// keeping their buffer. Nothing is lost, nothing hangs (each test runs under
// a Watchdog that aborts on a hang instead of waiting for the CI timeout).
#include <atomic>
#include <cctype>
#include <cstdint>
#include <cstring>
#include <dlpack/dlpack.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

#include "loader/loader.h"
#include "loader/loader_builder.h"
#include "tests/support/async_acquire.h"
#include "tests/support/drain_epoch.h"
#include "tests/support/notification.h"
#include "tests/support/test_datasets.h"
#include "transfer/device_batch.h"

namespace pinwheel {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using testing_support::DrainedEpoch;
using testing_support::DrainEpoch;
using testing_support::HostBatch;
using testing_support::PatternDataset;
using testing_support::Watchdog;

// Generous bound against hangs only; never a timing assertion.
absl::Duration HangLimit() {
  return testing_support::kSanitized ? absl::Minutes(5) : absl::Minutes(1);
}

// Checks every sample of `batch` (already on the host backend) against the
// dataset, and that its data has landed.
void ExpectBitExact(const PatternDataset& dataset, const DeviceBatch& batch) {
  ASSERT_TRUE(batch.WaitOnHost().ok());
  ASSERT_EQ(batch.num_fields(), 3);
  for (int64_t p = 0; p < batch.size(); ++p) {
    const int64_t index = batch.sample_indices()[p];
    const std::vector<std::vector<std::byte>> expected =
        dataset.Expected(index);
    for (int f = 0; f < 3; ++f) {
      const std::vector<std::byte> host =
          testing_support::CopyToHost(batch.field(f), batch.device());
      const size_t bytes = expected[f].size();
      ASSERT_EQ(host.size(), bytes * static_cast<size_t>(batch.size()));
      ASSERT_EQ(0,
                std::memcmp(host.data() + p * bytes, expected[f].data(), bytes))
          << "batch " << batch.index() << " sample " << p << " (index " << index
          << ") field " << f;
    }
  }
}

// Returns the next batch, failing the test on an error or the end of epoch.
std::optional<DeviceBatch> NextBatch(Loader& loader) {
  absl::StatusOr<std::optional<DeviceBatch>> next = loader.Next();
  EXPECT_TRUE(next.ok()) << next.status();
  if (!next.ok()) return std::nullopt;
  EXPECT_TRUE(next->has_value()) << "unexpected end of epoch";
  return std::move(*next);
}

std::vector<int64_t> Range(int64_t begin, int64_t end) {
  std::vector<int64_t> out;
  for (int64_t i = begin; i < end; ++i) out.push_back(i);
  return out;
}

class LoaderFaultsTest : public ::testing::TestWithParam<int> {
 protected:
  int workers() const { return GetParam(); }
};

INSTANTIATE_TEST_SUITE_P(Workers, LoaderFaultsTest, ::testing::Values(0, 1, 8),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return absl::StrCat("Workers", info.param);
                         });

TEST_P(LoaderFaultsTest,
       ReadErrorReachesConsumerNamingIndexBatchEpochAndMessage) {
  Watchdog watchdog("ReadError", HangLimit());
  auto dataset = std::make_shared<PatternDataset>(100);
  dataset->set_hook([](int64_t index) {
    if (index == 37) return absl::DataLossError("disk sector 9 unreadable");
    return absl::OkStatus();
  });
  absl::StatusOr<Loader> loader = LoaderBuilder(dataset)
                                      .batch_size(10)
                                      .num_workers(workers())
                                      .device(Device::Host())
                                      .Build();
  ASSERT_TRUE(loader.ok()) << loader.status();
  // Batches before the failing one arrive intact.
  for (int64_t b = 0; b < 3; ++b) {
    std::optional<DeviceBatch> batch = NextBatch(*loader);
    ASSERT_TRUE(batch.has_value());
    EXPECT_EQ(batch->index(), b);
    EXPECT_THAT(std::vector<int64_t>(batch->sample_indices().begin(),
                                     batch->sample_indices().end()),
                ::testing::ElementsAreArray(Range(b * 10, b * 10 + 10)));
    ExpectBitExact(*dataset, *batch);
  }
  absl::StatusOr<std::optional<DeviceBatch>> failed = loader->Next();
  ASSERT_FALSE(failed.ok()) << "batch 3 (index 37 fails) was delivered";
  EXPECT_EQ(failed.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(
      std::string(failed.status().message()),
      AllOf(HasSubstr("index 37"), HasSubstr("batch 3"), HasSubstr("epoch 0"),
            HasSubstr("disk sector 9 unreadable")));
  // kStop: the error is sticky.
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<std::optional<DeviceBatch>> again = loader->Next();
    ASSERT_FALSE(again.ok());
    EXPECT_EQ(again.status(), failed.status());
  }
  loader->Shutdown();
  loader->Shutdown();  // idempotent
}

TEST_P(LoaderFaultsTest, ReadThrowingIsInternalNamingIndexAndWhat) {
  Watchdog watchdog("ReadThrows", HangLimit());
  auto dataset = std::make_shared<PatternDataset>(100);
  dataset->set_hook([](int64_t index) -> absl::Status {
    if (index == 37) throw std::runtime_error("bad jpeg header");
    return absl::OkStatus();
  });
  absl::StatusOr<Loader> loader = LoaderBuilder(dataset)
                                      .batch_size(10)
                                      .num_workers(workers())
                                      .device(Device::Host())
                                      .Build();
  ASSERT_TRUE(loader.ok()) << loader.status();
  for (int64_t b = 0; b < 3; ++b) {
    std::optional<DeviceBatch> batch = NextBatch(*loader);
    ASSERT_TRUE(batch.has_value());
    ExpectBitExact(*dataset, *batch);
  }
  absl::StatusOr<std::optional<DeviceBatch>> failed = loader->Next();
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(std::string(failed.status().message()),
              AllOf(HasSubstr("index 37"), HasSubstr("batch 3"),
                    HasSubstr("epoch 0"), HasSubstr("bad jpeg header")));
  absl::StatusOr<std::optional<DeviceBatch>> again = loader->Next();
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.status(), failed.status());
  // Destruction (not Shutdown) joins everything.
}

TEST_P(LoaderFaultsTest, ReadErrorInASecondEpochNamesThatEpoch) {
  Watchdog watchdog("SecondEpochError", HangLimit());
  auto dataset = std::make_shared<PatternDataset>(100);
  auto reads_of_37 = std::make_shared<std::atomic<int>>(0);
  dataset->set_hook([reads_of_37](int64_t index) {
    if (index == 37 && reads_of_37->fetch_add(1) == 1) {
      return absl::UnavailableError("server went away");
    }
    return absl::OkStatus();
  });
  absl::StatusOr<Loader> loader = LoaderBuilder(dataset)
                                      .batch_size(10)
                                      .shuffle(4)
                                      .num_workers(workers())
                                      .device(Device::Host())
                                      .Build();
  ASSERT_TRUE(loader.ok()) << loader.status();
  const DrainedEpoch epoch0 = DrainEpoch(*loader);
  ASSERT_TRUE(epoch0.status.ok()) << epoch0.status;
  EXPECT_EQ(epoch0.samples(), 100);
  const absl::Status error = DrainEpoch(*loader).status;
  ASSERT_FALSE(error.ok()) << "epoch 1 ended without the error";
  EXPECT_EQ(error.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(error.message()),
              AllOf(HasSubstr("index 37"), HasSubstr("epoch 1"),
                    HasSubstr("server went away")));
}

// Regression (Workers0): with num_workers = 0 a batch whose every sample
// is skipped is recycled without reaching the transfer stage
// (Producer::Deliver); LoaderCore::Next() used to produce just that one
// inline batch and then wait in TransferStage::Next() for a delivery that
// never came: a hang without a timeout (here the 30 s timeout turns it into
// DeadlineExceeded at batch 5).
TEST_P(LoaderFaultsTest, SkipSampleLeavesFailedSamplesOutAndCountsThem) {
  Watchdog watchdog("SkipSample", HangLimit());
  auto dataset = std::make_shared<PatternDataset>(100);
  // Index 3 and 37, 38 fail, batch 5 (50..59) fails whole, 99 throws.
  const std::set<int64_t> failing = {3,  37, 38, 50, 51, 52, 53,
                                     54, 55, 56, 57, 58, 59, 99};
  dataset->set_hook([&failing](int64_t index) -> absl::Status {
    if (index == 99) throw std::runtime_error("corrupt sample 99");
    if (failing.count(index) > 0) return absl::DataLossError("bad sample");
    return absl::OkStatus();
  });
  absl::StatusOr<Loader> loader =
      LoaderBuilder(dataset)
          .batch_size(10)
          .num_workers(workers())
          .on_error(ErrorPolicy::kSkipSample)
          // Turns a hang into a failure (see
          // the note above).
          .timeout(workers() > 0 ? absl::Seconds(30) : absl::InfiniteDuration())
          .device(Device::Host())
          .Build();
  ASSERT_TRUE(loader.ok()) << loader.status();
  std::vector<int64_t> expected;
  for (int64_t i = 0; i < 100; ++i) {
    if (failing.count(i) == 0) expected.push_back(i);
  }
  for (int64_t epoch = 0; epoch < 2; ++epoch) {
    const DrainedEpoch drained =
        DrainEpoch(*loader, {.on_batch = [&](const DeviceBatch& batch) {
          ExpectBitExact(*dataset, batch);
          ASSERT_EQ(static_cast<int64_t>(batch.sample_indices().size()),
                    batch.size());
          ASSERT_EQ(batch.field(0).shape[0], batch.size());
        }});
    ASSERT_TRUE(drained.status.ok()) << drained.status;
    std::vector<int64_t> batch_indices;
    std::vector<int64_t> batch_sizes;
    for (const HostBatch& batch : drained.batches) {
      batch_indices.push_back(batch.index);
      batch_sizes.push_back(batch.size);
    }
    // Every other index exactly once, in order; failed ones never.
    EXPECT_EQ(drained.indices(), expected) << "epoch " << epoch;
    EXPECT_EQ(batch_indices, (std::vector<int64_t>{0, 1, 2, 3, 4, 6, 7, 8, 9}));
    EXPECT_EQ(batch_sizes,
              (std::vector<int64_t>{9, 10, 10, 8, 10, 10, 10, 10, 9}));
    const LoaderStats stats = loader->stats();
    // samples_skipped is counted when the sample is read, so it may already
    // include failures of the next epoch read ahead (up to all of them).
    const int64_t per_epoch = static_cast<int64_t>(failing.size());
    EXPECT_GE(stats.samples_skipped, per_epoch * (epoch + 1));
    EXPECT_LE(stats.samples_skipped, per_epoch * (epoch + 2));
    if (workers() == 0) {  // inline: nothing is read ahead
      EXPECT_EQ(stats.samples_skipped, per_epoch * (epoch + 1));
    }
    EXPECT_EQ(stats.samples_delivered,
              static_cast<int64_t>(expected.size()) * (epoch + 1));
    EXPECT_EQ(stats.epochs_completed, epoch + 1);
  }
}

TEST_P(LoaderFaultsTest, ShutdownThenNextIsCancelled) {
  Watchdog watchdog("ShutdownThenNext", HangLimit());
  auto dataset = std::make_shared<PatternDataset>(100);
  absl::StatusOr<Loader> loader = LoaderBuilder(dataset)
                                      .batch_size(10)
                                      .num_workers(workers())
                                      .device(Device::Host())
                                      .Build();
  ASSERT_TRUE(loader.ok()) << loader.status();
  ASSERT_TRUE(NextBatch(*loader).has_value());
  loader->Shutdown();
  absl::StatusOr<std::optional<DeviceBatch>> next = loader->Next();
  ASSERT_FALSE(next.ok());
  EXPECT_EQ(next.status().code(), absl::StatusCode::kCancelled);
  loader->Shutdown();
}

// Holding every device buffer and asking for more is a usage error reported
// at once, not a hang; releasing one lets the loader go on.
TEST_P(LoaderFaultsTest, HoldingEveryDeviceBufferIsFailedPreconditionNotAHang) {
  Watchdog watchdog("AllBuffersHeld", HangLimit());
  auto dataset = std::make_shared<PatternDataset>(100);
  absl::StatusOr<Loader> loader = LoaderBuilder(dataset)
                                      .batch_size(10)
                                      .num_workers(workers())
                                      .device_buffers(2)
                                      .device(Device::Host())
                                      .Build();
  ASSERT_TRUE(loader.ok()) << loader.status();
  std::optional<DeviceBatch> a = NextBatch(*loader);
  std::optional<DeviceBatch> b = NextBatch(*loader);
  ASSERT_TRUE(a.has_value() && b.has_value());
  for (int i = 0; i < 2; ++i) {
    absl::StatusOr<std::optional<DeviceBatch>> blocked = loader->Next();
    ASSERT_FALSE(blocked.ok()) << "a third batch with 2 device buffers held";
    EXPECT_EQ(blocked.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(std::string(blocked.status().message()),
                AllOf(HasSubstr("2 device buffers"), HasSubstr("release")));
  }
  ExpectBitExact(*dataset, *a);
  ExpectBitExact(*dataset, *b);
  ASSERT_TRUE(a->Release().ok());
  std::optional<DeviceBatch> c = NextBatch(*loader);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->index(), 2);
  ExpectBitExact(*dataset, *c);
  ExpectBitExact(*dataset, *b);  // not overwritten by c
  // The rest of the epoch is intact.
  b.reset();
  c.reset();
  const DrainedEpoch rest =
      DrainEpoch(*loader, {.on_batch = [&](const DeviceBatch& batch) {
        ExpectBitExact(*dataset, batch);
      }});
  ASSERT_TRUE(rest.status.ok()) << rest.status;
  EXPECT_EQ(rest.batches.size(), 7u);
}

// A consumer that keeps the previous batch while asking for the next one
// (double buffering) holds device_buffers - 1 buffers: that is legal and
// must never be refused.
// Regression, a race (hence many small batches and a varying pause before
// each Next()): it used to fail in about 1 run in 6 per worker count when
// TransferStage::Copy() counted the new lease as held before CopyLoop()
// pushed it to ready_: a Next() that looked in between saw "all device
// buffers held" with ready_ empty and returned FailedPrecondition although
// the consumer held only one of two.
TEST_P(LoaderFaultsTest, HoldingThePreviousBatchWithTwoBuffersNeverFails) {
  Watchdog watchdog("DoubleBuffering", HangLimit());
  auto dataset = std::make_shared<PatternDataset>(64);
  absl::StatusOr<Loader> loader = LoaderBuilder(dataset)
                                      .batch_size(2)
                                      .shuffle(1)
                                      .num_workers(workers())
                                      .device_buffers(2)
                                      .device(Device::Host())
                                      .Build();
  ASSERT_TRUE(loader.ok()) << loader.status();
  const int epochs = testing_support::kSanitized ? 50 : 500;
  int64_t batches = 0;
  for (int epoch = 0; epoch < epochs; ++epoch) {
    std::optional<DeviceBatch> previous;
    while (true) {
      absl::StatusOr<std::optional<DeviceBatch>> next = loader->Next();
      ASSERT_TRUE(next.ok()) << "epoch " << epoch << " after " << batches
                             << " batches, holding one: " << next.status();
      if (!next->has_value()) break;
      ASSERT_TRUE((*next)->WaitOnHost().ok());
      previous = std::move(*next);  // releases the one held before
      ++batches;
      // The release lets the copy of the next batch start; vary when Next()
      // looks (0..255 µs later) so it sometimes lands mid-copy.
      const absl::Time until =
          absl::Now() + absl::Microseconds((batches * 37) % 256);
      while (absl::Now() < until) {
      }
    }
  }
  EXPECT_EQ(batches, int64_t{32} * epochs);
}

// The worker_init contract (LoaderOptions::worker_init), clause by clause.
// Initialisation is tracked per thread with a generation number: a thread
// counts as initialised for the current producer start when its last
// successful worker_init happened in the current generation.

// worker_init runs on every thread before it reads, with a number in
// 0..num_workers-1. (A thread may be called again under another number
// when oneTBB moves it to another slot of the arena.)
TEST(LoaderWorkerInit, RunsOnEveryThreadBeforeItReadsWithANumberInRange) {
  Watchdog watchdog("WorkerInit", HangLimit());
  constexpr int kWorkers = 4;
  // std::mutex, not absl::Mutex: the system abseil is not built with
  // ThreadSanitizer, so TSan cannot see absl::Mutex's ordering.
  std::mutex mu;
  std::map<std::thread::id, int> number_of;  // each thread's current number
  std::set<std::pair<std::thread::id, int>> calls;
  std::atomic<int> reads_on_uninitialized{0};
  auto dataset = std::make_shared<PatternDataset>(200);
  dataset->set_hook([&](int64_t) {
    std::lock_guard<std::mutex> lock(mu);
    if (number_of.count(std::this_thread::get_id()) == 0) {
      reads_on_uninitialized.fetch_add(1);
    }
    return absl::OkStatus();
  });
  {
    absl::StatusOr<Loader> loader =
        LoaderBuilder(dataset)
            .batch_size(5)
            .num_workers(kWorkers)
            .worker_init([&](int worker) {
              std::lock_guard<std::mutex> lock(mu);
              number_of[std::this_thread::get_id()] = worker;
              calls.insert({std::this_thread::get_id(), worker});
              return absl::OkStatus();
            })
            .device(Device::Host())
            .Build();
    ASSERT_TRUE(loader.ok()) << loader.status();
    for (int epoch = 0; epoch < 3; ++epoch) {
      const DrainedEpoch drained = DrainEpoch(*loader);
      ASSERT_TRUE(drained.status.ok()) << drained.status;
      EXPECT_EQ(drained.samples(), 200);
    }
  }
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_GE(calls.size(), 1u);
  for (const auto& [thread, number] : calls) {
    EXPECT_GE(number, 0);
    EXPECT_LT(number, kWorkers);
  }
  EXPECT_EQ(reads_on_uninitialized.load(), 0);
}

namespace worker_init_test {
constexpr int kLoaders = 3;
constexpr int kMaxWorkers = 8;
// This thread's number for each loader of the test, or -1.
thread_local int number_for[kLoaders] = {-1, -1, -1};
}  // namespace worker_init_test

// Regression: numbers were handed out once per thread id, counting up; with
// oneTBB sharing its threads between loaders more threads than num_workers
// visited a loader over time and got numbers >= num_workers. Numbers are
// slots: always in range, and no two threads read for one loader under the
// same number at the same time.
TEST(LoaderWorkerInit, NumbersStayInRangeAndDistinctWithLoadersSharingThreads) {
  using namespace worker_init_test;
  Watchdog watchdog("WorkerInitShared", HangLimit());
  const int workers[kLoaders] = {4, 4, 2};
  std::atomic<int> out_of_range{0};
  std::atomic<int> collisions{0};
  std::atomic<int> uninitialized{0};
  std::vector<std::unique_ptr<std::atomic<int>[]>> active;
  std::vector<std::shared_ptr<PatternDataset>> datasets;
  std::vector<Loader> loaders;
  for (int l = 0; l < kLoaders; ++l) {
    active.emplace_back(new std::atomic<int>[kMaxWorkers]());
    std::atomic<int>* busy = active.back().get();
    auto dataset = std::make_shared<PatternDataset>(64);
    dataset->set_hook([l, busy, &collisions, &uninitialized](int64_t) {
      const int number = number_for[l];
      if (number < 0 || number >= kMaxWorkers) {
        uninitialized.fetch_add(1);
        return absl::OkStatus();
      }
      if (busy[number].fetch_add(1) != 0) collisions.fetch_add(1);
      absl::SleepFor(absl::Microseconds(20));
      busy[number].fetch_sub(1);
      return absl::OkStatus();
    });
    absl::StatusOr<Loader> loader =
        LoaderBuilder(dataset)
            .batch_size(4)
            .num_workers(workers[l])
            .worker_init([l, limit = workers[l], &out_of_range](int worker) {
              if (worker < 0 || worker >= limit) out_of_range.fetch_add(1);
              number_for[l] = worker;
              return absl::OkStatus();
            })
            .device(Device::Host())
            .Build();
    ASSERT_TRUE(loader.ok()) << loader.status();
    datasets.push_back(std::move(dataset));
    loaders.push_back(*std::move(loader));
  }
  const int epochs = testing_support::kSanitized ? 3 : 10;
  for (int epoch = 0; epoch < epochs; ++epoch) {
    bool open[kLoaders] = {true, true, true};
    while (open[0] || open[1] || open[2]) {
      for (int l = 0; l < kLoaders; ++l) {  // one batch of each in turn
        if (!open[l]) continue;
        absl::StatusOr<std::optional<DeviceBatch>> next = loaders[l].Next();
        ASSERT_TRUE(next.ok()) << next.status();
        open[l] = next->has_value();
      }
    }
  }
  for (Loader& loader : loaders) loader.Shutdown();
  EXPECT_EQ(out_of_range.load(), 0);
  EXPECT_EQ(collisions.load(), 0);
  EXPECT_EQ(uninitialized.load(), 0);
}

// Regression: with num_workers = 0 worker_init was never called.
TEST(LoaderWorkerInit,
     NumWorkersZeroCallsItWithWorkerZeroOnTheConsumersThread) {
  Watchdog watchdog("WorkerInitInline", HangLimit());
  std::mutex mu;
  std::vector<std::pair<std::thread::id, int>> calls;
  std::set<std::thread::id> initialized;
  std::atomic<int> reads_on_uninitialized{0};
  auto dataset = std::make_shared<PatternDataset>(30);
  dataset->set_hook([&](int64_t) {
    std::lock_guard<std::mutex> lock(mu);
    if (initialized.count(std::this_thread::get_id()) == 0) {
      reads_on_uninitialized.fetch_add(1);
    }
    return absl::OkStatus();
  });
  absl::StatusOr<Loader> loader =
      LoaderBuilder(dataset)
          .batch_size(10)
          .num_workers(0)
          .worker_init([&](int worker) {
            std::lock_guard<std::mutex> lock(mu);
            calls.push_back({std::this_thread::get_id(), worker});
            initialized.insert(std::this_thread::get_id());
            return absl::OkStatus();
          })
          .device(Device::Host())
          .Build();
  ASSERT_TRUE(loader.ok()) << loader.status();
  for (int epoch = 0; epoch < 2; ++epoch) {
    const DrainedEpoch drained = DrainEpoch(*loader);
    ASSERT_TRUE(drained.status.ok()) << drained.status;
  }
  {
    std::lock_guard<std::mutex> lock(mu);
    ASSERT_EQ(calls.size(), 1u) << "once, before the first read";
    EXPECT_EQ(calls[0].first, std::this_thread::get_id());
    EXPECT_EQ(calls[0].second, 0);
    initialized.clear();  // from here on only calls made below count
  }
  // A consumer on another thread (one after the other, as std::thread ids
  // are often reused) is initialised on that thread before it reads.
  for (int t = 0; t < 2; ++t) {
    std::thread consumer([&] {
      absl::StatusOr<std::optional<DeviceBatch>> next = loader->Next();
      EXPECT_TRUE(next.ok()) << next.status();
    });
    consumer.join();
    std::lock_guard<std::mutex> lock(mu);
    initialized.clear();
  }
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_EQ(calls.size(), 3u);
  for (const auto& [thread, number] : calls) EXPECT_EQ(number, 0);
  EXPECT_EQ(reads_on_uninitialized.load(), 0);
}

namespace worker_init_test {
std::atomic<int> generation{0};
thread_local int initialized_in = -1;  // generation of the last success
}  // namespace worker_init_test

// Regression: the thread whose worker_init failed was remembered as
// initialised, so after StartEpoch() it read without ever being initialised
// (and with num_workers = 0 worker_init was never called at all).
TEST(LoaderWorkerInit, AFailedInitIsRetriedAfterStartEpoch) {
  using namespace worker_init_test;
  for (int workers : {0, 1}) {
    Watchdog watchdog(absl::StrCat("WorkerInitRetry", workers), HangLimit());
    generation.fetch_add(1);
    auto calls = std::make_shared<std::atomic<int>>(0);
    auto reads_on_uninitialized = std::make_shared<std::atomic<int>>(0);
    auto dataset = std::make_shared<PatternDataset>(40);
    dataset->set_hook([reads_on_uninitialized](int64_t) {
      if (initialized_in != generation.load())
        reads_on_uninitialized->fetch_add(1);
      return absl::OkStatus();
    });
    absl::StatusOr<Loader> loader =
        LoaderBuilder(dataset)
            .batch_size(10)
            .num_workers(workers)
            .worker_init([calls](int worker) {
              if (calls->fetch_add(1) == 0) {
                return absl::UnavailableError("GPU busy, try again");
              }
              EXPECT_EQ(worker, 0);
              initialized_in = generation.load();
              return absl::OkStatus();
            })
            .device(Device::Host())
            .Build();
    ASSERT_TRUE(loader.ok()) << loader.status();
    absl::StatusOr<std::optional<DeviceBatch>> failed = loader->Next();
    ASSERT_FALSE(failed.ok()) << "workers " << workers;
    EXPECT_EQ(failed.status().code(), absl::StatusCode::kUnavailable);
    EXPECT_THAT(std::string(failed.status().message()),
                AllOf(HasSubstr("worker_init failed for worker 0"),
                      HasSubstr("GPU busy")));
    // A new generation: only inits from the restart on count.
    generation.fetch_add(1);
    ASSERT_TRUE(loader->StartEpoch(0).ok());
    const DrainedEpoch drained = DrainEpoch(*loader);
    ASSERT_TRUE(drained.status.ok())
        << "workers " << workers << ": " << drained.status;
    EXPECT_EQ(drained.samples(), 40);
    EXPECT_GE(calls->load(), 2) << "workers " << workers;
    EXPECT_EQ(reads_on_uninitialized->load(), 0) << "workers " << workers;
  }
}

// Regression: initialised threads were remembered by id forever, so after a
// restart no thread was initialised again. Every thread that reads after
// StartEpoch() was initialised after it was called.
TEST(LoaderWorkerInit, StartEpochInitialisesEveryThreadAgain) {
  Watchdog watchdog("WorkerInitRestart", HangLimit());
  constexpr int kWorkers = 3;
  std::mutex mu;
  bool restarted = false;
  std::set<std::thread::id> initialized_after;
  std::set<std::thread::id> read_after;
  std::vector<int> numbers;
  auto dataset = std::make_shared<PatternDataset>(20);
  dataset->set_hook([&](int64_t) {
    std::lock_guard<std::mutex> lock(mu);
    if (restarted) read_after.insert(std::this_thread::get_id());
    return absl::OkStatus();
  });
  absl::StatusOr<Loader> loader =
      LoaderBuilder(dataset)
          .batch_size(10)
          .num_workers(kWorkers)
          .prefetch(4)
          .worker_init([&](int worker) {
            std::lock_guard<std::mutex> lock(mu);
            if (restarted) initialized_after.insert(std::this_thread::get_id());
            numbers.push_back(worker);
            return absl::OkStatus();
          })
          .device(Device::Host())
          .Build();
  ASSERT_TRUE(loader.ok()) << loader.status();
  // Epochs 0 and 1 (2 batches each) fill the 4 slots, then the producer
  // waits for the consumer: nothing reads while the restart is set up.
  ASSERT_TRUE(
      testing_support::Eventually([&] { return dataset->reads() == 40; }));
  {
    std::lock_guard<std::mutex> lock(mu);
    restarted = true;
  }
  ASSERT_TRUE(loader->StartEpoch(5).ok());
  const DrainedEpoch drained = DrainEpoch(*loader);
  ASSERT_TRUE(drained.status.ok()) << drained.status;
  EXPECT_EQ(drained.samples(), 20);
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_FALSE(read_after.empty());
  for (const std::thread::id& thread : read_after) {
    EXPECT_EQ(initialized_after.count(thread), 1u)
        << "a thread read after the restart without worker_init";
  }
  for (int n : numbers) {
    EXPECT_GE(n, 0);
    EXPECT_LT(n, kWorkers);
  }
}

TEST(LoaderWorkerInit, ThrowingANonStandardExceptionIsAnErrorNamingTheWorker) {
  Watchdog watchdog("WorkerInitThrows", HangLimit());
  auto dataset = std::make_shared<PatternDataset>(40);
  absl::StatusOr<Loader> loader =
      LoaderBuilder(dataset)
          .batch_size(10)
          .num_workers(2)
          .worker_init([](int) -> absl::Status { throw 3; })
          .device(Device::Host())
          .Build();
  ASSERT_TRUE(loader.ok()) << loader.status();
  absl::StatusOr<std::optional<DeviceBatch>> next = loader->Next();
  ASSERT_FALSE(next.ok());
  EXPECT_EQ(next.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(std::string(next.status().message()),
              AllOf(HasSubstr("worker_init failed for worker"),
                    HasSubstr("non-standard exception")));
}

TEST(LoaderWorkerInit, ErrorIsReportedThroughNextNamingTheWorker) {
  Watchdog watchdog("WorkerInitError", HangLimit());
  auto dataset = std::make_shared<PatternDataset>(100);
  absl::StatusOr<Loader> loader =
      LoaderBuilder(dataset)
          .batch_size(10)
          .num_workers(4)
          .worker_init([](int worker) {
            return absl::UnavailableError(
                absl::StrCat("no GPU context for worker ", worker));
          })
          .device(Device::Host())
          .Build();
  ASSERT_TRUE(loader.ok()) << loader.status();
  absl::StatusOr<std::optional<DeviceBatch>> next = loader->Next();
  ASSERT_FALSE(next.ok())
      << "a batch was delivered although worker_init failed";
  EXPECT_EQ(next.status().code(), absl::StatusCode::kUnavailable);
  const std::string message(next.status().message());
  const std::string prefix = "worker_init failed for worker ";
  const size_t at = message.find(prefix);
  ASSERT_NE(at, std::string::npos) << message;
  size_t end = at + prefix.size();
  while (end < message.size() && std::isdigit(message[end])) ++end;
  int worker = -1;
  ASSERT_TRUE(absl::SimpleAtoi(
      message.substr(at + prefix.size(), end - at - prefix.size()), &worker))
      << message;
  EXPECT_THAT(message,
              HasSubstr(absl::StrCat("no GPU context for worker ", worker)));
  absl::StatusOr<std::optional<DeviceBatch>> again = loader->Next();
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.status(), next.status());
}

class LoaderTimeoutTest : public ::testing::TestWithParam<int> {};

INSTANTIATE_TEST_SUITE_P(Workers, LoaderTimeoutTest, ::testing::Values(1, 8),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return absl::StrCat("Workers", info.param);
                         });

// A dataset whose Read of index 0 waits for `release` (the first time).
std::shared_ptr<PatternDataset> BlockingDataset(
    ::pinwheel::testing_support::Notification* release) {
  auto dataset = std::make_shared<PatternDataset>(100);
  auto first = std::make_shared<std::atomic<bool>>(true);
  dataset->set_hook([release, first](int64_t index) {
    if (index == 0 && first->exchange(false)) release->WaitForNotification();
    return absl::OkStatus();
  });
  return dataset;
}

TEST_P(LoaderTimeoutTest, StuckReadIsDeadlineExceededNamingTheBatchThenGoesOn) {
  Watchdog watchdog("TimeoutContinue", HangLimit());
  ::pinwheel::testing_support::Notification release;
  std::shared_ptr<PatternDataset> dataset = BlockingDataset(&release);
  absl::StatusOr<Loader> loader = LoaderBuilder(dataset)
                                      .batch_size(10)
                                      .num_workers(GetParam())
                                      .timeout(absl::Milliseconds(200))
                                      .device(Device::Host())
                                      .Build();
  ASSERT_TRUE(loader.ok()) << loader.status();
  for (int i = 0; i < 2; ++i) {  // not sticky: the read is merely slow
    absl::StatusOr<std::optional<DeviceBatch>> next = loader->Next();
    ASSERT_FALSE(next.ok()) << "batch 0 delivered while its Read is blocked";
    EXPECT_EQ(next.status().code(), absl::StatusCode::kDeadlineExceeded);
    EXPECT_THAT(
        std::string(next.status().message()),
        AllOf(HasSubstr("batch 0"), HasSubstr("epoch 0"), HasSubstr("200ms")));
  }
  release.Notify();
  std::vector<int64_t> delivered;
  const DrainedEpoch drained =
      DrainEpoch(*loader, {.on_batch = [&](const DeviceBatch& batch) {
        EXPECT_EQ(batch.index(), static_cast<int64_t>(delivered.size()) / 10);
        ExpectBitExact(*dataset, batch);
        delivered.insert(delivered.end(), batch.sample_indices().begin(),
                         batch.sample_indices().end());
      }});
  ASSERT_TRUE(drained.status.ok()) << drained.status;
  EXPECT_EQ(delivered, Range(0, 100));
}

TEST_P(LoaderTimeoutTest,
       StuckReadTimesOutThenLoaderIsDestroyedWithoutHanging) {
  Watchdog watchdog("TimeoutDestroy", HangLimit());
  ::pinwheel::testing_support::Notification release;
  std::shared_ptr<PatternDataset> dataset = BlockingDataset(&release);
  {
    absl::StatusOr<Loader> loader = LoaderBuilder(dataset)
                                        .batch_size(10)
                                        .num_workers(GetParam())
                                        .timeout(absl::Milliseconds(200))
                                        .device(Device::Host())
                                        .Build();
    ASSERT_TRUE(loader.ok()) << loader.status();
    absl::StatusOr<std::optional<DeviceBatch>> next = loader->Next();
    ASSERT_FALSE(next.ok());
    EXPECT_EQ(next.status().code(), absl::StatusCode::kDeadlineExceeded);
    release.Notify();
  }  // destroyed mid-epoch
}

TEST_P(LoaderTimeoutTest, WithoutATimeoutNextWaitsForTheStuckRead) {
  Watchdog watchdog("NoTimeout", HangLimit());
  ::pinwheel::testing_support::Notification release;
  std::shared_ptr<PatternDataset> dataset = BlockingDataset(&release);
  absl::StatusOr<Loader> loader = LoaderBuilder(dataset)
                                      .batch_size(10)
                                      .num_workers(GetParam())
                                      .device(Device::Host())
                                      .Build();
  ASSERT_TRUE(loader.ok()) << loader.status();
  std::thread releaser([&release] {
    absl::SleepFor(absl::Milliseconds(100));
    release.Notify();
  });
  absl::StatusOr<std::optional<DeviceBatch>> next = loader->Next();
  releaser.join();
  ASSERT_TRUE(next.ok()) << next.status();
  ASSERT_TRUE(next->has_value());
  EXPECT_EQ((*next)->index(), 0);
  ExpectBitExact(*dataset, **next);
}

// With num_workers = 0 the Read runs inside Next() on the consumer's thread,
// which no timeout can interrupt: Build() rejects the combination (the test
// also accepts a loader that honours the timeout, should that ever change).
TEST(LoaderTimeout, TimeoutWithInlineReadsIsRejectedOrHonoured) {
  Watchdog watchdog("InlineTimeout", HangLimit());
  ::pinwheel::testing_support::Notification release;
  std::shared_ptr<PatternDataset> dataset = BlockingDataset(&release);
  absl::StatusOr<Loader> loader = LoaderBuilder(dataset)
                                      .batch_size(10)
                                      .num_workers(0)
                                      .timeout(absl::Milliseconds(200))
                                      .device(Device::Host())
                                      .Build();
  if (!loader.ok()) {
    EXPECT_EQ(loader.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(loader.status().message()),
                AllOf(HasSubstr("timeout"), HasSubstr("num_workers")));
    return;
  }
  // Unblocks the Read long after the timeout, so the test ends either way.
  std::thread releaser([&release] {
    absl::SleepFor(absl::Seconds(3));
    release.Notify();
  });
  absl::StatusOr<std::optional<DeviceBatch>> next = loader->Next();
  const bool released_before_return = release.HasBeenNotified();
  releaser.join();
  EXPECT_FALSE(released_before_return)
      << "Next() waited for the Read instead of timing out";
  EXPECT_EQ(next.status().code(), absl::StatusCode::kDeadlineExceeded)
      << next.status();
}

// Destroying the loader mid-epoch, while the consumer holds two batches and
// others are being read and copied: no hang, and the held batches stay valid
// and bit-exact until released.
TEST(LoaderShutdown, HeldBatchesStayValidAfterTheLoaderIsDestroyed) {
  Watchdog watchdog("HeldAfterDestroy", HangLimit());
  auto dataset = std::make_shared<PatternDataset>(1000);
  dataset->set_hook([](int64_t) {
    absl::SleepFor(absl::Microseconds(100));  // keep reads in flight
    return absl::OkStatus();
  });
  std::optional<DeviceBatch> first;
  std::optional<DeviceBatch> second;
  std::vector<const void*> data;
  {
    absl::StatusOr<Loader> loader = LoaderBuilder(dataset)
                                        .batch_size(10)
                                        .shuffle(3)
                                        .num_workers(8)
                                        .prefetch(8)
                                        .device_buffers(4)
                                        .device(Device::Host())
                                        .Build();
    ASSERT_TRUE(loader.ok()) << loader.status();
    first = NextBatch(*loader);
    second = NextBatch(*loader);
    ASSERT_TRUE(first.has_value() && second.has_value());
    data = {first->field(0).data, second->field(0).data};
  }  // the loader is gone; reads and copies were in flight
  ASSERT_FALSE(first->released());
  EXPECT_EQ(first->field(0).data, data[0]);
  EXPECT_EQ(second->field(0).data, data[1]);
  EXPECT_EQ(first->index(), 0);
  EXPECT_EQ(second->index(), 1);
  ExpectBitExact(*dataset, *first);
  ExpectBitExact(*dataset, *second);
  DLManagedTensor* view = *second->ToDLPack(2);
  const std::vector<int64_t> second_indices(second->sample_indices().begin(),
                                            second->sample_indices().end());
  EXPECT_TRUE(first->Release().ok());
  EXPECT_TRUE(first->Release().ok());  // idempotent
  EXPECT_TRUE(first->released());
  second.reset();  // released by its destructor
  // The view outlives batch and loader; its data is still the batch's.
  ASSERT_EQ(view->dl_tensor.shape[0], 10);
  for (size_t p = 0; p < second_indices.size(); ++p) {
    const std::vector<std::byte> want = dataset->Expected(second_indices[p])[2];
    EXPECT_EQ(0,
              std::memcmp(static_cast<const std::byte*>(view->dl_tensor.data) +
                              p * want.size(),
                          want.data(), want.size()))
        << "sample " << p;
  }
  view->deleter(view);
}

TEST(LoaderShutdown, CreatingAndDestroyingFiftyLoadersWithEightWorkers) {
  Watchdog watchdog("FiftyLoaders", HangLimit());
  auto dataset = std::make_shared<PatternDataset>(500);
  for (int i = 0; i < 50; ++i) {
    absl::StatusOr<Loader> loader = LoaderBuilder(dataset)
                                        .batch_size(10)
                                        .shuffle(static_cast<uint64_t>(i))
                                        .num_workers(8)
                                        .device(Device::Host())
                                        .Build();
    ASSERT_TRUE(loader.ok()) << "loader " << i << ": " << loader.status();
    // 0, 1 or 2 batches read, the last one still held at destruction.
    std::optional<DeviceBatch> held;
    for (int b = 0; b < i % 3; ++b) {
      held = NextBatch(*loader);
      ASSERT_TRUE(held.has_value());
      ExpectBitExact(*dataset, *held);
    }
    if (i % 2 == 1) loader->Shutdown();
  }
}

// A DLPack view describes the field exactly and keeps its buffer: the
// buffer is not reused while the view is alive, even after the batch is
// released.
TEST(LoaderDLPack, ViewHasTheFieldsDtypeShapeDeviceAndData) {
  Watchdog watchdog("DLPackView", HangLimit());
  auto dataset = std::make_shared<PatternDataset>(100);
  absl::StatusOr<Loader> loader = LoaderBuilder(dataset)
                                      .batch_size(10)
                                      .num_workers(2)
                                      .device(Device::Host())
                                      .Build();
  ASSERT_TRUE(loader.ok()) << loader.status();
  std::optional<DeviceBatch> batch = NextBatch(*loader);
  ASSERT_TRUE(batch.has_value());
  ASSERT_TRUE(batch->WaitOnHost().ok());
  struct Expect {
    uint8_t code;
    uint8_t bits;
    std::vector<int64_t> shape;
  };
  const std::vector<Expect> expect = {
      {kDLUInt, 8, {10, 37}}, {kDLInt, 64, {10}}, {kDLFloat, 32, {10, 5}}};
  for (int f = 0; f < 3; ++f) {
    absl::StatusOr<DLManagedTensor*> view = batch->ToDLPack(f);
    ASSERT_TRUE(view.ok()) << view.status();
    const DLTensor& t = (*view)->dl_tensor;
    EXPECT_EQ(t.dtype.code, expect[f].code) << "field " << f;
    EXPECT_EQ(t.dtype.bits, expect[f].bits) << "field " << f;
    EXPECT_EQ(t.dtype.lanes, 1);
    ASSERT_EQ(t.ndim, static_cast<int32_t>(expect[f].shape.size()));
    EXPECT_EQ(std::vector<int64_t>(t.shape, t.shape + t.ndim), expect[f].shape);
    EXPECT_EQ(t.device.device_type, kDLCPU);
    EXPECT_EQ(t.device.device_id, 0);
    EXPECT_EQ(t.strides, nullptr);
    EXPECT_EQ(t.byte_offset, 0u);
    EXPECT_EQ(t.data, batch->field(f).data);
    const std::vector<std::byte> field =
        testing_support::CopyToHost(batch->field(f), batch->device());
    for (int64_t p = 0; p < 10; ++p) {
      const std::vector<std::byte> want =
          dataset->Expected(batch->sample_indices()[p])[f];
      EXPECT_EQ(0, std::memcmp(
                       static_cast<const std::byte*>(t.data) + p * want.size(),
                       want.data(), want.size()))
          << "field " << f << " sample " << p;
    }
    (*view)->deleter(*view);
  }
  absl::StatusOr<DLManagedTensor*> bad = batch->ToDLPack(3);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kOutOfRange);
  ASSERT_TRUE(batch->Release().ok());
  absl::StatusOr<DLManagedTensor*> released = batch->ToDLPack(0);
  EXPECT_EQ(released.status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(LoaderDLPack, BufferIsNotReusedWhileAViewIsAlive) {
  Watchdog watchdog("DLPackKeepsBuffer", HangLimit());
  auto dataset = std::make_shared<PatternDataset>(100);
  absl::StatusOr<Loader> loader = LoaderBuilder(dataset)
                                      .batch_size(10)
                                      .num_workers(2)
                                      .device_buffers(2)
                                      .device(Device::Host())
                                      .Build();
  ASSERT_TRUE(loader.ok()) << loader.status();
  std::optional<DeviceBatch> a = NextBatch(*loader);
  ASSERT_TRUE(a.has_value());
  ASSERT_TRUE(a->WaitOnHost().ok());
  const std::vector<int64_t> a_indices(a->sample_indices().begin(),
                                       a->sample_indices().end());
  DLManagedTensor* view = *a->ToDLPack(0);
  void* a_data = view->dl_tensor.data;
  ASSERT_TRUE(a->Release().ok());  // the view alone keeps a's buffer
  std::optional<DeviceBatch> b = NextBatch(*loader);
  ASSERT_TRUE(b.has_value());
  EXPECT_NE(b->field(0).data, a_data) << "a's buffer reused under its view";
  // Both buffers are held (one by the view): the loader refuses, no hang.
  absl::StatusOr<std::optional<DeviceBatch>> blocked = loader->Next();
  ASSERT_FALSE(blocked.ok());
  EXPECT_EQ(blocked.status().code(), absl::StatusCode::kFailedPrecondition)
      << blocked.status();
  // The view's bytes are still a's.
  for (size_t p = 0; p < a_indices.size(); ++p) {
    const std::vector<std::byte> want = dataset->Expected(a_indices[p])[0];
    ASSERT_EQ(0, std::memcmp(static_cast<const std::byte*>(a_data) + p * 37,
                             want.data(), 37))
        << "sample " << p;
  }
  view->deleter(view);  // now a's buffer is free
  std::optional<DeviceBatch> c = NextBatch(*loader);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->index(), 2);
  EXPECT_EQ(c->field(0).data, a_data);  // the only free buffer
  ExpectBitExact(*dataset, *b);
  ExpectBitExact(*dataset, *c);
}

}  // namespace
}  // namespace pinwheel
