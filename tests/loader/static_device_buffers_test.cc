// LoaderOptions::static_device_buffers on the host backend: batches land in
// the caller's buffers, in sampler order, each buffer reused only after its
// batch was released and the consumer's stream passed the release; every
// bad buffer is refused naming it. (The GPU case, a CUDA graph replayed over
// the buffers, is static_buffers_graph_test.)
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

#include "loader/loader.h"
#include "loader/loader_builder.h"
#include "tests/support/drain_epoch.h"
#include "tests/support/test_datasets.h"
#include "transfer/device.h"
#include "transfer/event.h"
#include "transfer/sample_layout.h"
#include "transfer/static_device_buffer.h"
#include "transfer/stream.h"
#include "transfer/widen_tokens.h"

namespace pinwheel {
namespace {

using ::testing::HasSubstr;
using testing_support::DrainedEpoch;
using testing_support::DrainEpoch;
using testing_support::PatternDataset;

// Host memory the test owns, lent to the loader as its "device" buffers
// (the host backend's device memory is host memory).
class CallerBuffers {
 public:
  // `count` buffers of `bytes` each, 256-byte aligned.
  CallerBuffers(int count, size_t bytes) : bytes_(bytes) {
    const size_t rounded = (bytes + 255) / 256 * 256;
    for (int i = 0; i < count; ++i) {
      memory_.emplace_back(static_cast<std::byte*>(std::aligned_alloc(
                               256, rounded == 0 ? 256 : rounded)),
                           &std::free);
      std::memset(memory_.back().get(), 0xEE, rounded == 0 ? 256 : rounded);
    }
  }
  std::vector<StaticDeviceBuffer> views() const {
    std::vector<StaticDeviceBuffer> out;
    for (const auto& m : memory_) out.push_back({m.get(), bytes_});
    return out;
  }
  std::byte* data(int i) const { return memory_[i].get(); }

 private:
  size_t bytes_;
  std::vector<std::unique_ptr<std::byte, decltype(&std::free)>> memory_;
};

// The device buffer bytes of a PatternDataset loader with batches of
// `batch_size`.
size_t PatternBytes(int64_t batch_size) {
  absl::StatusOr<size_t> bytes =
      LoaderBuilder(std::make_shared<PatternDataset>(1))
          .batch_size(batch_size)
          .device_buffer_bytes();
  EXPECT_TRUE(bytes.ok()) << bytes.status();
  return bytes.ok() ? *bytes : 0;
}

// Expects `batch`'s fields to lie in its static buffer at their layout
// offsets and to hold its samples.
void ExpectInItsBuffer(const PatternDataset& dataset, const DeviceBatch& batch,
                       const CallerBuffers& buffers,
                       const BatchLayout& layout) {
  ASSERT_GE(batch.buffer_index(), 0);
  const std::byte* base = buffers.data(batch.buffer_index());
  ASSERT_TRUE(batch.WaitOnHost().ok());
  ASSERT_EQ(batch.num_fields(), 3);
  for (int f = 0; f < 3; ++f) {
    EXPECT_EQ(batch.field(f).data, base + layout.field_offset(f))
        << "field " << f << " not at its place in buffer "
        << batch.buffer_index();
    const size_t bytes = layout.fields()[f].bytes();
    for (int64_t s = 0; s < batch.size(); ++s) {
      const std::vector<std::byte> expected =
          dataset.Expected(batch.sample_indices()[s])[f];
      EXPECT_EQ(std::memcmp(static_cast<const std::byte*>(batch.field(f).data) +
                                s * bytes,
                            expected.data(), bytes),
                0)
          << "batch " << batch.index() << " field " << f << " sample " << s;
    }
  }
}

TEST(StaticDeviceBuffers, DeliversEveryBatchInOrderIntoTheCallersBuffers) {
  auto dataset = std::make_shared<PatternDataset>(50);
  const size_t bytes = PatternBytes(4);
  ASSERT_GT(bytes, 0u);
  CallerBuffers buffers(3, bytes);
  absl::StatusOr<Loader> loader = LoaderBuilder(dataset)
                                      .batch_size(4)
                                      .shuffle(/*seed=*/11)
                                      .num_workers(2)
                                      .static_device_buffers(buffers.views())
                                      .device(Device::Host())
                                      .Build();
  ASSERT_TRUE(loader.ok()) << loader.status();
  EXPECT_EQ(loader->stats().transfer.device_buffers, 3);
  EXPECT_EQ(loader->stats().transfer.device_bytes, 0u)
      << "the loader allocated device buffers of its own";
  std::set<int> used;
  const DrainedEpoch epoch =
      DrainEpoch(*loader, {.on_batch = [&](const DeviceBatch& batch) {
        used.insert(batch.buffer_index());
        ExpectInItsBuffer(*dataset, batch, buffers, loader->layout());
      }});
  ASSERT_TRUE(epoch.status.ok()) << epoch.status;
  ASSERT_EQ(epoch.batches.size(), 13u);
  // The order is the sampler's: the same as a loader of its own buffers.
  absl::StatusOr<Loader> reference = LoaderBuilder(dataset)
                                         .batch_size(4)
                                         .shuffle(/*seed=*/11)
                                         .device(Device::Host())
                                         .Build();
  ASSERT_TRUE(reference.ok()) << reference.status();
  const DrainedEpoch expected = DrainEpoch(*reference);
  ASSERT_TRUE(expected.status.ok()) << expected.status;
  EXPECT_EQ(epoch.indices(), expected.indices());
  for (int b : used) {
    EXPECT_GE(b, 0);
    EXPECT_LT(b, 3);
  }
}

TEST(StaticDeviceBuffers, ABufferIsReusedOnlyAfterItsBatchIsReleased) {
  auto dataset = std::make_shared<PatternDataset>(40);
  CallerBuffers buffers(3, PatternBytes(2));
  absl::StatusOr<Loader> loader = LoaderBuilder(dataset)
                                      .batch_size(2)
                                      .num_workers(2)
                                      .prefetch(4)
                                      .static_device_buffers(buffers.views())
                                      .device(Device::Host())
                                      .Build();
  ASSERT_TRUE(loader.ok()) << loader.status();
  // Hold two batches: every later one must land in the third buffer, and
  // the held ones stay as they were.
  std::vector<DeviceBatch> held;
  for (int i = 0; i < 2; ++i) {
    absl::StatusOr<std::optional<DeviceBatch>> next = loader->Next();
    ASSERT_TRUE(next.ok() && next->has_value()) << next.status();
    held.push_back(std::move(**next));
  }
  ASSERT_NE(held[0].buffer_index(), held[1].buffer_index());
  const int free_buffer = 3 - held[0].buffer_index() - held[1].buffer_index();
  for (int i = 0; i < 5; ++i) {
    absl::StatusOr<std::optional<DeviceBatch>> next = loader->Next();
    ASSERT_TRUE(next.ok() && next->has_value()) << next.status();
    EXPECT_EQ((*next)->buffer_index(), free_buffer)
        << "batch " << (*next)->index() << " landed in a held buffer";
    ExpectInItsBuffer(*dataset, **next, buffers, loader->layout());
    ASSERT_TRUE((*next)->Release().ok());
  }
  for (const DeviceBatch& batch : held) {
    ExpectInItsBuffer(*dataset, batch, buffers, loader->layout());
  }
  // Released, a held buffer comes back into the rotation.
  const int let_go = held[0].buffer_index();
  ASSERT_TRUE(held[0].Release().ok());
  std::set<int> seen;
  for (int i = 0; i < 4; ++i) {
    absl::StatusOr<std::optional<DeviceBatch>> next = loader->Next();
    ASSERT_TRUE(next.ok() && next->has_value()) << next.status();
    EXPECT_NE((*next)->buffer_index(), held[1].buffer_index());
    seen.insert((*next)->buffer_index());
    ExpectInItsBuffer(*dataset, **next, buffers, loader->layout());
  }
  EXPECT_TRUE(seen.count(let_go)) << "buffer " << let_go << " never reused";
  ExpectInItsBuffer(*dataset, held[1], buffers, loader->layout());
}

TEST(StaticDeviceBuffers, ABufferWaitsForTheConsumersStreamToPassTheRelease) {
  // The consumer reads batch 0 on its own stream behind a long copy and
  // releases it there. Holding batch 1 (the other buffer), batch 2 must land
  // in batch 0's buffer, and only after the consumer's read.
  constexpr size_t kBig = size_t{32} << 20;
  auto dataset = std::make_shared<PatternDataset>(20);
  CallerBuffers buffers(2, PatternBytes(2));
  absl::StatusOr<Loader> loader = LoaderBuilder(dataset)
                                      .batch_size(2)
                                      .static_device_buffers(buffers.views())
                                      .device(Device::Host())
                                      .Build();
  ASSERT_TRUE(loader.ok()) << loader.status();
  absl::StatusOr<Stream> consumer = Stream::Create(Device::Host());
  ASSERT_TRUE(consumer.ok());
  absl::StatusOr<std::shared_ptr<Event>> before_release =
      Event::Create(Device::Host());
  ASSERT_TRUE(before_release.ok());

  absl::StatusOr<std::optional<DeviceBatch>> b0 = loader->Next();
  ASSERT_TRUE(b0.ok() && b0->has_value()) << b0.status();
  const int buffer0 = (*b0)->buffer_index();
  ASSERT_TRUE((*b0)->WaitOn(*consumer).ok());
  const FieldView a = (*b0)->field(0);
  std::vector<uint8_t> junk_src(kBig, 1), junk_dst(kBig, 0);
  std::vector<std::byte> read_back(a.bytes);
  ASSERT_TRUE(
      consumer->CopyToDeviceAsync(junk_dst.data(), junk_src.data(), kBig).ok());
  ASSERT_TRUE(
      consumer->CopyToHostAsync(read_back.data(), a.data, a.bytes).ok());
  ASSERT_TRUE((*before_release)->Record(*consumer).ok());
  const std::vector<int64_t> indices0((*b0)->sample_indices().begin(),
                                      (*b0)->sample_indices().end());
  ASSERT_TRUE((*b0)->Release(*consumer).ok());

  absl::StatusOr<std::optional<DeviceBatch>> b1 = loader->Next();
  ASSERT_TRUE(b1.ok() && b1->has_value()) << b1.status();
  EXPECT_NE((*b1)->buffer_index(), buffer0);
  absl::StatusOr<std::optional<DeviceBatch>> b2 = loader->Next();
  ASSERT_TRUE(b2.ok() && b2->has_value()) << b2.status();
  EXPECT_EQ((*b2)->buffer_index(), buffer0);
  absl::StatusOr<bool> done = (*before_release)->Query();
  ASSERT_TRUE(done.ok());
  EXPECT_TRUE(*done) << "buffer " << buffer0
                     << " handed to a new copy before the consumer's stream "
                        "passed its release";
  ASSERT_TRUE(consumer->Synchronize().ok());
  for (size_t s = 0; s < indices0.size(); ++s) {
    EXPECT_EQ(std::memcmp(read_back.data() + 37 * s,
                          dataset->Expected(indices0[s])[0].data(), 37),
              0)
        << "the consumer read batch 2's data in place of batch 0's";
  }
}

TEST(StaticDeviceBuffers, ReleasingABatchTwiceGivesItsBufferBackOnce) {
  auto dataset = std::make_shared<PatternDataset>(40);
  CallerBuffers buffers(3, PatternBytes(2));
  absl::StatusOr<Loader> loader = LoaderBuilder(dataset)
                                      .batch_size(2)
                                      .static_device_buffers(buffers.views())
                                      .device(Device::Host())
                                      .Build();
  ASSERT_TRUE(loader.ok()) << loader.status();
  absl::StatusOr<std::optional<DeviceBatch>> first = loader->Next();
  ASSERT_TRUE(first.ok() && first->has_value()) << first.status();
  ASSERT_TRUE((*first)->Release().ok());
  ASSERT_TRUE((*first)->Release().ok());  // idempotent
  EXPECT_EQ((*first)->buffer_index(), -1);
  // Were the buffer given back twice, two held batches would share it.
  std::vector<DeviceBatch> held;
  std::set<int> indices;
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<std::optional<DeviceBatch>> next = loader->Next();
    ASSERT_TRUE(next.ok() && next->has_value()) << next.status();
    EXPECT_TRUE(indices.insert((*next)->buffer_index()).second)
        << "two held batches in buffer " << (*next)->buffer_index();
    held.push_back(std::move(**next));
  }
  for (const DeviceBatch& batch : held) {
    ExpectInItsBuffer(*dataset, batch, buffers, loader->layout());
  }
  // All three held: no fourth batch can land anywhere.
  absl::StatusOr<std::optional<DeviceBatch>> stuck = loader->Next();
  EXPECT_EQ(stuck.status().code(), absl::StatusCode::kFailedPrecondition)
      << stuck.status();
  EXPECT_THAT(std::string(stuck.status().message()),
              HasSubstr("holds all 3 device buffers"));
}

TEST(StaticDeviceBuffers, BatchesOutliveTheLoaderInTheCallersMemory) {
  auto dataset = std::make_shared<PatternDataset>(10);
  CallerBuffers buffers(2, PatternBytes(2));
  std::optional<DeviceBatch> kept;
  {
    absl::StatusOr<Loader> loader = LoaderBuilder(dataset)
                                        .batch_size(2)
                                        .static_device_buffers(buffers.views())
                                        .device(Device::Host())
                                        .Build();
    ASSERT_TRUE(loader.ok()) << loader.status();
    absl::StatusOr<std::optional<DeviceBatch>> next = loader->Next();
    ASSERT_TRUE(next.ok() && next->has_value()) << next.status();
    kept = std::move(*next);
  }
  ASSERT_GE(kept->buffer_index(), 0);
  EXPECT_EQ(kept->field(0).data, buffers.data(kept->buffer_index()));
  EXPECT_EQ(
      std::memcmp(kept->field(0).data, dataset->Expected(0)[0].data(), 37), 0);
  EXPECT_TRUE(kept->Release().ok());
}

TEST(StaticDeviceBuffers, RestartingAnEpochKeepsUsingTheCallersBuffers) {
  auto dataset = std::make_shared<PatternDataset>(12);
  CallerBuffers buffers(2, PatternBytes(4));
  absl::StatusOr<Loader> loader = LoaderBuilder(dataset)
                                      .batch_size(4)
                                      .num_workers(1)
                                      .static_device_buffers(buffers.views())
                                      .device(Device::Host())
                                      .Build();
  ASSERT_TRUE(loader.ok()) << loader.status();
  absl::StatusOr<std::optional<DeviceBatch>> partial = loader->Next();
  ASSERT_TRUE(partial.ok() && partial->has_value()) << partial.status();
  ASSERT_TRUE((*partial)->Release().ok());
  ASSERT_TRUE(loader->StartEpoch(1).ok());
  const DrainedEpoch epoch =
      DrainEpoch(*loader, {.on_batch = [&](const DeviceBatch& batch) {
        ExpectInItsBuffer(*dataset, batch, buffers, loader->layout());
      }});
  ASSERT_TRUE(epoch.status.ok()) << epoch.status;
  EXPECT_EQ(epoch.indices(),
            (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}));
}

TEST(StaticDeviceBuffers, OneLoaderAtATimePerBuffer) {
  // A second loader writing the buffers could overwrite a batch the first
  // one's consumer still reads: refused while the first loader, or a batch
  // of it, lives.
  auto dataset = std::make_shared<PatternDataset>(12);
  CallerBuffers buffers(2, PatternBytes(4));
  CallerBuffers others(2, PatternBytes(4));
  auto build = [&](const CallerBuffers& b) {
    return LoaderBuilder(dataset)
        .batch_size(4)
        .static_device_buffers(b.views())
        .device(Device::Host())
        .Build();
  };
  std::optional<DeviceBatch> kept;
  {
    absl::StatusOr<Loader> first = build(buffers);
    ASSERT_TRUE(first.ok()) << first.status();
    absl::StatusOr<Loader> second = build(buffers);
    EXPECT_EQ(second.status().code(), absl::StatusCode::kFailedPrecondition)
        << second.status();
    EXPECT_THAT(std::string(second.status().message()),
                HasSubstr("static device buffer 0 of 2"));
    EXPECT_THAT(std::string(second.status().message()),
                HasSubstr("in use by another loader"));
    EXPECT_TRUE(build(others).ok()) << "other memory is free to use";
    absl::StatusOr<std::optional<DeviceBatch>> next = first->Next();
    ASSERT_TRUE(next.ok() && next->has_value()) << next.status();
    kept = std::move(*next);
  }
  EXPECT_EQ(build(buffers).status().code(),
            absl::StatusCode::kFailedPrecondition)
      << "a batch of the first loader is still held";
  ASSERT_TRUE(kept->Release().ok());
  kept.reset();
  absl::StatusOr<Loader> again = build(buffers);
  ASSERT_TRUE(again.ok()) << again.status();
  const DrainedEpoch epoch = DrainEpoch(*again);
  ASSERT_TRUE(epoch.status.ok()) << epoch.status;
  EXPECT_EQ(epoch.batches.size(), 3u);
}

// Returns Build()'s status for `buffers` over PatternDataset batches of 4.
absl::Status BuildWith(std::vector<StaticDeviceBuffer> buffers) {
  return LoaderBuilder(std::make_shared<PatternDataset>(8))
      .batch_size(4)
      .static_device_buffers(std::move(buffers))
      .device(Device::Host())
      .Build()
      .status();
}

TEST(StaticDeviceBuffers, RefusesEachBadBufferNamingIt) {
  const size_t bytes = PatternBytes(4);
  CallerBuffers memory(4, 2 * bytes);
  struct Case {
    std::string what;
    std::vector<StaticDeviceBuffer> buffers;
    std::vector<std::string> mentions;
  };
  const std::vector<Case> cases = {
      {"a null pointer",
       {{memory.data(0), bytes}, {nullptr, bytes}},
       {"static device buffer 1 of 2", "null pointer"}},
      {"too small",
       {{memory.data(0), bytes},
        {memory.data(1), bytes},
        {memory.data(2), bytes - 1}},
       {"static device buffer 2 of 3", "too small",
        absl::StrCat("needs ", bytes, " bytes")}},
      {"misaligned",
       {{memory.data(0) + 8, bytes}, {memory.data(1), bytes}},
       {"static device buffer 0 of 2", "not aligned to 256"}},
      {"overlapping",
       {{memory.data(0), 2 * bytes},
        {memory.data(0) + (bytes + 255) / 256 * 256 - 256, bytes}},
       {"static device buffer 1 of 2", "overlaps static device buffer 0"}},
      {"the same buffer twice",
       {{memory.data(3), bytes}, {memory.data(3), bytes}},
       {"static device buffer 1 of 2", "overlaps static device buffer 0"}},
      {"too few",
       {{memory.data(0), bytes}},
       {"static_device_buffers", "1 buffers", "must be 2..64"}},
  };
  for (const Case& c : cases) {
    const absl::Status status = BuildWith(c.buffers);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument)
        << c.what << ": " << status;
    for (const std::string& m : c.mentions) {
      EXPECT_THAT(std::string(status.message()), HasSubstr(m)) << c.what;
    }
  }
  std::vector<StaticDeviceBuffer> too_many(65, {memory.data(0), bytes});
  const absl::Status status = BuildWith(too_many);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr("65 buffers"));
  // The good ones build.
  EXPECT_TRUE(
      BuildWith({{memory.data(0), bytes}, {memory.data(1), bytes}}).ok());
}

TEST(StaticDeviceBuffers, DeviceBuffersMustMatchTheirCount) {
  CallerBuffers memory(2, PatternBytes(4));
  const absl::Status status = LoaderBuilder(std::make_shared<PatternDataset>(8))
                                  .batch_size(4)
                                  .static_device_buffers(memory.views())
                                  .device_buffers(4)
                                  .device(Device::Host())
                                  .Build()
                                  .status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("option 'device_buffers' = 4: must equal the number "
                        "of static_device_buffers (2)"));
}

TEST(StaticDeviceBuffers, DeviceBufferBytesCountsThePaddingMask) {
  auto dataset = std::make_shared<PatternDataset>(10);
  absl::StatusOr<BatchLayout> plain = BatchLayout::Create(dataset->layout(), 4);
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(PatternBytes(4), plain->slot_bytes());
  absl::StatusOr<size_t> padded = LoaderBuilder(dataset)
                                      .batch_size(4)
                                      .pad_last_batch()
                                      .device_buffer_bytes();
  ASSERT_TRUE(padded.ok()) << padded.status();
  EXPECT_GT(*padded, plain->slot_bytes());
  // Buffers of the plain size are refused for the padded layout...
  CallerBuffers small(2, plain->slot_bytes());
  absl::Status status = LoaderBuilder(dataset)
                            .batch_size(4)
                            .pad_last_batch()
                            .static_device_buffers(small.views())
                            .device(Device::Host())
                            .Build()
                            .status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr("too small"));
  // ...and the padded size delivers full batches with their mask.
  CallerBuffers fits(2, *padded);
  absl::StatusOr<Loader> loader = LoaderBuilder(dataset)
                                      .batch_size(4)
                                      .pad_last_batch()
                                      .static_device_buffers(fits.views())
                                      .device(Device::Host())
                                      .Build();
  ASSERT_TRUE(loader.ok()) << loader.status();
  const DrainedEpoch epoch = DrainEpoch(*loader, {.copy_fields = true});
  ASSERT_TRUE(epoch.status.ok()) << epoch.status;
  ASSERT_EQ(epoch.batches.size(), 3u);
  EXPECT_EQ(epoch.batches[2].size, 4);
  EXPECT_EQ(epoch.batches[2].fields[3],
            (std::vector<std::byte>{std::byte{1}, std::byte{1}, std::byte{0},
                                    std::byte{0}}));
  EXPECT_THAT(std::string(LoaderBuilder(std::shared_ptr<const Dataset>())
                              .device_buffer_bytes()
                              .status()
                              .message()),
              HasSubstr("dataset is null"));
}

// "tokens" u16[9]: sample i holds i * 10 + k.
class TokenDataset : public Dataset {
 public:
  TokenDataset() {
    layout_ = *SampleLayout::Create(
        {{.name = "tokens", .dtype = DType::kUInt16, .shape = {9}}});
  }
  int64_t size() const override { return 16; }
  const SampleLayout& layout() const override { return layout_; }
  absl::Status Read(int64_t index, SampleView& out) const override {
    for (int k = 0; k < 9; ++k) {
      const auto token = static_cast<uint16_t>(index * 10 + k);
      std::memcpy(out.field(0).data() + 2 * k, &token, 2);
    }
    return absl::OkStatus();
  }

 private:
  SampleLayout layout_;
};

TEST(StaticDeviceBuffers, WithADeviceTransformTheBufferHoldsItsOutput) {
  auto dataset = std::make_shared<TokenDataset>();
  absl::StatusOr<std::shared_ptr<WidenTokens>> widen = WidenTokens::Create({});
  ASSERT_TRUE(widen.ok());
  LoaderBuilder builder(dataset);
  builder.batch_size(4).device_transform(*widen).device(Device::Host());
  absl::StatusOr<size_t> bytes = builder.device_buffer_bytes();
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  // The copied tokens and, after them, input and target: 2 × 4 × 8 × i64.
  EXPECT_GE(*bytes, size_t{2 * 4 * 8 * 8});
  CallerBuffers small(2, *bytes - 1);
  absl::Status status = LoaderBuilder(builder)
                            .static_device_buffers(small.views())
                            .Build()
                            .status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(std::string(status.message()),
              HasSubstr(absl::StrCat("needs ", *bytes, " bytes")));

  CallerBuffers buffers(2, *bytes);
  absl::StatusOr<Loader> loader =
      LoaderBuilder(builder).static_device_buffers(buffers.views()).Build();
  ASSERT_TRUE(loader.ok()) << loader.status();
  const DrainedEpoch epoch =
      DrainEpoch(*loader, {.on_batch = [&](const DeviceBatch& batch) {
        ASSERT_TRUE(batch.WaitOnHost().ok());
        const std::byte* base = buffers.data(batch.buffer_index());
        absl::StatusOr<FieldView> input = batch.field("input");
        absl::StatusOr<FieldView> target = batch.field("target");
        ASSERT_TRUE(input.ok() && target.ok());
        for (const FieldView* f : {&*input, &*target}) {
          const auto* p = static_cast<const std::byte*>(f->data);
          EXPECT_TRUE(p >= base && p + f->bytes <= base + *bytes)
              << f->name << " outside static buffer " << batch.buffer_index();
        }
        for (int64_t s = 0; s < 4; ++s) {
          const int64_t i = batch.sample_indices()[s];
          for (int k = 0; k < 8; ++k) {
            EXPECT_EQ(input->data_as<int64_t>()[s * 8 + k], i * 10 + k);
            EXPECT_EQ(target->data_as<int64_t>()[s * 8 + k], i * 10 + k + 1);
          }
        }
      }});
  ASSERT_TRUE(epoch.status.ok()) << epoch.status;
  EXPECT_EQ(epoch.batches.size(), 4u);
}

TEST(StaticDeviceBuffers, TheGatherPathStepsAside) {
  auto dataset = std::make_shared<PatternDataset>(8);
  CallerBuffers buffers(2, PatternBytes(4));
  const absl::Status on = LoaderBuilder(dataset)
                              .batch_size(4)
                              .gather(GatherMode::kOn)
                              .static_device_buffers(buffers.views())
                              .device(Device::Host())
                              .Build()
                              .status();
  EXPECT_EQ(on.code(), absl::StatusCode::kFailedPrecondition) << on;
  EXPECT_THAT(std::string(on.message()),
              HasSubstr("static_device_buffers are set"));
  absl::StatusOr<Loader> loader = LoaderBuilder(dataset)
                                      .batch_size(4)
                                      .gather(GatherMode::kAuto)
                                      .static_device_buffers(buffers.views())
                                      .device(Device::Host())
                                      .Build();
  ASSERT_TRUE(loader.ok()) << loader.status();
  EXPECT_THAT(loader->stats().gather_fallback,
              HasSubstr("static_device_buffers are set"));
  const DrainedEpoch epoch =
      DrainEpoch(*loader, {.on_batch = [&](const DeviceBatch& batch) {
        ExpectInItsBuffer(*dataset, batch, buffers, loader->layout());
      }});
  ASSERT_TRUE(epoch.status.ok()) << epoch.status;
  EXPECT_EQ(epoch.batches.size(), 2u);
}

}  // namespace
}  // namespace pinwheel
