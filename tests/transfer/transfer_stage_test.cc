// Tests of TransferStage on the host backend: filled slots come out as
// DeviceBatches in submission order, bit-exact, with the right field views;
// errors and ends of epoch pass through in order; a device buffer is reused
// only after the consumer's `consumed` event and a ring slot only after its
// copy_done; Next() reports deadlines and a consumer holding every buffer;
// Shutdown() never hangs and recycles what was queued.
//
// A host stream cannot be held at a chosen point (see Note [holding a host
// stream] in stream_event_test.cc), so a consumer stream is kept busy with a
// large copy instead; every check passes for a correct library whatever the
// scheduling, and a library breaking the rule fails with near certainty.
#include "transfer/transfer_stage.h"

#include <atomic>
#include <cstdint>
#include <cstring>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

#include "pinning/base/status_macros.h"
#include "pinning/pinned_ring.h"
#include "tests/support/async_acquire.h"
#include "tests/support/notification.h"
#include "transfer/device.h"
#include "transfer/device_stage/batch_writer.h"
#include "transfer/event.h"
#include "transfer/sample_layout.h"
#include "transfer/stream.h"

namespace pinwheel {
namespace {

using Kind = FilledBatch::Kind;
using ::testing::HasSubstr;

constexpr absl::Duration kHangLimit = absl::Seconds(30);  // against hangs only

absl::Time Deadline() { return absl::Now() + kHangLimit; }

// The byte at position k of sample s of batch field f in batch b.
uint8_t PatternByte(int64_t b, int64_t s, int f, size_t k) {
  return static_cast<uint8_t>(b * 131 + s * 31 + f * 7 +
                              static_cast<int64_t>(k) + 1);
}

// image u8[3,5,7], label i64[], tokens i32[6] (variable length): the batch
// then has a fourth field, tokens_length i64[].
SampleLayout TestSample() {
  absl::StatusOr<SampleLayout> layout = SampleLayout::Create({
      {.name = "image", .dtype = DType::kUInt8, .shape = {3, 5, 7}},
      {.name = "label", .dtype = DType::kInt64, .shape = {}},
      {.name = "tokens",
       .dtype = DType::kInt32,
       .shape = {6},
       .variable_length = true},
  });
  EXPECT_TRUE(layout.ok()) << layout.status();
  return *layout;
}

// A ring, a stage over it, and helpers to fill and check batches. The stage
// is declared last: it is destroyed before the ring it borrows.
struct Pipeline {
  BatchLayout layout;
  std::unique_ptr<PinnedRing> ring;
  std::unique_ptr<TransferStage> stage;

  static std::unique_ptr<Pipeline> Make(
      int slots, int buffers, int64_t batch_size,
      const SampleLayout& sample = TestSample()) {
    auto p = std::make_unique<Pipeline>();
    absl::StatusOr<BatchLayout> layout =
        BatchLayout::Create(sample, batch_size);
    EXPECT_TRUE(layout.ok()) << layout.status();
    if (!layout.ok()) return nullptr;
    p->layout = *layout;
    absl::StatusOr<std::unique_ptr<PinnedRing>> ring =
        PinnedRing::Create({.slots = slots,
                            .slot_bytes = p->layout.slot_bytes(),
                            .memory = HostMemoryKind::kPageable});
    EXPECT_TRUE(ring.ok()) << ring.status();
    if (!ring.ok()) return nullptr;
    p->ring = *std::move(ring);
    absl::StatusOr<std::unique_ptr<TransferStage>> stage =
        TransferStage::Create(Device::Host(), p->ring.get(), p->layout,
                              buffers);
    EXPECT_TRUE(stage.ok()) << stage.status();
    if (!stage.ok()) return nullptr;
    p->stage = *std::move(stage);
    return p;
  }

  // Acquires a slot, fills batch `b` of `samples` samples and submits it.
  // Returns the slot used.
  int FillAndSubmit(int64_t b, int64_t samples, int64_t epoch = 0) {
    FilledBatch batch = Fill(b, samples, epoch);
    const int slot = batch.slot;
    if (slot >= 0) stage->Submit(std::move(batch));
    return slot;
  }

  // Acquires a slot and fills batch `b` of `samples` samples in it (slot -1
  // when none could be had).
  FilledBatch Fill(int64_t b, int64_t samples, int64_t epoch = 0) {
    absl::StatusOr<PinnedRing::Slot> slot = ring->Acquire();
    EXPECT_TRUE(slot.ok()) << slot.status();
    if (!slot.ok()) return {.slot = -1};
    for (int f = 0; f < layout.num_fields(); ++f) {
      const size_t bytes = layout.fields()[f].bytes();
      for (int64_t s = 0; s < samples; ++s) {
        std::byte* dst = slot->data + layout.field_offset(f) + s * bytes;
        for (size_t k = 0; k < bytes; ++k)
          dst[k] = std::byte{PatternByte(b, s, f, k)};
      }
    }
    FilledBatch batch{.kind = Kind::kBatch,
                      .info = {.epoch = epoch, .index = b, .samples = samples},
                      .slot = slot->index};
    for (int64_t s = 0; s < samples; ++s) {
      batch.info.sample_indices.push_back(b * 1000 + s);
    }
    return batch;
  }

  TransferStage::Delivery NextOrDie() {
    absl::StatusOr<TransferStage::Delivery> d = stage->Next(Deadline());
    EXPECT_TRUE(d.ok()) << d.status();
    if (!d.ok()) return {};
    return *std::move(d);
  }

  // Checks that `batch` is batch `b` of `samples` samples, bit-exact.
  void ExpectBatch(DeviceBatch& batch, int64_t b, int64_t samples) const {
    ASSERT_FALSE(batch.released());
    ASSERT_TRUE(batch.WaitOnHost().ok());
    EXPECT_EQ(batch.index(), b);
    EXPECT_EQ(batch.size(), samples);
    EXPECT_EQ(batch.device(), Device::Host());
    ASSERT_EQ(static_cast<int64_t>(batch.sample_indices().size()), samples);
    for (int64_t s = 0; s < samples; ++s) {
      EXPECT_EQ(batch.sample_indices()[s], b * 1000 + s);
    }
    ASSERT_EQ(batch.num_fields(), layout.num_fields());
    const auto* base = static_cast<const std::byte*>(batch.field(0).data);
    for (int f = 0; f < layout.num_fields(); ++f) {
      const FieldSpec& spec = layout.fields()[f];
      const FieldView& view = batch.field(f);
      EXPECT_EQ(view.name, spec.name);
      EXPECT_EQ(view.dtype, spec.dtype);
      std::vector<int64_t> shape = {samples};
      shape.insert(shape.end(), spec.shape.begin(), spec.shape.end());
      EXPECT_EQ(view.shape, shape) << spec.name;
      EXPECT_EQ(view.bytes, spec.bytes() * samples) << spec.name;
      EXPECT_EQ(static_cast<const std::byte*>(view.data),
                base + layout.field_offset(f))
          << spec.name;
      EXPECT_EQ(
          reinterpret_cast<uintptr_t>(view.data) % BatchLayout::kFieldAlignment,
          0u);
      const auto* data = static_cast<const uint8_t*>(view.data);
      for (int64_t s = 0; s < samples; ++s) {
        for (size_t k = 0; k < spec.bytes(); ++k) {
          ASSERT_EQ(data[s * spec.bytes() + k], PatternByte(b, s, f, k))
              << "batch " << b << " field " << spec.name << " sample " << s
              << " byte " << k;
        }
      }
    }
  }
};

TEST(TransferStage, CreateRejectsARingTooSmallForTheLayout) {
  absl::StatusOr<BatchLayout> layout = BatchLayout::Create(TestSample(), 8);
  ASSERT_TRUE(layout.ok());
  absl::StatusOr<std::unique_ptr<PinnedRing>> ring =
      PinnedRing::Create({.slots = 2,
                          .slot_bytes = layout->slot_bytes() - 1,
                          .memory = HostMemoryKind::kPageable});
  ASSERT_TRUE(ring.ok());
  absl::StatusOr<std::unique_ptr<TransferStage>> stage =
      TransferStage::Create(Device::Host(), ring->get(), *layout, 2);
  EXPECT_EQ(stage.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(TransferStage, CreateRejectsABadBufferCount) {
  absl::StatusOr<BatchLayout> layout = BatchLayout::Create(TestSample(), 8);
  ASSERT_TRUE(layout.ok());
  absl::StatusOr<std::unique_ptr<PinnedRing>> ring =
      PinnedRing::Create({.slots = 2,
                          .slot_bytes = layout->slot_bytes(),
                          .memory = HostMemoryKind::kPageable});
  ASSERT_TRUE(ring.ok());
  for (int buffers : {0, 65}) {
    EXPECT_EQ(
        TransferStage::Create(Device::Host(), ring->get(), *layout, buffers)
            .status()
            .code(),
        absl::StatusCode::kInvalidArgument)
        << buffers;
  }
}

TEST(TransferStage, DeliversBatchesInSubmissionOrderBitExact) {
  constexpr int kBatches = 12;
  std::unique_ptr<Pipeline> p = Pipeline::Make(/*slots=*/3, /*buffers=*/2, 8);
  ASSERT_NE(p, nullptr);
  std::thread producer([&] {
    for (int b = 0; b < kBatches; ++b)
      p->FillAndSubmit(b, b == kBatches - 1 ? 5 : 8);
  });
  Stream consumer = Stream::Borrow(Device::Host());
  for (int b = 0; b < kBatches; ++b) {
    TransferStage::Delivery d = p->NextOrDie();
    ASSERT_EQ(d.kind, Kind::kBatch);
    EXPECT_EQ(d.info().index, b);
    EXPECT_EQ(d.info().epoch, 0);
    p->ExpectBatch(d.batch, b, b == kBatches - 1 ? 5 : 8);
    ASSERT_TRUE(d.batch.Release(consumer).ok());
  }
  producer.join();
  TransferStats s = p->stage->stats();
  EXPECT_EQ(s.batches_copied, kBatches);
  EXPECT_EQ(s.bytes_copied,
            static_cast<int64_t>(p->layout.CopyBytes(8) * (kBatches - 1) +
                                 p->layout.CopyBytes(5)));
  EXPECT_EQ(s.device_buffers, 2);
  EXPECT_EQ(s.device_bytes, 2 * p->layout.slot_bytes());
  EXPECT_TRUE(p->stage->Idle());
}

TEST(TransferStage, ErrorsAndEndsOfEpochPassThroughInOrder) {
  std::unique_ptr<Pipeline> p = Pipeline::Make(2, 2, 4);
  ASSERT_NE(p, nullptr);
  p->FillAndSubmit(0, 4);
  p->stage->Submit(
      {.kind = Kind::kError,
       .info = {.epoch = 0, .index = 1},
       .error = absl::DataLossError("sample 17 of batch 1 is corrupt")});
  p->FillAndSubmit(2, 3);
  p->stage->Submit(
      {.kind = Kind::kEndOfEpoch, .info = {.epoch = 0, .index = 3}});
  p->FillAndSubmit(0, 4, /*epoch=*/1);

  TransferStage::Delivery d0 = p->NextOrDie();
  ASSERT_EQ(d0.kind, Kind::kBatch);
  p->ExpectBatch(d0.batch, 0, 4);
  d0.batch = DeviceBatch();  // releases it

  TransferStage::Delivery d1 = p->NextOrDie();
  EXPECT_EQ(d1.kind, Kind::kError);
  EXPECT_EQ(d1.info().index, 1);
  EXPECT_EQ(d1.error.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(d1.error.message()), HasSubstr("sample 17"));
  EXPECT_TRUE(d1.batch.released());

  TransferStage::Delivery d2 = p->NextOrDie();
  ASSERT_EQ(d2.kind, Kind::kBatch);
  p->ExpectBatch(d2.batch, 2, 3);
  ASSERT_TRUE(d2.batch.Release().ok());

  TransferStage::Delivery d3 = p->NextOrDie();
  EXPECT_EQ(d3.kind, Kind::kEndOfEpoch);
  EXPECT_EQ(d3.info().epoch, 0);
  EXPECT_EQ(d3.info().index, 3);

  TransferStage::Delivery d4 = p->NextOrDie();
  ASSERT_EQ(d4.kind, Kind::kBatch);
  EXPECT_EQ(d4.info().epoch, 1);
  EXPECT_EQ(d4.batch.epoch(), 1);
  p->ExpectBatch(d4.batch, 0, 4);
}

TEST(TransferStage, AnErrorInPlaceOfASlotRecyclesTheSlot) {
  std::unique_ptr<Pipeline> p = Pipeline::Make(1, 1, 4);
  ASSERT_NE(p, nullptr);
  absl::StatusOr<PinnedRing::Slot> slot = p->ring->Acquire();
  ASSERT_TRUE(slot.ok());
  p->stage->Submit({.kind = Kind::kError,
                    .info = {.index = 0},
                    .slot = slot->index,
                    .error = absl::InternalError("worker failed")});
  TransferStage::Delivery d = p->NextOrDie();
  EXPECT_EQ(d.kind, Kind::kError);
  // The only slot is free again (would hang otherwise).
  absl::StatusOr<PinnedRing::Slot> again = p->ring->Acquire();
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->index, slot->index);
  p->ring->Recycle(again->index, nullptr);
}

TEST(TransferStage, NextWithAPastDeadlineIsDeadlineExceeded) {
  std::unique_ptr<Pipeline> p = Pipeline::Make(2, 2, 4);
  ASSERT_NE(p, nullptr);
  absl::StatusOr<TransferStage::Delivery> d =
      p->stage->Next(absl::Now() - absl::Seconds(1));
  EXPECT_EQ(d.status().code(), absl::StatusCode::kDeadlineExceeded)
      << d.status();
  d = p->stage->Next(absl::InfinitePast());
  EXPECT_EQ(d.status().code(), absl::StatusCode::kDeadlineExceeded)
      << d.status();
  // A delivery already waiting is returned even with a past deadline.
  p->stage->Submit({.kind = Kind::kEndOfEpoch, .info = {.index = 0}});
  ASSERT_TRUE(p->NextOrDie().kind == Kind::kEndOfEpoch);
  p->stage->Submit({.kind = Kind::kEndOfEpoch, .info = {.index = 1}});
  const absl::Time deadline = Deadline();
  absl::StatusOr<TransferStage::Delivery> got;
  do {  // until the copy thread has queued it
    got = p->stage->Next(absl::InfinitePast());
  } while (!got.ok() && absl::IsDeadlineExceeded(got.status()) &&
           absl::Now() < deadline);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->info().index, 1);
}

TEST(TransferStage, ConsumerHoldingEveryBufferIsFailedPrecondition) {
  std::unique_ptr<Pipeline> p = Pipeline::Make(4, 2, 4);
  ASSERT_NE(p, nullptr);
  for (int b = 0; b < 3; ++b) p->FillAndSubmit(b, 4);
  TransferStage::Delivery d0 = p->NextOrDie();
  TransferStage::Delivery d1 = p->NextOrDie();
  ASSERT_EQ(d0.kind, Kind::kBatch);
  ASSERT_EQ(d1.kind, Kind::kBatch);
  // Batch 2 can never land: both buffers are held. Next() says so rather
  // than waiting out its (long) deadline.
  absl::StatusOr<TransferStage::Delivery> d2 = p->stage->Next(Deadline());
  EXPECT_EQ(d2.status().code(), absl::StatusCode::kFailedPrecondition)
      << d2.status();
  EXPECT_THAT(std::string(d2.status().message()),
              HasSubstr("2 device buffers"));

  ASSERT_TRUE(d0.batch.Release().ok());
  TransferStage::Delivery again = p->NextOrDie();
  ASSERT_EQ(again.kind, Kind::kBatch);
  p->ExpectBatch(again.batch, 2, 4);
}

TEST(TransferStage, ReusesADeviceBufferOnlyAfterConsumed) {
  // One device buffer. The consumer reads batch 0 on its own stream behind
  // a long copy, then releases it on that stream: batch 1 may be copied into
  // the buffer only after that read.
  constexpr size_t kBig = size_t{32} << 20;
  std::unique_ptr<Pipeline> p = Pipeline::Make(2, /*buffers=*/1, 4);
  ASSERT_NE(p, nullptr);
  absl::StatusOr<Stream> consumer = Stream::Create(Device::Host());
  ASSERT_TRUE(consumer.ok());
  absl::StatusOr<std::shared_ptr<Event>> before_release =
      Event::Create(Device::Host());
  ASSERT_TRUE(before_release.ok());

  p->FillAndSubmit(0, 4);
  TransferStage::Delivery d0 = p->NextOrDie();
  ASSERT_EQ(d0.kind, Kind::kBatch);
  ASSERT_TRUE(d0.batch.WaitOn(*consumer).ok());
  const FieldView image = d0.batch.field(0);
  std::vector<uint8_t> junk_src(kBig, 1), junk_dst(kBig, 0);
  std::vector<uint8_t> read_back(image.bytes, 0);
  ASSERT_TRUE(
      consumer->CopyToDeviceAsync(junk_dst.data(), junk_src.data(), kBig).ok());
  ASSERT_TRUE(
      consumer->CopyToHostAsync(read_back.data(), image.data, image.bytes)
          .ok());
  ASSERT_TRUE((*before_release)->Record(*consumer).ok());
  ASSERT_TRUE(d0.batch.Release(*consumer).ok());
  EXPECT_TRUE(d0.batch.released());

  p->FillAndSubmit(1, 4);
  TransferStage::Delivery d1 = p->NextOrDie();
  ASSERT_EQ(d1.kind, Kind::kBatch);
  EXPECT_EQ(d1.batch.field(0).data, image.data) << "one buffer: the same one";
  // Batch 1 was delivered, so its copy was issued: the consumer's work
  // queued before the release must have finished first.
  absl::StatusOr<bool> done = (*before_release)->Query();
  ASSERT_TRUE(done.ok());
  EXPECT_TRUE(*done) << "buffer handed to a new copy before `consumed`";
  p->ExpectBatch(d1.batch, 1, 4);
  ASSERT_TRUE(consumer->Synchronize().ok());
  for (size_t k = 0; k < read_back.size(); ++k) {
    ASSERT_EQ(read_back[k], PatternByte(0, k / 105, 0, k % 105))
        << "the consumer read batch 1's data in place of batch 0's at byte "
        << k;
  }
}

TEST(TransferStage, RecyclesARingSlotOnlyAfterCopyDone) {
  // One ring slot and a big batch: a producer refills the slot as soon as
  // the ring gives it back, and the copy must not see that.
  absl::StatusOr<SampleLayout> big = SampleLayout::Create(
      {{.name = "x", .dtype = DType::kUInt8, .shape = {1 << 20}}});
  ASSERT_TRUE(big.ok());
  std::unique_ptr<Pipeline> p =
      Pipeline::Make(/*slots=*/1, /*buffers=*/2, 16, *big);
  ASSERT_NE(p, nullptr);
  const int slot = p->FillAndSubmit(0, 16);
  TransferStage::Delivery d0 = p->NextOrDie();
  ASSERT_EQ(d0.kind, Kind::kBatch);

  absl::StatusOr<PinnedRing::Slot> again = p->ring->Acquire();
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->index, slot);
  absl::StatusOr<bool> copied = d0.batch.ready().Query();
  ASSERT_TRUE(copied.ok());
  EXPECT_TRUE(*copied) << "ring slot handed out before its copy_done";
  std::memset(again->data, 0xee, again->size);  // the producer refills it
  p->ExpectBatch(d0.batch, 0, 16);
  p->ring->Recycle(again->index, nullptr);
}

TEST(TransferStage, ARingSlotWaitsForItsOwnCopyNotALaterCopyIntoTheSameBuffer) {
  // Two slots, one device buffer, 16 MiB batches. Batch 0 (slot A) is copied
  // and consumed; batch 1 (slot B) is then copied into the same buffer. Slot
  // A's copy is done, so A must be free while batch 1's copy still runs: a
  // slot fenced behind the buffer's copy_done, recorded again for batch 1,
  // would wait for batch 1's copy (see Note [a slot's own fence]).
  absl::StatusOr<SampleLayout> big = SampleLayout::Create(
      {{.name = "x", .dtype = DType::kUInt8, .shape = {1 << 20}}});
  ASSERT_TRUE(big.ok());
  std::unique_ptr<Pipeline> p =
      Pipeline::Make(/*slots=*/2, /*buffers=*/1, 16, *big);
  ASSERT_NE(p, nullptr);
  absl::StatusOr<Stream> consumer = Stream::Create(Device::Host());
  ASSERT_TRUE(consumer.ok());

  const int slot_a = p->FillAndSubmit(0, 16);
  TransferStage::Delivery d0 = p->NextOrDie();
  ASSERT_EQ(d0.kind, Kind::kBatch);
  ASSERT_TRUE(d0.batch.WaitOnHost().ok());
  ASSERT_TRUE(d0.batch.Release(*consumer).ok());
  ASSERT_TRUE(consumer->Synchronize().ok());

  // Batch 1's copy queues behind a gate on the copy stream: it cannot finish
  // before the test has looked at slot A, however the threads are scheduled.
  // (Without the gate the test assumed slot A's fence, recorded right after
  // batch 0's ready event, had run by the time batch 1 was delivered: false
  // 13 of 40 runs on a loaded 2-core machine.)
  ::pinwheel::testing_support::Notification gate;
  ASSERT_TRUE(p->stage->copy_stream()
                  .EnqueueHostTask([&gate] { gate.WaitForNotification(); })
                  .ok());
  const int slot_b = p->FillAndSubmit(1, 16);
  ASSERT_NE(slot_b, slot_a);
  TransferStage::Delivery d1 = p->NextOrDie();  // batch 1's copy is queued
  ASSERT_EQ(d1.kind, Kind::kBatch);
  absl::StatusOr<PinnedRing::Slot> freed = absl::UnknownError("not acquired");
  absl::StatusOr<bool> copy1_done = absl::UnknownError("not queried");
  {
    // Slot A frees once the stream passes its own fence, ahead of the gate;
    // a fence behind batch 1's copy would keep it until the gate opens.
    ::pinwheel::testing_support::AsyncAcquire<PinnedRing> acquire(
        p->ring.get());
    freed = acquire.Result();
    copy1_done = d1.batch.ready().Query();
    gate.Notify();
  }
  ASSERT_TRUE(freed.ok()) << "slot " << slot_a
                          << " is not freed while batch 1's copy into the "
                             "same buffer waits: "
                          << freed.status();
  ASSERT_TRUE(copy1_done.ok()) << copy1_done.status();
  EXPECT_FALSE(*copy1_done);
  EXPECT_EQ(freed->index, slot_a);
  p->ring->Recycle(freed->index, nullptr);
  p->ExpectBatch(d1.batch, 1, 16);
}

TEST(TransferStage, ShutdownWithQueuedItemsReturnsAndRecyclesTheirSlots) {
  constexpr int kSlots = 4;
  std::unique_ptr<Pipeline> p = Pipeline::Make(kSlots, /*buffers=*/1, 4);
  ASSERT_NE(p, nullptr);
  for (int b = 0; b < kSlots; ++b) p->FillAndSubmit(b, 4);
  // The consumer holds the only buffer: the rest stay queued or wait for it.
  TransferStage::Delivery d0 = p->NextOrDie();
  ASSERT_EQ(d0.kind, Kind::kBatch);

  ::pinwheel::testing_support::Notification shut_down;
  std::thread stopper([&] {
    p->stage->Shutdown();
    p->stage->Shutdown();  // idempotent
    shut_down.Notify();
  });
  const bool returned = shut_down.WaitForNotificationWithTimeout(kHangLimit);
  EXPECT_TRUE(returned) << "Shutdown() hangs with queued items";
  if (!returned) {
    ASSERT_TRUE(d0.batch.Release().ok());  // let it finish
  }
  stopper.join();

  // Every slot can be had again (slot 0 once its copy is done).
  std::vector<int> slots;
  for (int i = 0; i < kSlots; ++i) {
    std::optional<PinnedRing::Slot> slot;
    const absl::Time deadline = Deadline();
    while (!(slot = p->ring->TryAcquire()) && absl::Now() < deadline) {
      absl::SleepFor(absl::Milliseconds(1));
    }
    ASSERT_TRUE(slot.has_value()) << "slot never recycled after Shutdown()";
    slots.push_back(slot->index);
  }
  for (int s : slots) p->ring->Recycle(s, nullptr);

  // The delivered batch is still valid, and Next() now says Cancelled.
  p->ExpectBatch(d0.batch, 0, 4);
  absl::StatusOr<TransferStage::Delivery> next = p->stage->Next(Deadline());
  EXPECT_EQ(next.status().code(), absl::StatusCode::kCancelled)
      << next.status();
  ASSERT_TRUE(d0.batch.Release().ok());
}

TEST(TransferStage, BatchesOutliveTheStage) {
  std::unique_ptr<Pipeline> p = Pipeline::Make(2, 2, 4);
  ASSERT_NE(p, nullptr);
  p->FillAndSubmit(0, 4);
  TransferStage::Delivery d0 = p->NextOrDie();
  ASSERT_EQ(d0.kind, Kind::kBatch);
  p->stage.reset();
  p->ExpectBatch(d0.batch, 0, 4);  // ASan: the buffer is still allocated
  ASSERT_TRUE(d0.batch.Release().ok());
}

TEST(TransferStage, DiscardPendingDropsQueuedBatchesAndRecyclesSlots) {
  std::unique_ptr<Pipeline> p = Pipeline::Make(3, 2, 4);
  ASSERT_NE(p, nullptr);
  for (int b = 0; b < 3; ++b) p->FillAndSubmit(b, 4);
  ASSERT_TRUE(p->stage->DiscardPending().ok());
  EXPECT_TRUE(p->stage->Idle());
  p->FillAndSubmit(7, 2);  // would hang if the slots were lost
  TransferStage::Delivery d = p->NextOrDie();
  ASSERT_EQ(d.kind, Kind::kBatch);
  p->ExpectBatch(d.batch, 7, 2);
}

// Next() decides "the consumer holds every buffer" from a count of live
// batches; a batch being handed over (counted, not yet queued) must not be
// mistaken for one the consumer holds.
TEST(TransferStage, NextNeverMistakesABatchInHandOverForAHeldOne) {
  constexpr int kRounds = 2000;
  std::unique_ptr<Pipeline> p = Pipeline::Make(2, /*buffers=*/1, 1);
  ASSERT_NE(p, nullptr);
  int failures = 0;
  absl::Status first_failure;
  for (int b = 0; b < kRounds; ++b) {
    absl::StatusOr<PinnedRing::Slot> slot = p->ring->Acquire();
    ASSERT_TRUE(slot.ok());
    p->stage->Submit({.kind = Kind::kBatch,
                      .info = {.index = b, .samples = 1},
                      .slot = slot->index});
    // Enter Next() at varying points of the copy thread's hand-over.
    std::atomic<int> spin{0};
    while (spin.fetch_add(1, std::memory_order_relaxed) < (b % 64) * 40) {
    }
    absl::StatusOr<TransferStage::Delivery> d = p->stage->Next(Deadline());
    while (!d.ok() && absl::IsFailedPrecondition(d.status())) {
      if (++failures == 1) first_failure = d.status();
      d = p->stage->Next(Deadline());
    }
    ASSERT_TRUE(d.ok()) << d.status();
    ASSERT_EQ(d->info().index, b);
    d->batch = DeviceBatch();  // released before the next round
  }
  EXPECT_EQ(failures, 0) << "Next() reported FailedPrecondition " << failures
                         << " times though the consumer held no batch: "
                         << first_failure;
}

// See Note [copy issued by the submitter] in transfer_stage.cc.
TEST(TransferStage, ABatchSubmittedWithABufferFreeIsCopiedByTheSubmitter) {
  std::unique_ptr<Pipeline> p = Pipeline::Make(4, /*buffers=*/2, 4);
  ASSERT_NE(p, nullptr);
  p->FillAndSubmit(0, 4);
  // Nothing was queued and both buffers were free: Submit() issued the copy
  // and the delivery is ready before it returned, with no copy thread turn.
  EXPECT_FALSE(p->stage->Idle());
  TransferStats s = p->stage->stats();
  EXPECT_EQ(s.inline_copies, 1);
  EXPECT_EQ(s.batches_copied, 1);
  TransferStage::Delivery d = p->NextOrDie();
  ASSERT_EQ(d.kind, Kind::kBatch);
  p->ExpectBatch(d.batch, 0, 4);
}

// The submitter is the pipeline's serial stage: batches submitted closer
// than four writes apart are left to the copy thread (Note [copy issued by
// the submitter]).
TEST(TransferStage, BatchesSubmittedCloseTogetherAreCopiedByTheCopyThread) {
  constexpr int64_t kSamples = 8192;  // 1.2 MB: the write outlasts a submit
  std::unique_ptr<Pipeline> p = Pipeline::Make(3, /*buffers=*/3, kSamples);
  ASSERT_NE(p, nullptr);
  FilledBatch first = p->Fill(0, kSamples);
  FilledBatch second = p->Fill(1, kSamples);
  // The first is the submitter's (no write measured yet); the second comes
  // one write later, less than four: queued.
  p->stage->Submit(std::move(first));
  p->stage->Submit(std::move(second));
  for (int b = 0; b < 2; ++b) {
    TransferStage::Delivery d = p->NextOrDie();
    ASSERT_EQ(d.kind, Kind::kBatch);
    p->ExpectBatch(d.batch, b, kSamples);
  }
  EXPECT_EQ(p->stage->stats().inline_copies, 1);
  // Far apart again, the submitter copies.
  absl::SleepFor(absl::Milliseconds(300));
  p->FillAndSubmit(2, 4);
  TransferStage::Delivery d = p->NextOrDie();
  p->ExpectBatch(d.batch, 2, 4);
  TransferStats s = p->stage->stats();
  EXPECT_EQ(s.inline_copies, 2);
  EXPECT_EQ(s.batches_copied, 3);
}

// The consumer's own thread (a loader with no workers) waits for its batch
// next and reads on only while the stage is idle: its batches are never
// handed off, however close together (a handed-off batch that lost every
// sample left LoaderCore::Next() waiting for ever).
TEST(TransferStage,
     BatchesTheConsumerSubmitsCloseTogetherAreCopiedOnItsThread) {
  constexpr int64_t kSamples = 8192;
  std::unique_ptr<Pipeline> p = Pipeline::Make(3, /*buffers=*/3, kSamples);
  ASSERT_NE(p, nullptr);
  FilledBatch first = p->Fill(0, kSamples);
  FilledBatch second = p->Fill(1, kSamples);
  p->stage->Submit(std::move(first), TransferStage::Submitter::kConsumer);
  p->stage->Submit(std::move(second), TransferStage::Submitter::kConsumer);
  // Written before Submit() returned: nothing queued or being copied.
  EXPECT_EQ(p->stage->stats().inline_copies, 2);
  for (int b = 0; b < 2; ++b) {
    TransferStage::Delivery d = p->NextOrDie();
    ASSERT_EQ(d.kind, Kind::kBatch);
    p->ExpectBatch(d.batch, b, kSamples);
  }
}

TEST(TransferStage, WithNoBufferFreeTheCopyThreadTakesOverInOrder) {
  std::unique_ptr<Pipeline> p = Pipeline::Make(4, /*buffers=*/1, 4);
  ASSERT_NE(p, nullptr);
  p->FillAndSubmit(0, 4);  // copied by the submitter
  TransferStage::Delivery d0 = p->NextOrDie();
  ASSERT_EQ(d0.kind, Kind::kBatch);
  p->ExpectBatch(d0.batch, 0, 4);
  // The consumer holds the only buffer: batch 1 falls back to the queue, and
  // batch 2 and the end of the epoch queue behind it rather than overtake.
  p->FillAndSubmit(1, 4);
  p->FillAndSubmit(2, 3);
  p->stage->Submit({.kind = Kind::kEndOfEpoch, .info = {.index = 3}});
  ASSERT_TRUE(d0.batch.Release().ok());
  for (int b = 1; b <= 2; ++b) {
    TransferStage::Delivery d = p->NextOrDie();
    ASSERT_EQ(d.kind, Kind::kBatch);
    EXPECT_EQ(d.info().index, b);
    p->ExpectBatch(d.batch, b, b == 2 ? 3 : 4);
  }
  TransferStage::Delivery end = p->NextOrDie();
  EXPECT_EQ(end.kind, Kind::kEndOfEpoch);
  TransferStats s = p->stage->stats();
  EXPECT_EQ(s.inline_copies, 1);
  EXPECT_EQ(s.batches_copied, 3);
}

TEST(TransferStage, SubmittersAndTheCopyThreadTakingTurnsKeepOrderBitExact) {
  constexpr int kBatches = 3000;
  std::unique_ptr<Pipeline> p = Pipeline::Make(3, /*buffers=*/2, 2);
  ASSERT_NE(p, nullptr);
  std::thread producer([&] {
    for (int b = 0; b < kBatches; ++b) p->FillAndSubmit(b, 2);
  });
  for (int b = 0; b < kBatches; ++b) {
    TransferStage::Delivery d = p->NextOrDie();
    ASSERT_EQ(d.kind, Kind::kBatch);
    ASSERT_EQ(d.info().index, b);
    p->ExpectBatch(d.batch, b, 2);
    if (b % 7 == 0) {  // hold some a while: the submitter then falls back
      std::atomic<int> spin{0};
      while (spin.fetch_add(1, std::memory_order_relaxed) < 2000) {
      }
    }
  }
  producer.join();
  EXPECT_EQ(p->stage->stats().batches_copied, kBatches);
}

// A writer that reads no slot: writes each job's batch index into the one
// i64 field of every sample, as the gather with its order on the device
// makes a batch from its BatchInfo alone.
class IndexWriter final : public internal::BatchWriter {
 public:
  IndexWriter()
      : layout_(*BatchLayout::Create(
            *SampleLayout::Create({{"index", DType::kInt64, {}}}), 4)) {}
  size_t buffer_bytes() const override { return layout_.slot_bytes(); }
  const BatchLayout& delivered_layout() const override { return layout_; }
  const BatchLayout* slot_layout() const override { return nullptr; }
  size_t CopyBytes(int64_t) const override { return 0; }
  absl::Status Attach(const DeviceBufferPool&, const PinnedRing*) override {
    return absl::OkStatus();
  }
  absl::Status Write(FilledBatch& job, const DeviceBufferPool::Buffer& buffer,
                     const Stream& stream, internal::SlotFence& fence,
                     internal::WriteReport&) const override {
    EXPECT_EQ(job.slot, -1);
    auto* out = reinterpret_cast<int64_t*>(buffer.data);
    const int64_t index = job.info.index;
    const int64_t samples = job.info.samples;
    PINWHEEL_RETURN_IF_ERROR(fence.Record());  // no slot: records nothing
    return stream.EnqueueHostTask([out, index, samples] {
      for (int64_t s = 0; s < samples; ++s) out[s] = index;
    });
  }
  std::shared_ptr<const std::vector<FieldView>> FieldsOf(
      std::byte* buffer, int64_t samples) const override {
    return std::make_shared<std::vector<FieldView>>(std::vector<FieldView>{
        internal::FieldViewOf(layout_, 0, buffer, samples)});
  }

 private:
  const BatchLayout layout_;
};

TEST(TransferStage, AJobWithNoSlotIsWrittenFromItsInfoWithoutARing) {
  absl::StatusOr<std::unique_ptr<TransferStage>> stage = TransferStage::Create(
      Device::Host(), nullptr, std::make_shared<IndexWriter>(), 2);
  ASSERT_TRUE(stage.ok()) << stage.status();
  for (int64_t b = 0; b < 5; ++b) {
    (*stage)->Submit({.info = {.epoch = 0, .index = b, .samples = 3}});
    absl::StatusOr<TransferStage::Delivery> d = (*stage)->Next(Deadline());
    ASSERT_TRUE(d.ok()) << d.status();
    EXPECT_EQ(d->info().index, b);
    ASSERT_TRUE(d->batch.WaitOnHost().ok());
    const auto* index = static_cast<const int64_t*>(d->batch.field(0).data);
    EXPECT_THAT(std::vector<int64_t>(index, index + 3), ::testing::Each(b));
  }
  (*stage)->Submit({.kind = Kind::kEndOfEpoch, .info = {.index = 5}});
  absl::StatusOr<TransferStage::Delivery> end = (*stage)->Next(Deadline());
  ASSERT_TRUE(end.ok()) << end.status();
  EXPECT_EQ(end->kind, Kind::kEndOfEpoch);
  EXPECT_EQ(end->info().index, 5);
  EXPECT_EQ((*stage)->stats().bytes_copied, 0);
}

}  // namespace
}  // namespace pinwheel
