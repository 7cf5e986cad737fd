// Loader at its edges, on the host backend: epochs that turn out empty at
// run time, user code that throws what is not a std::exception or returns
// nonsense, misuse of a SampleView or of a moved-from Loader, the last
// epoch, a failed StartEpoch(), and Shutdown() in the middle of a slow batch.
// Every case ends in a Status or a documented value: never a crash, a hang,
// a spinning producer or memory that grows (each test runs under a Watchdog
// that aborts on a hang).
#include <atomic>
#include <cstdint>
#include <cstring>
#include <functional>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <limits>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

#include "loader/dataset.h"
#include "loader/iterable_dataset.h"
#include "loader/loader.h"
#include "loader/loader_builder.h"
#include "loader/loader_checkpoint.h"
#include "tests/support/async_acquire.h"
#include "tests/support/drain_epoch.h"
#include "tests/support/notification.h"
#include "tests/support/scripted_streams.h"
#include "tests/support/test_datasets.h"
#include "transfer/device_batch.h"

namespace pinwheel {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using testing_support::DrainedEpoch;
using testing_support::DrainEpoch;
using testing_support::HostBatch;
using testing_support::Notification;
using testing_support::PatternDataset;
using testing_support::ScriptedStreams;
using testing_support::Watchdog;

// Generous bound against hangs only; never a timing assertion.
absl::Duration HangLimit() {
  return testing_support::kSanitized ? absl::Minutes(5) : absl::Minutes(1);
}

// Loader::kMaxEpoch, spelled out.
constexpr int64_t kLastEpoch = int64_t{1} << 62;

std::string MessageOf(const absl::Status& status) {
  return std::string(status.message());
}

// --- Epochs that turn out empty at run time --------------------------------

// Regression: with every shard empty the producer looped over empty epochs
// as fast as it could (one OpenShard per shard per epoch, an end-of-epoch
// marker queued each time: ~40 MiB/s of growth), whatever the consumer did.
TEST(LoaderEmptyEpochs, AllEmptyShardsEndEachEpochOnceWithoutSpinning) {
  Watchdog watchdog("AllEmptyShards", HangLimit());
  auto dataset = ScriptedStreams::EachShard(/*per_shard=*/0);
  absl::StatusOr<Loader> loader = LoaderBuilder(dataset)
                                      .batch_size(4)
                                      .num_workers(2)
                                      .device(Device::Host())
                                      .Build();
  ASSERT_TRUE(loader.ok()) << loader.status();
  for (int64_t epoch = 0; epoch < 5; ++epoch) {
    absl::StatusOr<std::optional<DeviceBatch>> next = loader->Next();
    ASSERT_TRUE(next.ok()) << next.status();
    EXPECT_FALSE(next->has_value()) << "a batch from empty shards";
    EXPECT_EQ(loader->epoch(), epoch + 1);
  }
  // The consumer is away: the producer may finish the epoch after the
  // consumer's (2 shards each) and must then wait, not spin.
  absl::SleepFor(absl::Milliseconds(300));
  const int64_t opens = dataset->opens();
  absl::SleepFor(absl::Milliseconds(300));
  EXPECT_EQ(dataset->opens(), opens)
      << "the producer ran on while no one asked";
  EXPECT_LE(opens, (5 + 2) * 2);
  EXPECT_EQ(loader->stats().epochs_completed, 5);
}

// Regression: the same spin with kSkipSample and every Read failing.
TEST(LoaderEmptyEpochs, EverySampleSkippedEndsEachEpochOnceWithoutSpinning) {
  for (int workers : {0, 2}) {
    Watchdog watchdog(absl::StrCat("AllSkipped", workers), HangLimit());
    auto dataset = std::make_shared<PatternDataset>(20);
    dataset->set_hook([](int64_t) { return absl::DataLossError("bad"); });
    absl::StatusOr<Loader> loader = LoaderBuilder(dataset)
                                        .batch_size(5)
                                        .num_workers(workers)
                                        .on_error(ErrorPolicy::kSkipSample)
                                        .device(Device::Host())
                                        .Build();
    ASSERT_TRUE(loader.ok()) << loader.status();
    for (int64_t epoch = 0; epoch < 3; ++epoch) {
      absl::StatusOr<std::optional<DeviceBatch>> next = loader->Next();
      ASSERT_TRUE(next.ok()) << next.status();
      EXPECT_FALSE(next->has_value()) << "workers " << workers;
    }
    absl::SleepFor(absl::Milliseconds(300));
    const int64_t reads = dataset->reads();
    absl::SleepFor(absl::Milliseconds(300));
    EXPECT_EQ(dataset->reads(), reads) << "workers " << workers;
    EXPECT_LE(reads, (3 + 2) * 20) << "workers " << workers;
    EXPECT_GE(loader->stats().samples_skipped, 3 * 20);
  }
}

// --- User code that throws or returns nonsense -----------------------------

TEST(LoaderUserCode, OpenShardThrowingIsInternalNamingTheShardNotAnAbort) {
  Watchdog watchdog("OpenShardThrows", HangLimit());
  for (bool standard : {true, false}) {
    auto dataset = ScriptedStreams::EachShard(10);
    dataset->set_open(
        [standard](int shard, int,
                   int64_t) -> absl::StatusOr<std::unique_ptr<SampleStream>> {
          if (shard == 1) {
            if (standard) throw std::runtime_error("index file missing");
            throw 42;
          }
          return absl::InternalError("never: shard 1 is opened by rank 1");
        });
    absl::StatusOr<Loader> loader = LoaderBuilder(dataset)
                                        .batch_size(4)
                                        .num_workers(1)
                                        .distributed(1, 2)
                                        .device(Device::Host())
                                        .Build();
    ASSERT_TRUE(loader.ok()) << loader.status();
    absl::StatusOr<std::optional<DeviceBatch>> next = loader->Next();
    ASSERT_FALSE(next.ok());
    EXPECT_EQ(next.status().code(), absl::StatusCode::kInternal);
    EXPECT_THAT(MessageOf(next.status()),
                AllOf(HasSubstr("shard 1 of 2"), HasSubstr("epoch 0"),
                      HasSubstr("OpenShard threw"),
                      HasSubstr(standard ? "index file missing"
                                         : "non-standard exception")));
  }
}

// Regression: a non-std exception from SampleStream::Next escaped the
// worker: std::terminate (and Next() hung until then).
TEST(LoaderUserCode, StreamNextThrowingANonStandardExceptionIsInternal) {
  Watchdog watchdog("StreamNextThrows", HangLimit());
  auto dataset = ScriptedStreams::EachShard(10);
  dataset->set_next([](int, int64_t sample) -> absl::Status {
    if (sample == 6) throw 7;
    return absl::OkStatus();
  });
  absl::StatusOr<Loader> loader = LoaderBuilder(dataset)
                                      .batch_size(4)
                                      .num_workers(1)
                                      .device(Device::Host())
                                      .Build();
  ASSERT_TRUE(loader.ok()) << loader.status();
  absl::StatusOr<std::optional<DeviceBatch>> first = loader->Next();
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE(first->has_value());
  absl::StatusOr<std::optional<DeviceBatch>> failed = loader->Next();
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(MessageOf(failed.status()),
              AllOf(HasSubstr("shard 0"), HasSubstr("sample 2 of batch 1"),
                    HasSubstr("epoch 0"), HasSubstr("non-standard exception")));
}  // destroyed with the error pending: no abort

TEST(LoaderUserCode, ReadThrowingANonStandardExceptionIsInternal) {
  for (int workers : {0, 2}) {
    Watchdog watchdog(absl::StrCat("ReadThrows", workers), HangLimit());
    auto dataset = std::make_shared<PatternDataset>(40);
    dataset->set_hook([](int64_t index) -> absl::Status {
      if (index == 13) throw "a C string";
      return absl::OkStatus();
    });
    absl::StatusOr<Loader> loader = LoaderBuilder(dataset)
                                        .batch_size(10)
                                        .num_workers(workers)
                                        .device(Device::Host())
                                        .Build();
    ASSERT_TRUE(loader.ok()) << loader.status();
    ASSERT_TRUE(loader->Next().ok());
    absl::StatusOr<std::optional<DeviceBatch>> failed = loader->Next();
    ASSERT_FALSE(failed.ok());
    EXPECT_EQ(failed.status().code(), absl::StatusCode::kInternal);
    EXPECT_THAT(MessageOf(failed.status()),
                AllOf(HasSubstr("index 13"), HasSubstr("batch 1"),
                      HasSubstr("non-standard exception")));
  }
}

// Regression: a null stream was dereferenced by the worker.
TEST(LoaderUserCode, OpenShardReturningANullStreamIsInvalidArgumentNamingIt) {
  Watchdog watchdog("NullStream", HangLimit());
  auto dataset = ScriptedStreams::EachShard(10);
  dataset->set_open([](int, int, int64_t) {
    return absl::StatusOr<std::unique_ptr<SampleStream>>(nullptr);
  });
  absl::StatusOr<Loader> loader = LoaderBuilder(dataset)
                                      .batch_size(4)
                                      .num_workers(2)
                                      .device(Device::Host())
                                      .Build();
  ASSERT_TRUE(loader.ok()) << loader.status();
  absl::StatusOr<std::optional<DeviceBatch>> next = loader->Next();
  ASSERT_FALSE(next.ok());
  EXPECT_EQ(next.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(MessageOf(next.status()),
              AllOf(HasSubstr("shard 0 of 2"), HasSubstr("null stream")));
}

// --- Misuse of a SampleView -------------------------------------------------

// A dataset whose Read of index `bad` runs `misuse` on its view.
class MisusingDataset : public Dataset {
 public:
  MisusingDataset(int64_t bad, std::function<void(SampleView&)> misuse)
      : bad_(bad), misuse_(std::move(misuse)) {
    layout_ = *SampleLayout::Create({
        {.name = "image", .dtype = DType::kUInt8, .shape = {3}},
        {.name = "tokens",
         .dtype = DType::kInt32,
         .shape = {4},
         .variable_length = true},
    });
  }
  int64_t size() const override { return 20; }
  const SampleLayout& layout() const override { return layout_; }
  absl::Status Read(int64_t index, SampleView& out) const override {
    std::memset(out.field(0).data(), 1, out.field(0).size());
    std::memset(out.field(1).data(), 0xff, out.field(1).size());
    out.set_length(1, 2);
    if (index == bad_) misuse_(out);
    return absl::OkStatus();
  }

 private:
  int64_t bad_;
  std::function<void(SampleView&)> misuse_;
  SampleLayout layout_;
};

struct Misuse {
  const char* name;
  std::function<void(SampleView&)> run;
  const char* says;
};

// Regression: set_length on a fixed-size field wrote through length field -1
// (a heap overflow under ASan); out-of-range fields likewise.
TEST(LoaderSampleViewMisuse,
     FailsTheReadWithInvalidArgumentNamingFieldAndIndex) {
  const std::vector<Misuse> misuses = {
      {"set_length on a fixed field", [](SampleView& v) { v.set_length(0, 2); },
       "field 'image' (field 0) is not variable-length"},
      {"set_length on field 7", [](SampleView& v) { v.set_length(7, 1); },
       "set_length(7, 1)"},
      {"set_length on field -1", [](SampleView& v) { v.set_length(-1, 1); },
       "set_length(-1, 1)"},
      {"set_length beyond the maximum",
       [](SampleView& v) { v.set_length(1, 5); }, "must be in 0..4"},
      {"field 9", [](SampleView& v) { EXPECT_TRUE(v.field(9).empty()); },
       "field(9)"},
  };
  for (const Misuse& misuse : misuses) {
    for (int workers : {0, 2}) {
      SCOPED_TRACE(absl::StrCat(misuse.name, ", workers ", workers));
      Watchdog watchdog(misuse.name, HangLimit());
      auto dataset = std::make_shared<MisusingDataset>(13, misuse.run);
      absl::StatusOr<Loader> loader = LoaderBuilder(dataset)
                                          .batch_size(10)
                                          .num_workers(workers)
                                          .device(Device::Host())
                                          .Build();
      ASSERT_TRUE(loader.ok()) << loader.status();
      absl::StatusOr<std::optional<DeviceBatch>> first = loader->Next();
      ASSERT_TRUE(first.ok()) << first.status();
      ASSERT_TRUE(first->has_value());
      absl::StatusOr<std::optional<DeviceBatch>> failed = loader->Next();
      ASSERT_FALSE(failed.ok());
      EXPECT_EQ(failed.status().code(), absl::StatusCode::kInvalidArgument);
      EXPECT_THAT(MessageOf(failed.status()),
                  AllOf(HasSubstr("index 13"), HasSubstr("batch 1"),
                        HasSubstr(misuse.says)));
    }
  }
}

TEST(SampleViewMisuse, WritesNothingAndIsRecordedInStatus) {
  const SampleLayout sample = *SampleLayout::Create({
      {.name = "image", .dtype = DType::kUInt8, .shape = {3}},
      {.name = "tokens",
       .dtype = DType::kInt32,
       .shape = {4},
       .variable_length = true},
  });
  const BatchLayout layout = *BatchLayout::Create(sample, 2);
  std::vector<std::byte> slot(layout.slot_bytes(), std::byte{0x5a});
  const std::vector<std::byte> before = slot;
  SampleView view(layout, slot.data(), 1, 0);
  EXPECT_TRUE(view.status().ok());
  view.set_length(0, 1);
  view.set_length(1, -1);
  view.set_length(1, 5);
  view.set_length(2, 1);
  EXPECT_TRUE(view.field(-1).empty());
  EXPECT_EQ(view.length(0), -1);
  EXPECT_EQ(slot, before) << "a misuse wrote into the slot";
  EXPECT_EQ(view.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(MessageOf(view.status()), HasSubstr("'image'"));  // the first
  view.set_length(1, 4);
  EXPECT_EQ(view.length(1), 4);
}

// Regression: an IterableDataset's variable-length fields were neither
// preset to their maximum nor zero-padded (map-style datasets were): the
// padding held whatever the slot held before.
// Six samples per shard of one variable-length field, all bytes 0xff: even
// samples at the maximum length, odd ones of length 1.
std::shared_ptr<ScriptedStreams> VariableStreams() {
  std::shared_ptr<ScriptedStreams> streams = ScriptedStreams::EachShard(6);
  streams->set_content(*SampleLayout::Create({
                           {.name = "tokens",
                            .dtype = DType::kInt32,
                            .shape = {4},
                            .variable_length = true},
                       }),
                       [](int64_t index, SampleView& out) {
                         std::memset(out.field(0).data(), 0xff,
                                     out.field(0).size());
                         if (index % 2 == 1) out.set_length(0, 1);  // else 4
                         return absl::OkStatus();
                       });
  return streams;
}

TEST(LoaderIterable, VariableLengthFieldsAreZeroPaddedAndCarryTheirLength) {
  Watchdog watchdog("IterableVariable", HangLimit());
  absl::StatusOr<Loader> loader = LoaderBuilder(VariableStreams())
                                      .batch_size(3)
                                      .num_workers(1)
                                      .device(Device::Host())
                                      .Build();
  ASSERT_TRUE(loader.ok()) << loader.status();
  for (int epoch = 0; epoch < 2; ++epoch) {  // the second reuses the slots
    int64_t sample = 0;
    const DrainedEpoch drained =
        DrainEpoch(*loader, {.on_batch = [&](const DeviceBatch& batch) {
          ASSERT_TRUE(batch.WaitOnHost().ok());
          absl::StatusOr<FieldView> tokens = batch.field("tokens");
          absl::StatusOr<FieldView> lengths = batch.field("tokens_length");
          ASSERT_TRUE(tokens.ok() && lengths.ok());
          for (int64_t p = 0; p < batch.size(); ++p, ++sample) {
            const int64_t want = sample % 2 == 1 ? 1 : 4;
            EXPECT_EQ(lengths->data_as<int64_t>()[p], want)
                << "sample " << sample;
            const int32_t* row = tokens->data_as<int32_t>() + 4 * p;
            for (int k = 0; k < 4; ++k) {
              EXPECT_EQ(row[k], k < want ? -1 : 0)
                  << "sample " << sample << " k " << k;
            }
          }
        }});
    ASSERT_TRUE(drained.status.ok()) << drained.status;
    EXPECT_EQ(sample, 6);
  }
}

// --- A moved-from Loader -----------------------------------------------------

// Regression: every call on a moved-from Loader dereferenced a null core.
TEST(LoaderMovedFrom, EveryCallIsFailedPreconditionOrAHarmlessValue) {
  Watchdog watchdog("MovedFrom", HangLimit());
  auto dataset = std::make_shared<PatternDataset>(40);
  absl::StatusOr<Loader> loader = LoaderBuilder(dataset)
                                      .batch_size(10)
                                      .num_workers(2)
                                      .device(Device::Host())
                                      .Build();
  ASSERT_TRUE(loader.ok()) << loader.status();
  Loader moved = *std::move(loader);
  Loader& gone = *loader;
  absl::StatusOr<std::optional<DeviceBatch>> next = gone.Next();
  EXPECT_EQ(next.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(MessageOf(next.status()), HasSubstr("moved-from"));
  EXPECT_EQ(gone.StartEpoch(3).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(gone.epoch(), -1);
  EXPECT_EQ(gone.batches_per_epoch(), -1);
  EXPECT_EQ(gone.layout().num_fields(), 0);
  EXPECT_EQ(gone.input_layout().num_fields(), 0);
  EXPECT_FALSE(gone.device().is_cuda());
  EXPECT_EQ(gone.stats().batches_delivered, 0);
  int items = 0;
  for (absl::StatusOr<DeviceBatch>& item : gone) {
    EXPECT_EQ(item.status().code(), absl::StatusCode::kFailedPrecondition);
    ++items;
  }
  EXPECT_EQ(items, 1);
  gone.Shutdown();
  // The loader it moved to works.
  absl::StatusOr<std::optional<DeviceBatch>> batch = moved.Next();
  ASSERT_TRUE(batch.ok()) << batch.status();
  EXPECT_TRUE(batch->has_value());
}

// --- The last epoch
// -----------------------------------------------------------

// Regression (run under UBSan): StartEpoch(INT64_MAX) was accepted and the
// producer's ++epoch overflowed.
TEST(LoaderLastEpoch, StartEpochPastTheLastIsInvalidArgumentAndTheLastEnds) {
  for (int workers : {0, 2}) {
    Watchdog watchdog(absl::StrCat("LastEpoch", workers), HangLimit());
    auto dataset = std::make_shared<PatternDataset>(30);
    absl::StatusOr<Loader> loader = LoaderBuilder(dataset)
                                        .batch_size(10)
                                        .num_workers(workers)
                                        .device(Device::Host())
                                        .Build();
    ASSERT_TRUE(loader.ok()) << loader.status();
    for (int64_t bad :
         {std::numeric_limits<int64_t>::max(), kLastEpoch + 1, int64_t{-1}}) {
      absl::Status status = loader->StartEpoch(bad);
      EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << bad;
      EXPECT_THAT(MessageOf(status),
                  HasSubstr(absl::StrCat("StartEpoch(", bad)));
    }
    EXPECT_EQ(loader->epoch(), 0) << "a refused StartEpoch changed the epoch";
    ASSERT_TRUE(loader->StartEpoch(kLastEpoch).ok());
    const DrainedEpoch last = DrainEpoch(*loader);
    ASSERT_TRUE(last.status.ok()) << last.status;
    for (const HostBatch& batch : last.batches) {
      EXPECT_EQ(batch.epoch, kLastEpoch);
    }
    EXPECT_EQ(last.batches.size(), 3u);
    for (int i = 0; i < 2; ++i) {
      absl::StatusOr<std::optional<DeviceBatch>> past = loader->Next();
      ASSERT_FALSE(past.ok()) << "an epoch after the last";
      EXPECT_EQ(past.status().code(), absl::StatusCode::kOutOfRange);
      EXPECT_THAT(MessageOf(past.status()), HasSubstr("kMaxEpoch"));
    }
    // Still usable from an earlier epoch.
    ASSERT_TRUE(loader->StartEpoch(1).ok());
    absl::StatusOr<std::optional<DeviceBatch>> again = loader->Next();
    ASSERT_TRUE(again.ok()) << again.status();
    ASSERT_TRUE(again->has_value());
    EXPECT_EQ((*again)->epoch(), 1);
  }
}

// --- A failed StartEpoch
// -------------------------------------------------------

// Regression: StartEpoch() stopped the producer, failed (the consumer held
// the only device buffer) and left it stopped: once the batch was released,
// Next() waited forever for batches no one would produce (here the timeout
// turns that into DeadlineExceeded).
TEST(LoaderStartEpoch, AFailedStartEpochLeavesTheLoaderUsable) {
  // At most 2 workers, as in every test of this file: raising oneTBB's
  // thread limit while a previous loader's threads wind down races inside
  // libtbb (AllowWorkers; reported by ThreadSanitizer, not pinwheel's code).
  for (int workers : {1, 2}) {
    Watchdog watchdog(absl::StrCat("FailedStartEpoch", workers), HangLimit());
    auto dataset = std::make_shared<PatternDataset>(50);
    absl::StatusOr<Loader> loader = LoaderBuilder(dataset)
                                        .batch_size(10)
                                        .num_workers(workers)
                                        .device_buffers(1)
                                        .prefetch(1)
                                        .timeout(absl::Seconds(10))
                                        .device(Device::Host())
                                        .Build();
    ASSERT_TRUE(loader.ok()) << loader.status();
    absl::StatusOr<std::optional<DeviceBatch>> held = loader->Next();
    ASSERT_TRUE(held.ok() && held->has_value()) << held.status();
    // Batch 1 is submitted (the one slot's second acquire, for batch 2, has
    // begun) and its copy waits for the only buffer, which the consumer
    // holds: the stage cannot drain.
    ASSERT_TRUE(testing_support::Eventually(
        [&] { return loader->stats().ring.acquire_waits >= 2; }));
    absl::Status restart = loader->StartEpoch(3);
    ASSERT_FALSE(restart.ok()) << "restarted while holding every buffer";
    EXPECT_EQ(restart.code(), absl::StatusCode::kFailedPrecondition);
    ASSERT_TRUE((*held)->Release().ok());
    for (int i = 0; i < 2; ++i) {
      absl::StatusOr<std::optional<DeviceBatch>> next = loader->Next();
      ASSERT_FALSE(next.ok()) << "a batch after a failed StartEpoch";
      EXPECT_EQ(next.status().code(), absl::StatusCode::kFailedPrecondition)
          << next.status();
      EXPECT_THAT(MessageOf(next.status()),
                  AllOf(HasSubstr("StartEpoch(3) failed"),
                        HasSubstr("call StartEpoch() again")));
    }
    ASSERT_TRUE(loader->StartEpoch(3).ok());
    const DrainedEpoch epoch3 = DrainEpoch(*loader);
    ASSERT_TRUE(epoch3.status.ok()) << epoch3.status;
    for (const HostBatch& batch : epoch3.batches) EXPECT_EQ(batch.epoch, 3);
    EXPECT_EQ(epoch3.indices().size(), 50u);
    EXPECT_EQ(loader->epoch(), 4);
  }
}

// --- Shutdown in the middle of a slow batch
// ------------------------------------

// Regression: Shutdown() waited for every in-flight batch to be read whole
// (64 samples × 50 ms); it stops between samples: at most one Read per
// worker thread starts after Shutdown() was called.
TEST(LoaderShutdown, StopsBetweenSamplesNotBetweenBatches) {
  Watchdog watchdog("ShutdownMidBatch", HangLimit());
  constexpr int kWorkers = 2;
  auto dataset = std::make_shared<PatternDataset>(1000);
  auto shutting_down = std::make_shared<std::atomic<bool>>(false);
  auto reads_after = std::make_shared<std::atomic<int>>(0);
  dataset->set_hook([shutting_down, reads_after](int64_t) {
    if (shutting_down->load()) reads_after->fetch_add(1);
    absl::SleepFor(absl::Milliseconds(50));
    return absl::OkStatus();
  });
  absl::StatusOr<Loader> loader = LoaderBuilder(dataset)
                                      .batch_size(64)
                                      .num_workers(kWorkers)
                                      .prefetch(4)
                                      .device(Device::Host())
                                      .Build();
  ASSERT_TRUE(loader.ok()) << loader.status();
  ASSERT_TRUE(testing_support::Eventually(
      [&] { return dataset->reads() >= kWorkers; }));
  shutting_down->store(true);
  loader->Shutdown();
  const int after = reads_after->load();
  EXPECT_LE(after, kWorkers) << "Reads started after Shutdown()";
  absl::SleepFor(absl::Milliseconds(100));
  EXPECT_EQ(reads_after->load(), after) << "a Read after Shutdown() returned";
}

// --- Two consumer threads ----------------------------------------------------

// Regression (issue 18, item 5): two threads calling Next() at once
// (num_workers = 0, both reading inline) hung both. The second call, and a
// StartEpoch() or Checkpoint() during a Next(), return FailedPrecondition at
// once naming the rule; the first Next() gets its batch.
TEST(LoaderConsumerThread, ConcurrentCallsAreFailedPreconditionNotAHang) {
  Watchdog watchdog("ConcurrentNext", HangLimit());
  auto dataset = std::make_shared<PatternDataset>(8);
  auto reading = std::make_shared<Notification>();
  auto release = std::make_shared<Notification>();
  dataset->set_hook([reading, release](int64_t index) {
    if (index == 0) {
      reading->Notify();
      release->WaitForNotification();
    }
    return absl::OkStatus();
  });
  absl::StatusOr<Loader> loader = LoaderBuilder(dataset)
                                      .batch_size(4)
                                      .num_workers(0)
                                      .device(Device::Host())
                                      .Build();
  ASSERT_TRUE(loader.ok()) << loader.status();
  absl::StatusOr<std::optional<DeviceBatch>> first;
  std::thread consumer([&] { first = loader->Next(); });
  reading->WaitForNotification();  // the first Next() is in Read
  const absl::StatusOr<std::optional<DeviceBatch>> second = loader->Next();
  const absl::StatusOr<LoaderCheckpoint> checkpoint = loader->Checkpoint();
  const absl::Status started = loader->StartEpoch(1);
  release->Notify();
  consumer.join();

  EXPECT_EQ(second.status().code(), absl::StatusCode::kFailedPrecondition)
      << second.status();
  EXPECT_THAT(MessageOf(second.status()),
              AllOf(HasSubstr("Next() called from two threads at once"),
                    HasSubstr("a Loader has one consumer thread")));
  EXPECT_EQ(checkpoint.status().code(), absl::StatusCode::kFailedPrecondition)
      << checkpoint.status();
  EXPECT_THAT(MessageOf(checkpoint.status()),
              AllOf(HasSubstr("Checkpoint() called while Next() runs"),
                    HasSubstr("one consumer thread")));
  EXPECT_EQ(started.code(), absl::StatusCode::kFailedPrecondition) << started;
  EXPECT_THAT(MessageOf(started),
              AllOf(HasSubstr("StartEpoch() called while Next() runs"),
                    HasSubstr("one consumer thread")));
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE(first->has_value());
  EXPECT_EQ((*first)->size(), 4);
  EXPECT_EQ((*first)->info().index, 0);
  first->reset();
  // The loader goes on from the one thread.
  const DrainedEpoch rest = DrainEpoch(*loader);
  ASSERT_TRUE(rest.status.ok()) << rest.status;
  EXPECT_EQ(rest.batches.size(), 1u);
}

}  // namespace
}  // namespace pinwheel
