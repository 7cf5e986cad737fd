// Tests of DeviceBatch on the host backend, with batches from a real
// TransferStage: accessors, field lookup, release (explicit, by move, by
// destruction, on the stream last waited on) and DLPack views.
#include "transfer/device_batch.h"

#include <cstdint>
#include <cstring>
#include <dlpack/dlpack.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

#include "pinning/pinned_ring.h"
#include "transfer/device.h"
#include "transfer/event.h"
#include "transfer/sample_layout.h"
#include "transfer/stream.h"
#include "transfer/transfer_stage.h"

namespace pinwheel {
namespace {

using ::testing::HasSubstr;

absl::Time Deadline() { return absl::Now() + absl::Seconds(30); }  // hangs only

// One field per dtype family, to check the DLPack codes.
SampleLayout AllKinds() {
  absl::StatusOr<SampleLayout> layout = SampleLayout::Create({
      {.name = "u8", .dtype = DType::kUInt8, .shape = {2, 3}},
      {.name = "i64", .dtype = DType::kInt64, .shape = {}},
      {.name = "f32", .dtype = DType::kFloat32, .shape = {4}},
      {.name = "bf16", .dtype = DType::kBFloat16, .shape = {2}},
      {.name = "f16", .dtype = DType::kFloat16, .shape = {1}},
      {.name = "b", .dtype = DType::kBool, .shape = {3}},
      {.name = "u32", .dtype = DType::kUInt32, .shape = {1}},
      {.name = "i8", .dtype = DType::kInt8, .shape = {1}},
      {.name = "f64", .dtype = DType::kFloat64, .shape = {1}},
  });
  EXPECT_TRUE(layout.ok()) << layout.status();
  return *layout;
}

// A ring and a stage delivering batch b with every byte of field f of
// sample s set to (b * 16 + f + s) & 0xff. The stage is destroyed first.
struct Source {
  BatchLayout layout;
  std::unique_ptr<PinnedRing> ring;
  std::unique_ptr<TransferStage> stage;

  static std::unique_ptr<Source> Make(int buffers, int64_t batch_size = 4) {
    auto s = std::make_unique<Source>();
    s->layout = *BatchLayout::Create(AllKinds(), batch_size);
    s->ring = *PinnedRing::Create({.slots = 4,
                                   .slot_bytes = s->layout.slot_bytes(),
                                   .memory = HostMemoryKind::kPageable});
    absl::StatusOr<std::unique_ptr<TransferStage>> stage =
        TransferStage::Create(Device::Host(), s->ring.get(), s->layout,
                              buffers);
    EXPECT_TRUE(stage.ok()) << stage.status();
    if (!stage.ok()) return nullptr;
    s->stage = *std::move(stage);
    return s;
  }

  static uint8_t Byte(int64_t b, int f, int64_t s) {
    return static_cast<uint8_t>(b * 16 + f + s);
  }

  void Submit(int64_t b, int64_t samples) {
    absl::StatusOr<PinnedRing::Slot> slot = ring->Acquire();
    ASSERT_TRUE(slot.ok()) << slot.status();
    for (int f = 0; f < layout.num_fields(); ++f) {
      const size_t bytes = layout.fields()[f].bytes();
      for (int64_t s = 0; s < samples; ++s) {
        std::memset(slot->data + layout.field_offset(f) + s * bytes,
                    Byte(b, f, s), bytes);
      }
    }
    // A named batch, not a braced temporary: GCC 12 at -O3 (Release) warns
    // -Wmaybe-uninitialized on the temporary's vector destructor.
    FilledBatch batch;
    batch.kind = FilledBatch::Kind::kBatch;
    batch.info.epoch = 3;
    batch.info.index = b;
    batch.info.samples = samples;
    batch.info.sample_indices.assign(samples, b);
    batch.slot = slot->index;
    stage->Submit(std::move(batch));
  }

  absl::StatusOr<DeviceBatch> Next() {
    absl::StatusOr<TransferStage::Delivery> d = stage->Next(Deadline());
    if (!d.ok()) return d.status();
    return std::move(d->batch);
  }
};

TEST(DeviceBatch, DefaultIsReleasedAndEmpty) {
  DeviceBatch batch;
  EXPECT_TRUE(batch.released());
  EXPECT_EQ(batch.size(), 0);
  EXPECT_EQ(batch.index(), -1);
  EXPECT_EQ(batch.epoch(), -1);
  EXPECT_EQ(batch.num_fields(), 0);
  EXPECT_TRUE(batch.sample_indices().empty());
  EXPECT_EQ(batch.field("u8").status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(batch.ToDLPack(0).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(batch.WaitOnHost().code(), absl::StatusCode::kFailedPrecondition);
  Stream stream = Stream::Borrow(Device::Host());
  EXPECT_EQ(batch.WaitOn(stream).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(batch.Release().ok());
  EXPECT_TRUE(batch.Release(stream).ok());
}

TEST(DeviceBatch, DescribesItsFieldsAndFindsThemByName) {
  std::unique_ptr<Source> source = Source::Make(2);
  ASSERT_NE(source, nullptr);
  source->Submit(5, 3);
  absl::StatusOr<DeviceBatch> batch = source->Next();
  ASSERT_TRUE(batch.ok()) << batch.status();
  EXPECT_EQ(batch->epoch(), 3);
  EXPECT_EQ(batch->index(), 5);
  EXPECT_EQ(batch->size(), 3);
  EXPECT_THAT(batch->sample_indices(), ::testing::ElementsAre(5, 5, 5));
  ASSERT_EQ(batch->num_fields(), 9);
  ASSERT_TRUE(batch->WaitOnHost().ok());

  absl::StatusOr<FieldView> f32 = batch->field("f32");
  ASSERT_TRUE(f32.ok()) << f32.status();
  EXPECT_EQ(f32->dtype, DType::kFloat32);
  EXPECT_EQ(f32->shape, (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(f32->bytes, 3u * 4 * 4);
  EXPECT_EQ(f32->data, batch->field(2).data);
  EXPECT_EQ(f32->data_as<float>(), static_cast<float*>(batch->field(2).data));
  const auto* bytes = static_cast<const uint8_t*>(f32->data);
  for (int64_t s = 0; s < 3; ++s) {
    for (size_t k = 0; k < 16; ++k)
      EXPECT_EQ(bytes[s * 16 + k], Source::Byte(5, 2, s));
  }
  EXPECT_EQ(batch->field("i64")->shape, (std::vector<int64_t>{3}));

  absl::StatusOr<FieldView> missing = batch->field("label");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(missing.status().message()),
              HasSubstr("u8, i64, f32"));
}

TEST(DeviceBatchDeathTest, DataAsATypeOfAnotherSizeAbortsNamingTheField) {
  const FieldView f32{.name = "f32",
                      .dtype = DType::kFloat32,
                      .shape = {3, 4},
                      .data = nullptr,
                      .bytes = 48};
  EXPECT_EQ(f32.data_as<float>(), nullptr);
  EXPECT_EQ(f32.data_as<int32_t>(), nullptr);  // the same size reads
  EXPECT_DEATH(f32.data_as<double>(),
               "field 'f32' is f32 \\(4 bytes an element\\), read as a type "
               "of 8 bytes");
}

TEST(DeviceBatch, ReleaseIsIdempotentAndFreesTheBuffer) {
  std::unique_ptr<Source> source = Source::Make(1);
  ASSERT_NE(source, nullptr);
  source->Submit(0, 4);
  absl::StatusOr<DeviceBatch> batch = source->Next();
  ASSERT_TRUE(batch.ok());
  source->Submit(1, 4);
  // One buffer, held: batch 1 cannot land.
  EXPECT_EQ(source->Next().status().code(),
            absl::StatusCode::kFailedPrecondition);
  Stream consumer = Stream::Borrow(Device::Host());
  ASSERT_TRUE(batch->Release(consumer).ok());
  EXPECT_TRUE(batch->released());
  EXPECT_EQ(batch->num_fields(), 0);
  ASSERT_TRUE(batch->Release(consumer).ok());  // idempotent
  absl::StatusOr<DeviceBatch> next = source->Next();
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_EQ(next->index(), 1);
}

// Regression: ready() after Release() dereferenced the released lease.
TEST(DeviceBatch, ReadyAfterReleaseIsACompletedEventOfItsDevice) {
  std::unique_ptr<Source> source = Source::Make(1);
  ASSERT_NE(source, nullptr);
  source->Submit(0, 4);
  absl::StatusOr<DeviceBatch> batch = source->Next();
  ASSERT_TRUE(batch.ok()) << batch.status();
  ASSERT_TRUE(batch->Release().ok());
  const Event& ready = batch->ready();
  EXPECT_EQ(ready.device(), batch->device());
  absl::StatusOr<bool> done = ready.Query();
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_TRUE(*done);
  EXPECT_TRUE(ready.Wait().ok());
  Stream stream = Stream::Borrow(Device::Host());
  EXPECT_TRUE(stream.WaitFor(ready).ok());
  // Moved from, and never held: the same.
  source->Submit(1, 4);
  absl::StatusOr<DeviceBatch> other = source->Next();
  ASSERT_TRUE(other.ok()) << other.status();
  DeviceBatch taker(std::move(*other));
  DeviceBatch fresh;
  for (DeviceBatch* empty : {&*other, &fresh}) {
    absl::StatusOr<bool> complete =
        empty->ready().Query();  // NOLINT(bugprone-use-after-move)
    ASSERT_TRUE(complete.ok());
    EXPECT_TRUE(*complete);
  }
}

TEST(DeviceBatch, FieldOutOfRangeOrAfterReleaseIsEmpty) {
  std::unique_ptr<Source> source = Source::Make(1);
  ASSERT_NE(source, nullptr);
  source->Submit(0, 4);
  absl::StatusOr<DeviceBatch> batch = source->Next();
  ASSERT_TRUE(batch.ok()) << batch.status();
  EXPECT_EQ(batch->field(-1).data, nullptr);
  EXPECT_EQ(batch->field(batch->num_fields()).data, nullptr);
  EXPECT_NE(batch->field(0).data, nullptr);
  ASSERT_TRUE(batch->Release().ok());
  EXPECT_EQ(batch->field(0).data, nullptr);
  EXPECT_TRUE(batch->field(0).shape.empty());
}

TEST(DeviceBatch, DestructorReleases) {
  std::unique_ptr<Source> source = Source::Make(1);
  ASSERT_NE(source, nullptr);
  source->Submit(0, 4);
  {
    absl::StatusOr<DeviceBatch> batch = source->Next();
    ASSERT_TRUE(batch.ok());
  }
  source->Submit(1, 4);
  absl::StatusOr<DeviceBatch> next = source->Next();
  ASSERT_TRUE(next.ok()) << "a destroyed batch kept its buffer: "
                         << next.status();
  EXPECT_EQ(next->index(), 1);
}

TEST(DeviceBatch, MoveTransfersAndMoveAssignmentReleasesTheOld) {
  std::unique_ptr<Source> source = Source::Make(2);
  ASSERT_NE(source, nullptr);
  source->Submit(0, 4);
  source->Submit(1, 4);
  source->Submit(2, 4);
  absl::StatusOr<DeviceBatch> first = source->Next();
  ASSERT_TRUE(first.ok()) << first.status();
  // The consumer holds one of two buffers here: nothing may fail.
  absl::StatusOr<DeviceBatch> second = source->Next();
  ASSERT_TRUE(second.ok()) << second.status();

  DeviceBatch moved(std::move(*first));
  EXPECT_TRUE(first->released());  // NOLINT(bugprone-use-after-move)
  EXPECT_FALSE(moved.released());
  EXPECT_EQ(moved.index(), 0);

  moved = std::move(*second);  // batch 0 is released here
  EXPECT_EQ(moved.index(), 1);
  EXPECT_TRUE(second->released());  // NOLINT(bugprone-use-after-move)
  absl::StatusOr<DeviceBatch> third = source->Next();
  ASSERT_TRUE(third.ok()) << "move assignment kept the old buffer: "
                          << third.status();
  EXPECT_EQ(third->index(), 2);
  ASSERT_TRUE(third->WaitOnHost().ok());
  EXPECT_EQ(static_cast<uint8_t*>(third->field(0).data)[0],
            Source::Byte(2, 0, 0));
}

TEST(DeviceBatch, ReleaseWithoutAStreamUsesTheStreamLastWaitedOn) {
  // The consumer waits on its own stream, reads batch 0 there behind a long
  // copy, and drops the batch without naming a stream: `consumed` must be
  // recorded on that stream, so batch 1 cannot overwrite the buffer first.
  constexpr size_t kBig = size_t{32} << 20;
  std::unique_ptr<Source> source = Source::Make(1);
  ASSERT_NE(source, nullptr);
  absl::StatusOr<Stream> consumer = Stream::Create(Device::Host());
  ASSERT_TRUE(consumer.ok());
  source->Submit(0, 4);
  absl::StatusOr<DeviceBatch> batch = source->Next();
  ASSERT_TRUE(batch.ok());
  ASSERT_TRUE(batch->WaitOn(*consumer).ok());
  const FieldView u8 = batch->field(0);
  std::vector<uint8_t> junk_src(kBig, 1), junk_dst(kBig, 0),
      read_back(u8.bytes, 0);
  ASSERT_TRUE(
      consumer->CopyToDeviceAsync(junk_dst.data(), junk_src.data(), kBig).ok());
  ASSERT_TRUE(
      consumer->CopyToHostAsync(read_back.data(), u8.data, u8.bytes).ok());
  absl::StatusOr<std::shared_ptr<Event>> read = Event::Create(Device::Host());
  ASSERT_TRUE(read.ok());
  ASSERT_TRUE((*read)->Record(*consumer).ok());
  *batch = DeviceBatch();  // dropped: released on `consumer`

  source->Submit(1, 4);
  absl::StatusOr<DeviceBatch> next = source->Next();
  ASSERT_TRUE(next.ok()) << next.status();
  absl::StatusOr<bool> done = (*read)->Query();
  ASSERT_TRUE(done.ok());
  EXPECT_TRUE(*done)
      << "buffer reused before the consumer's stream was done with it";
  ASSERT_TRUE(consumer->Synchronize().ok());
  for (size_t k = 0; k < read_back.size(); ++k) {
    ASSERT_EQ(read_back[k], Source::Byte(0, 0, k / 6)) << "byte " << k;
  }
  ASSERT_TRUE(next->Release(*consumer).ok());
}

TEST(DeviceBatch, DLPackViewDescribesTheField) {
  std::unique_ptr<Source> source = Source::Make(2);
  ASSERT_NE(source, nullptr);
  source->Submit(0, 4);
  absl::StatusOr<DeviceBatch> batch = source->Next();
  ASSERT_TRUE(batch.ok());
  ASSERT_TRUE(batch->WaitOnHost().ok());
  struct Expected {
    uint8_t code;
    uint8_t bits;
  };
  const Expected expected[] = {
      {kDLUInt, 8},   {kDLInt, 64},
      {kDLFloat, 32}, {kDLBfloat, 16},
      {kDLFloat, 16}, {kDLUInt, 8} /* bool: DLPack 0.6 has no bool code */,
      {kDLUInt, 32},  {kDLInt, 8},
      {kDLFloat, 64},
  };
  ASSERT_EQ(batch->num_fields(), 9);
  for (int f = 0; f < batch->num_fields(); ++f) {
    absl::StatusOr<DLManagedTensor*> view = batch->ToDLPack(f);
    ASSERT_TRUE(view.ok()) << view.status();
    const DLTensor& t = (*view)->dl_tensor;
    const FieldView& field = batch->field(f);
    EXPECT_EQ(t.data, field.data) << field.name;
    EXPECT_EQ(t.byte_offset, 0u);
    EXPECT_EQ(t.device.device_type, kDLCPU) << field.name;
    EXPECT_EQ(t.device.device_id, 0);
    EXPECT_EQ(t.dtype.code, expected[f].code) << field.name;
    EXPECT_EQ(t.dtype.bits, expected[f].bits) << field.name;
    EXPECT_EQ(t.dtype.lanes, 1);
    ASSERT_EQ(t.ndim, static_cast<int32_t>(field.shape.size()));
    EXPECT_EQ(std::vector<int64_t>(t.shape, t.shape + t.ndim), field.shape);
    EXPECT_EQ(t.strides, nullptr);
    (*view)->deleter(*view);  // ASan reports a leak if the context is kept
  }
  EXPECT_EQ(batch->ToDLPack(-1).status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(batch->ToDLPack(9).status().code(), absl::StatusCode::kOutOfRange);
}

TEST(DeviceBatch, DLPackViewKeepsTheBufferUntilDeleted) {
  std::unique_ptr<Source> source = Source::Make(1);
  ASSERT_NE(source, nullptr);
  source->Submit(0, 4);
  absl::StatusOr<DeviceBatch> batch = source->Next();
  ASSERT_TRUE(batch.ok());
  ASSERT_TRUE(batch->WaitOnHost().ok());
  absl::StatusOr<DLManagedTensor*> view = batch->ToDLPack(0);
  ASSERT_TRUE(view.ok());
  ASSERT_TRUE(batch->Release().ok());
  EXPECT_EQ(batch->ToDLPack(0).status().code(),
            absl::StatusCode::kFailedPrecondition);

  // The view still holds the only buffer: batch 1 cannot land...
  source->Submit(1, 4);
  EXPECT_EQ(source->Next().status().code(),
            absl::StatusCode::kFailedPrecondition);
  // ...and the view still reads batch 0.
  const auto* data = static_cast<const uint8_t*>((*view)->dl_tensor.data);
  for (int64_t k = 0; k < 4 * 6; ++k)
    EXPECT_EQ(data[k], Source::Byte(0, 0, k / 6));

  (*view)->deleter(*view);
  absl::StatusOr<DeviceBatch> next = source->Next();
  ASSERT_TRUE(next.ok()) << "deleting the view did not free the buffer: "
                         << next.status();
  EXPECT_EQ(next->index(), 1);
}

}  // namespace
}  // namespace pinwheel
