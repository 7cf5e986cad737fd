// The device stage (transfer/device_transform.h) on the host backend: what
// the consumer sees, the layout checks at Build(), the recycling of the
// output buffers, the interplay with release and fences, and NormalizeImage's
// arithmetic (the CUDA kernel's bits: see the *_CUDA cases).
#include "transfer/device_transform.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <memory>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

#include "loader/dataset.h"
#include "loader/loader.h"
#include "loader/loader_builder.h"
#include "tests/support/skip_without_gpu.h"
#include "tests/support/test_datasets.h"
#include "transfer/device.h"
#include "transfer/device_stage/transform_writer.h"
#include "transfer/internal/float16.h"
#include "transfer/normalize_image.h"
#include "transfer/transfer_stage.h"

namespace pinwheel {
namespace {

using ::testing::HasSubstr;
using testing_support::CopyToHost;

constexpr int64_t kHeight = 5;
constexpr int64_t kWidth = 7;
constexpr int64_t kChannels = 3;

uint8_t Pixel(int64_t index, int64_t y, int64_t x, int64_t c) {
  return static_cast<uint8_t>((index * 37 + y * 11 + x * 5 + c * 101) & 0xff);
}

// Sample i: "image" u8 HWC [5, 7, 3] (or CHW [3, 5, 7]) of Pixel(i, ...),
// "label" i64[] = i * 3 + 1.
class Images : public Dataset {
 public:
  Images(int64_t size, bool hwc) : size_(size), hwc_(hwc) {
    layout_ = *SampleLayout::Create({
        {.name = "image",
         .dtype = DType::kUInt8,
         .shape = hwc ? std::vector<int64_t>{kHeight, kWidth, kChannels}
                      : std::vector<int64_t>{kChannels, kHeight, kWidth}},
        {.name = "label", .dtype = DType::kInt64, .shape = {}},
    });
  }
  int64_t size() const override { return size_; }
  const SampleLayout& layout() const override { return layout_; }
  absl::Status Read(int64_t i, SampleView& out) const override {
    uint8_t* image = out.field_as<uint8_t>(0).data();
    for (int64_t y = 0; y < kHeight; ++y) {
      for (int64_t x = 0; x < kWidth; ++x) {
        for (int64_t c = 0; c < kChannels; ++c) {
          const int64_t at = hwc_ ? (y * kWidth + x) * kChannels + c
                                  : (c * kHeight + y) * kWidth + x;
          image[at] = Pixel(i, y, x, c);
        }
      }
    }
    out.field_as<int64_t>(1)[0] = i * 3 + 1;
    return absl::OkStatus();
  }

 private:
  int64_t size_;
  bool hwc_;
  SampleLayout layout_;
};

const std::vector<float> kMean = {123.675f, 116.28f, 103.53f};
const std::vector<float> kStd = {58.395f, 57.12f, 57.375f};

std::shared_ptr<NormalizeImage> Normalize(ImageLayout layout, DType dtype) {
  absl::StatusOr<std::shared_ptr<NormalizeImage>> t =
      NormalizeImage::Create({.field = "image",
                              .input_layout = layout,
                              .output_dtype = dtype,
                              .mean = kMean,
                              .std = kStd});
  EXPECT_TRUE(t.ok()) << t.status();
  return *t;
}

// The reference: (x - mean) * (1 / std) in f32, one rounding each.
float Reference(int64_t i, int64_t c, int64_t y, int64_t x) {
  const float centred = static_cast<float>(Pixel(i, y, x, c)) - kMean[c];
  return centred * (1.0f / kStd[c]);
}

uint32_t Bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

absl::StatusOr<Loader> Build(std::shared_ptr<const Dataset> dataset,
                             std::shared_ptr<const DeviceTransform> transform,
                             int device_buffers = 2, int workers = 2,
                             Device device = Device::Host()) {
  return LoaderBuilder(std::move(dataset))
      .batch_size(8)
      .num_workers(workers)
      .prefetch(4)
      .device_buffers(device_buffers)
      .device(device)
      .device_transform(std::move(transform))
      .Build();
}

// Checks one delivered batch of normalised images against the reference,
// bit for bit.
void ExpectNormalized(const DeviceBatch& batch, DType dtype) {
  ASSERT_EQ(batch.num_fields(), 2);
  const FieldView& image = batch.field(0);
  EXPECT_EQ(image.name, "image");
  EXPECT_EQ(image.dtype, dtype);
  EXPECT_EQ(image.shape,
            (std::vector<int64_t>{batch.size(), kChannels, kHeight, kWidth}));
  const FieldView& label = batch.field(1);
  EXPECT_EQ(label.name, "label");
  const std::vector<std::byte> pixels = CopyToHost(image, batch.device());
  const std::vector<std::byte> labels = CopyToHost(label, batch.device());
  ASSERT_EQ(pixels.size(),
            static_cast<size_t>(batch.size() * kChannels * kHeight * kWidth) *
                DTypeSize(dtype));
  for (int64_t p = 0; p < batch.size(); ++p) {
    const int64_t i = batch.sample_indices()[p];
    int64_t value;
    std::memcpy(&value, labels.data() + 8 * p, 8);
    EXPECT_EQ(value, i * 3 + 1);
    for (int64_t c = 0; c < kChannels; ++c) {
      for (int64_t y = 0; y < kHeight; ++y) {
        for (int64_t x = 0; x < kWidth; ++x) {
          const size_t at = static_cast<size_t>(
              ((p * kChannels + c) * kHeight + y) * kWidth + x);
          const float want = Reference(i, c, y, x);
          if (dtype == DType::kFloat32) {
            float got;
            std::memcpy(&got, pixels.data() + 4 * at, 4);
            ASSERT_EQ(Bits(got), Bits(want)) << i << " " << c << " " << y;
          } else {
            uint16_t got;
            std::memcpy(&got, pixels.data() + 2 * at, 2);
            const uint16_t expected = dtype == DType::kFloat16
                                          ? internal::FloatToHalfBits(want)
                                          : internal::FloatToBFloat16Bits(want);
            ASSERT_EQ(got, expected) << i << " " << c << " " << y;
          }
        }
      }
    }
  }
}

// Reads every batch of one epoch, checking each; returns the batch count.
int64_t CheckEpoch(Loader& loader, DType dtype) {
  int64_t batches = 0;
  while (true) {
    absl::StatusOr<std::optional<DeviceBatch>> next = loader.Next();
    EXPECT_TRUE(next.ok()) << next.status();
    if (!next.ok() || !next->has_value()) break;
    EXPECT_TRUE((*next)->WaitOnHost().ok());
    ExpectNormalized(**next, dtype);
    EXPECT_TRUE((*next)->Release().ok());
    ++batches;
  }
  return batches;
}

TEST(NormalizeImage, TurnsHwcOrChwBytesIntoChwValuesOnTheHostBackend) {
  for (bool hwc : {true, false}) {
    for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
      SCOPED_TRACE(absl::StrCat(hwc ? "HWC " : "CHW ", DTypeName(dtype)));
      absl::StatusOr<Loader> loader =
          Build(std::make_shared<Images>(37, hwc),
                Normalize(hwc ? ImageLayout::kHWC : ImageLayout::kCHW, dtype));
      ASSERT_TRUE(loader.ok()) << loader.status();
      EXPECT_EQ(CheckEpoch(*loader, dtype), 5);  // the last one holds 5
    }
  }
}

TEST(NormalizeImage, WorksWithReadsOnTheConsumersThread) {
  absl::StatusOr<Loader> loader =
      Build(std::make_shared<Images>(20, true),
            Normalize(ImageLayout::kHWC, DType::kFloat32), 1, /*workers=*/0);
  ASSERT_TRUE(loader.ok()) << loader.status();
  EXPECT_EQ(CheckEpoch(*loader, DType::kFloat32), 3);
}

// Expects `layout` to describe each field of `batch`: field(f) is
// layout.fields()[f] (name, dtype, per-sample shape), in that order.
void ExpectLayoutDescribes(const BatchLayout& layout,
                           const DeviceBatch& batch) {
  ASSERT_EQ(layout.num_fields(), batch.num_fields());
  for (int f = 0; f < batch.num_fields(); ++f) {
    const FieldSpec& spec = layout.fields()[f];
    const FieldView& field = batch.field(f);
    EXPECT_EQ(spec.name, field.name) << "field " << f;
    EXPECT_EQ(spec.dtype, field.dtype) << "field " << f;
    std::vector<int64_t> shape = {batch.size()};
    shape.insert(shape.end(), spec.shape.begin(), spec.shape.end());
    EXPECT_EQ(shape, field.shape) << "field " << f;
  }
}

TEST(NormalizeImage, LoaderLayoutIsWhatTheBatchesCarryAndInputLayoutTheImages) {
  auto images = std::make_shared<Images>(16, /*hwc=*/true);
  absl::StatusOr<Loader> loader = Build(
      images, Normalize(ImageLayout::kHWC, DType::kBFloat16), 2, /*workers=*/1);
  ASSERT_TRUE(loader.ok()) << loader.status();
  // The consumer's view: the normalised image, then the kept label.
  const BatchLayout& layout = loader->layout();
  EXPECT_EQ(layout.batch_size(), 8);
  ASSERT_EQ(layout.num_fields(), 2);
  EXPECT_EQ(layout.fields()[0].ToString(), "image bf16[3,5,7]");
  EXPECT_EQ(layout.fields()[1].ToString(), "label i64[]");
  EXPECT_EQ(layout.sample().FieldIndex("label"), 1);
  // Before the transform: the dataset's u8 HWC images.
  EXPECT_EQ(loader->input_layout().sample(), images->layout());
  EXPECT_EQ(loader->input_layout().batch_size(), 8);
  absl::StatusOr<std::optional<DeviceBatch>> next = loader->Next();
  ASSERT_TRUE(next.ok() && next->has_value()) << next.status();
  ExpectLayoutDescribes(layout, **next);
  ASSERT_TRUE((*next)->Release().ok());
}

TEST(NormalizeImage, WithoutATransformBothLayoutsAreTheDatasets) {
  auto images = std::make_shared<Images>(16, /*hwc=*/true);
  absl::StatusOr<Loader> loader = Build(images, nullptr, 2, /*workers=*/1);
  ASSERT_TRUE(loader.ok()) << loader.status();
  EXPECT_EQ(loader->layout().sample(), images->layout());
  EXPECT_EQ(loader->input_layout().sample(), images->layout());
  absl::StatusOr<std::optional<DeviceBatch>> next = loader->Next();
  ASSERT_TRUE(next.ok() && next->has_value()) << next.status();
  ExpectLayoutDescribes(loader->layout(), **next);
  ASSERT_TRUE((*next)->Release().ok());
}

TEST(NormalizeImage, CreateRefusesBadOptionsNamingThem) {
  auto create = [](NormalizeImageOptions o) {
    return NormalizeImage::Create(std::move(o)).status();
  };
  absl::Status s = create({.mean = {1, 2}, .std = {1}});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("'std'"));
  s = create({.mean = {}, .std = {}});
  EXPECT_THAT(s.message(), HasSubstr("'mean'"));
  s = create({.mean = {1, 2, 3}, .std = {1, 0, 1}});
  EXPECT_THAT(s.message(), HasSubstr("std[1] = 0"));
  s = create({.mean = {1, NAN, 3}, .std = {1, 1, 1}});
  EXPECT_THAT(s.message(), HasSubstr("mean[1]"));
  s = create({.output_dtype = DType::kInt32, .mean = {1}, .std = {1}});
  EXPECT_THAT(s.message(), HasSubstr("'output_dtype': i32"));
  s = create({.field = "", .mean = {1}, .std = {1}});
  EXPECT_THAT(s.message(), HasSubstr("'field'"));
  EXPECT_TRUE(create({.mean = {1}, .std = {2}}).ok());
}

TEST(NormalizeImage, BuildRefusesALayoutItCannotReadNamingFieldAndExpectation) {
  // Wrong channel count (HWC read as CHW: 5 is not 3).
  absl::StatusOr<Loader> loader =
      Build(std::make_shared<Images>(8, true),
            Normalize(ImageLayout::kCHW, DType::kFloat32));
  ASSERT_FALSE(loader.ok());
  EXPECT_EQ(loader.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(loader.status().message(),
              HasSubstr("option 'device_transform'"));
  EXPECT_THAT(loader.status().message(), HasSubstr("'normalize_image'"));
  EXPECT_THAT(loader.status().message(), HasSubstr("image u8[5,7,3]"));
  EXPECT_THAT(loader.status().message(), HasSubstr("expected u8[3,H,W]"));
  // Not u8.
  auto floats = std::make_shared<testing_support::PatternDataset>(8);
  absl::StatusOr<std::shared_ptr<NormalizeImage>> on_c =
      NormalizeImage::Create({.field = "c", .mean = {0}, .std = {1}});
  ASSERT_TRUE(on_c.ok());
  loader = Build(floats, *on_c);
  ASSERT_FALSE(loader.ok());
  EXPECT_THAT(loader.status().message(), HasSubstr("'c f32[5]'"));
  EXPECT_THAT(loader.status().message(), HasSubstr("expected u8[H,W,1]"));
  // Missing: the message lists the fields there are.
  loader = Build(floats, Normalize(ImageLayout::kHWC, DType::kFloat32));
  ASSERT_FALSE(loader.ok());
  EXPECT_THAT(loader.status().message(),
              HasSubstr("'image' is not in the batch (a u8[37]"));
}

// A transform for the stage's own rules: writes "sum" i64[] = a's bytes
// summed; keeps the other fields; optionally fails, or names its output
// after a kept field.
class SumBytes : public DeviceTransform {
 public:
  explicit SumBytes(std::string output = "sum", bool fail = false)
      : output_(std::move(output)), fail_(fail) {}
  std::string name() const override { return "sum_bytes"; }
  absl::StatusOr<SampleLayout> OutputLayout(
      const BatchLayout& input) const override {
    if (input.sample().FieldIndex("a") < 0) {
      return absl::InvalidArgumentError("no field 'a'");
    }
    return SampleLayout::Create(
        {{.name = output_, .dtype = DType::kInt64, .shape = {}}});
  }
  bool Consumes(absl::string_view name) const override { return name == "a"; }
  absl::Status Run(const DeviceTransformBatch& batch,
                   const Stream& stream) const override {
    runs_.fetch_add(1);
    if (fail_) return absl::DataLossError("the transform broke");
    const FieldView a = batch.input[0];
    const FieldView sum = batch.output[0];
    const int64_t samples = batch.samples;
    return stream.EnqueueHostTask([a, sum, samples] {
      const size_t row = a.bytes / static_cast<size_t>(a.shape[0]);
      for (int64_t p = 0; p < samples; ++p) {
        int64_t total = 0;
        for (size_t k = 0; k < row; ++k) {
          total += static_cast<int64_t>(
              static_cast<const uint8_t*>(a.data)[p * row + k]);
        }
        sum.data_as<int64_t>()[p] = total;
      }
    });
  }
  int64_t runs() const { return runs_.load(); }

 private:
  std::string output_;
  bool fail_;
  mutable std::atomic<int64_t> runs_{0};
};

int64_t ExpectedSum(int64_t i) {
  int64_t total = 0;
  for (int k = 0; k < 37; ++k) total += (i * 131 + k) & 0xff;
  return total;
}

TEST(DeviceStage, DeliversTheOutputsThenTheKeptInputs) {
  auto transform = std::make_shared<SumBytes>();
  absl::StatusOr<Loader> loader =
      Build(std::make_shared<testing_support::PatternDataset>(20), transform);
  ASSERT_TRUE(loader.ok()) << loader.status();
  absl::StatusOr<std::optional<DeviceBatch>> next = loader->Next();
  ASSERT_TRUE(next.ok() && next->has_value());
  DeviceBatch& batch = **next;
  ASSERT_TRUE(batch.WaitOnHost().ok());
  ASSERT_EQ(batch.num_fields(), 3);
  EXPECT_EQ(batch.field(0).name, "sum");
  EXPECT_EQ(batch.field(1).name, "b");
  EXPECT_EQ(batch.field(2).name, "c");
  EXPECT_EQ(batch.field(0).shape, (std::vector<int64_t>{8}));
  EXPECT_EQ(batch.field(2).shape, (std::vector<int64_t>{8, 5}));
  EXPECT_THAT(batch.field("a").status().code(), absl::StatusCode::kNotFound);
  const std::vector<std::byte> sums = CopyToHost(batch.field(0), Device());
  const std::vector<std::byte> bs = CopyToHost(batch.field(1), Device());
  for (int64_t p = 0; p < 8; ++p) {
    int64_t sum, b;
    std::memcpy(&sum, sums.data() + 8 * p, 8);
    std::memcpy(&b, bs.data() + 8 * p, 8);
    EXPECT_EQ(sum, ExpectedSum(p));
    EXPECT_EQ(b, p * 7 + 1);
  }
  ASSERT_TRUE(batch.Release().ok());
}

// Sample i: PatternDataset's "a" u8[37], then "v" i32, variable-length up
// to 4: i % 5 elements of value i.
class RaggedPattern : public Dataset {
 public:
  explicit RaggedPattern(int64_t size) : size_(size) {
    layout_ = *SampleLayout::Create({
        {.name = "a", .dtype = DType::kUInt8, .shape = {37}},
        {.name = "v",
         .dtype = DType::kInt32,
         .shape = {4},
         .variable_length = true},
    });
  }
  int64_t size() const override { return size_; }
  const SampleLayout& layout() const override { return layout_; }
  absl::Status Read(int64_t i, SampleView& out) const override {
    for (int k = 0; k < 37; ++k) {
      out.field_as<uint8_t>(0)[k] = static_cast<uint8_t>((i * 131 + k) & 0xff);
    }
    const int64_t length = i % 5;
    for (int64_t k = 0; k < length; ++k) {
      out.field_as<int32_t>(1)[k] = static_cast<int32_t>(i);
    }
    out.set_length(1, length);
    return absl::OkStatus();
  }

 private:
  int64_t size_;
  SampleLayout layout_;
};

// SumBytes that also consumes "v_length": "v" is delivered without it.
class SumBytesDroppingLength : public SumBytes {
 public:
  bool Consumes(absl::string_view name) const override {
    return name == "a" || name == "v_length";
  }
};

TEST(DeviceStage, LoaderLayoutDescribesTheDeliveredFieldsInTheirOrder) {
  absl::StatusOr<Loader> fixed =
      Build(std::make_shared<testing_support::PatternDataset>(20),
            std::make_shared<SumBytes>());
  ASSERT_TRUE(fixed.ok()) << fixed.status();
  EXPECT_EQ(fixed->layout().sample().ToString(),
            "sum i64[], b i64[], c f32[5]");
  EXPECT_EQ(fixed->input_layout().sample().ToString(),
            "a u8[37], b i64[], c f32[5]");

  // A kept variable-length input stays one, its length after the fields.
  absl::StatusOr<Loader> ragged =
      Build(std::make_shared<RaggedPattern>(20), std::make_shared<SumBytes>());
  ASSERT_TRUE(ragged.ok()) << ragged.status();
  const BatchLayout& layout = ragged->layout();
  ASSERT_EQ(layout.num_fields(), 3);
  EXPECT_EQ(layout.fields()[0].name, "sum");
  EXPECT_EQ(layout.fields()[1].name, "v");
  EXPECT_TRUE(layout.fields()[1].variable_length);
  EXPECT_EQ(layout.length_field(1), 2);
  EXPECT_EQ(layout.fields()[2].name, "v_length");

  // Its length consumed, it is delivered as a plain field of its maximum.
  absl::StatusOr<Loader> dropped =
      Build(std::make_shared<RaggedPattern>(20),
            std::make_shared<SumBytesDroppingLength>());
  ASSERT_TRUE(dropped.ok()) << dropped.status();
  EXPECT_EQ(dropped->layout().sample().ToString(), "sum i64[], v i32[4]");
  EXPECT_EQ(dropped->layout().length_field(1), -1);

  for (Loader* loader : {&*fixed, &*ragged, &*dropped}) {
    absl::StatusOr<std::optional<DeviceBatch>> next = loader->Next();
    ASSERT_TRUE(next.ok() && next->has_value()) << next.status();
    ASSERT_TRUE((*next)->WaitOnHost().ok());
    ExpectLayoutDescribes(loader->layout(), **next);
    ASSERT_TRUE((*next)->Release().ok());
  }
}

TEST(DeviceStage, BuildRefusesAnOutputNamedLikeAKeptInput) {
  absl::StatusOr<Loader> loader =
      Build(std::make_shared<testing_support::PatternDataset>(8),
            std::make_shared<SumBytes>("b"));
  ASSERT_FALSE(loader.ok());
  EXPECT_EQ(loader.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(loader.status().message(),
              HasSubstr("'sum_bytes': output field 'b' has the name of an "
                        "input field it keeps"));
}

TEST(DeviceStage, AFailedRunIsDeliveredNamingTheTransformAndTheBatch) {
  absl::StatusOr<Loader> loader =
      Build(std::make_shared<testing_support::PatternDataset>(8),
            std::make_shared<SumBytes>("sum", /*fail=*/true));
  ASSERT_TRUE(loader.ok()) << loader.status();
  absl::StatusOr<std::optional<DeviceBatch>> next = loader->Next();
  ASSERT_FALSE(next.ok());
  EXPECT_EQ(next.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(next.status().message(), HasSubstr("batch 0 of epoch 0"));
  EXPECT_THAT(next.status().message(),
              HasSubstr("device transform 'sum_bytes': the transform broke"));
}

// SumBytes, but its Run() or its OutputLayout() throws.
class ThrowingSum final : public SumBytes {
 public:
  explicit ThrowingSum(bool in_layout) : in_layout_(in_layout) {}
  absl::StatusOr<SampleLayout> OutputLayout(
      const BatchLayout& input) const override {
    if (in_layout_) throw std::runtime_error("no layout today");
    return SumBytes::OutputLayout(input);
  }
  absl::Status Run(const DeviceTransformBatch&, const Stream&) const override {
    throw std::runtime_error("no run today");
  }

 private:
  bool in_layout_;
};

TEST(DeviceStage, AThrowingTransformIsAStatusNamingTheCall) {
  absl::StatusOr<Loader> refused =
      Build(std::make_shared<testing_support::PatternDataset>(8),
            std::make_shared<ThrowingSum>(/*in_layout=*/true));
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.status().message(),
              HasSubstr("'sum_bytes': DeviceTransform::OutputLayout threw no "
                        "layout today"));
  absl::StatusOr<Loader> loader =
      Build(std::make_shared<testing_support::PatternDataset>(8),
            std::make_shared<ThrowingSum>(/*in_layout=*/false));
  ASSERT_TRUE(loader.ok()) << loader.status();
  absl::StatusOr<std::optional<DeviceBatch>> next = loader->Next();
  ASSERT_FALSE(next.ok());
  EXPECT_THAT(next.status().message(), HasSubstr("batch 0 of epoch 0"));
  EXPECT_THAT(next.status().message(),
              HasSubstr("device transform 'sum_bytes': DeviceTransform::Run "
                        "threw no run today"));
}

// A transform that cannot produce the samples whose dataset index is in
// `bad` (as the GPU JPEG decoder with a corrupt file): writes "sum" like
// SumBytes for the others, packed at the front and zeros after them; under
// kSkipSample lists the bad ones in DeviceTransformBatch::skipped, else
// fails the call naming the first.
class SumOrSkip : public DeviceTransform {
 public:
  explicit SumOrSkip(std::set<int64_t> bad) : bad_(std::move(bad)) {}
  std::string name() const override { return "sum_or_skip"; }
  absl::StatusOr<SampleLayout> OutputLayout(const BatchLayout&) const override {
    return SampleLayout::Create(
        {{.name = "sum", .dtype = DType::kInt64, .shape = {}}});
  }
  bool Consumes(absl::string_view name) const override { return name == "a"; }
  absl::Status Run(const DeviceTransformBatch& batch,
                   const Stream& stream) const override {
    std::vector<int64_t> good;
    for (int64_t p = 0; p < batch.samples - batch.padded; ++p) {
      const int64_t index = batch.sample_indices[p];
      if (bad_.count(index) == 0) {
        good.push_back(p);
        continue;
      }
      absl::Status cause = absl::DataLossError(absl::StrCat(
          "sample ", p, " of the batch (dataset index ", index, ") is bad"));
      if (batch.skipped == nullptr) return cause;
      batch.skipped->push_back({p, std::move(cause)});
    }
    const FieldView a = batch.input[0];
    const FieldView sum = batch.output[0];
    const int64_t samples = batch.samples;
    return stream.EnqueueHostTask([a, sum, good, samples] {
      const size_t row = a.bytes / static_cast<size_t>(a.shape[0]);
      for (size_t g = 0; g < static_cast<size_t>(samples); ++g) {
        int64_t total = 0;
        if (g < good.size()) {
          for (size_t k = 0; k < row; ++k) {
            total += static_cast<int64_t>(
                static_cast<const uint8_t*>(a.data)[good[g] * row + k]);
          }
        }
        sum.data_as<int64_t>()[g] = total;
      }
    });
  }

 private:
  const std::set<int64_t> bad_;
};

absl::StatusOr<Loader> BuildSkipping(std::set<int64_t> bad, ErrorPolicy policy,
                                     bool pad = false) {
  // Reads on the consumer's thread: nothing is read (and counted) ahead of
  // the batch Next() returns, so the counts below are exact.
  return LoaderBuilder(std::make_shared<testing_support::PatternDataset>(20))
      .batch_size(8)
      .num_workers(0)
      .prefetch(4)
      .device(Device::Host())
      .on_error(policy)
      .pad_last_batch(pad)
      .device_transform(std::make_shared<SumOrSkip>(std::move(bad)))
      .Build();
}

// Checks every delivered sample of `batch` (fields sum, b, c, [valid])
// against its dataset index; padding (index -1) must be all zeros.
void ExpectSamplesOfTheirIndices(const DeviceBatch& batch) {
  const testing_support::PatternDataset pattern(20);
  std::vector<std::vector<std::byte>> fields;
  for (int f = 0; f < batch.num_fields(); ++f) {
    fields.push_back(CopyToHost(batch.field(f), Device()));
  }
  for (int64_t p = 0; p < batch.size(); ++p) {
    const int64_t i = batch.sample_indices()[p];
    int64_t sum = 0;
    std::memcpy(&sum, fields[0].data() + 8 * p, 8);
    const std::vector<std::vector<std::byte>> want =
        i >= 0 ? pattern.Expected(i)
               : std::vector<std::vector<std::byte>>{
                     std::vector<std::byte>(37), std::vector<std::byte>(8),
                     std::vector<std::byte>(20)};
    EXPECT_EQ(sum, i >= 0 ? ExpectedSum(i) : 0) << "place " << p;
    EXPECT_EQ(std::memcmp(fields[1].data() + 8 * p, want[1].data(), 8), 0)
        << "b of place " << p << ", index " << i;
    EXPECT_EQ(std::memcmp(fields[2].data() + 20 * p, want[2].data(), 20), 0)
        << "c of place " << p << ", index " << i;
    if (batch.num_fields() == 4) {
      EXPECT_EQ(fields[3][p], std::byte(i >= 0 ? 1 : 0)) << "valid " << p;
    }
  }
}

TEST(DeviceStage, SamplesTheTransformSkipsAreLeftOutAndCounted) {
  // Runs of 1, 2 and 3 skipped samples, at a batch's start, middle and end.
  absl::StatusOr<Loader> loader =
      BuildSkipping({0, 1, 2, 10, 12, 13, 19}, ErrorPolicy::kSkipSample);
  ASSERT_TRUE(loader.ok()) << loader.status();
  const std::vector<std::vector<int64_t>> expected = {
      {3, 4, 5, 6, 7}, {8, 9, 11, 14, 15}, {16, 17, 18}};
  for (const std::vector<int64_t>& indices : expected) {
    absl::StatusOr<std::optional<DeviceBatch>> next = loader->Next();
    ASSERT_TRUE(next.ok() && next->has_value()) << next.status();
    DeviceBatch& batch = **next;
    ASSERT_TRUE(batch.WaitOnHost().ok());
    EXPECT_EQ(batch.size(), static_cast<int64_t>(indices.size()));
    EXPECT_EQ(std::vector<int64_t>(batch.sample_indices().begin(),
                                   batch.sample_indices().end()),
              indices);
    EXPECT_EQ(batch.field(0).shape[0], batch.size());
    ExpectSamplesOfTheirIndices(batch);
  }
  absl::StatusOr<std::optional<DeviceBatch>> end = loader->Next();
  ASSERT_TRUE(end.ok() && !end->has_value());
  const LoaderStats stats = loader->stats();
  EXPECT_EQ(stats.samples_skipped, 7);
  EXPECT_EQ(stats.transfer.samples_skipped, 7);
  EXPECT_EQ(stats.samples_delivered, 13);
  EXPECT_THAT(stats.transfer.last_skipped,
              HasSubstr("batch 2 of epoch 0: sample 3 of the batch (dataset "
                        "index 19) is bad"));
}

TEST(DeviceStage, UnderKStopASampleTheTransformCannotProduceFailsNamingIt) {
  absl::StatusOr<Loader> loader = BuildSkipping({10}, ErrorPolicy::kStop);
  ASSERT_TRUE(loader.ok()) << loader.status();
  absl::StatusOr<std::optional<DeviceBatch>> first = loader->Next();
  ASSERT_TRUE(first.ok() && first->has_value()) << first.status();
  absl::StatusOr<std::optional<DeviceBatch>> second = loader->Next();
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(second.status().message(), HasSubstr("batch 1 of epoch 0"));
  EXPECT_THAT(second.status().message(),
              HasSubstr("device transform 'sum_or_skip': sample 2 of the "
                        "batch (dataset index 10) is bad"));
  EXPECT_EQ(loader->stats().samples_skipped, 0);
}

TEST(DeviceStage, UnderPadLastBatchSkippedSamplesBecomePaddingAtTheEnd) {
  absl::StatusOr<Loader> loader =
      BuildSkipping({1, 17}, ErrorPolicy::kSkipSample, /*pad=*/true);
  ASSERT_TRUE(loader.ok()) << loader.status();
  const std::vector<std::vector<int64_t>> expected = {
      {0, 2, 3, 4, 5, 6, 7, -1},
      {8, 9, 10, 11, 12, 13, 14, 15},
      {16, 18, 19, -1, -1, -1, -1, -1}};
  const int64_t padded[] = {1, 0, 5};
  for (size_t b = 0; b < expected.size(); ++b) {
    absl::StatusOr<std::optional<DeviceBatch>> next = loader->Next();
    ASSERT_TRUE(next.ok() && next->has_value()) << next.status();
    DeviceBatch& batch = **next;
    ASSERT_TRUE(batch.WaitOnHost().ok());
    EXPECT_EQ(batch.size(), 8);
    EXPECT_EQ(batch.info().padded, padded[b]) << "batch " << b;
    EXPECT_EQ(std::vector<int64_t>(batch.sample_indices().begin(),
                                   batch.sample_indices().end()),
              expected[b]);
    ASSERT_EQ(batch.num_fields(), 4);
    EXPECT_EQ(batch.field(3).name, "valid");
    ExpectSamplesOfTheirIndices(batch);
  }
  EXPECT_EQ(loader->stats().samples_skipped, 2);
}

TEST(DeviceStage, ABatchThatLosesEverySampleIsNotDelivered) {
  absl::StatusOr<Loader> loader =
      BuildSkipping({8, 9, 10, 11, 12, 13, 14, 15}, ErrorPolicy::kSkipSample);
  ASSERT_TRUE(loader.ok()) << loader.status();
  std::vector<int64_t> firsts;
  while (true) {
    absl::StatusOr<std::optional<DeviceBatch>> next = loader->Next();
    ASSERT_TRUE(next.ok()) << next.status();
    if (!next->has_value()) break;
    ASSERT_TRUE((*next)->WaitOnHost().ok());
    ExpectSamplesOfTheirIndices(**next);
    firsts.push_back((*next)->sample_indices()[0]);
  }
  EXPECT_EQ(firsts, (std::vector<int64_t>{0, 16}));
  EXPECT_EQ(loader->stats().samples_skipped, 8);
  EXPECT_EQ(loader->stats().batches_delivered, 2);
}

TEST(DeviceStage, RecyclesItsOutputBuffersWithoutGrowing) {
  auto transform = std::make_shared<SumBytes>();
  auto dataset = std::make_shared<testing_support::PatternDataset>(800);
  absl::StatusOr<Loader> loader = Build(dataset, transform, 3);
  ASSERT_TRUE(loader.ok()) << loader.status();
  const size_t device_bytes = loader->stats().device_bytes;
  std::set<void*> outputs;
  int64_t batches = 0;
  for (int epoch = 0; epoch < 3; ++epoch) {
    while (true) {
      absl::StatusOr<std::optional<DeviceBatch>> next = loader->Next();
      ASSERT_TRUE(next.ok()) << next.status();
      if (!next->has_value()) break;
      ASSERT_TRUE((*next)->WaitOnHost().ok());
      outputs.insert((*next)->field(0).data);
      int64_t sum;
      std::memcpy(&sum, CopyToHost((*next)->field(0), Device()).data(), 8);
      ASSERT_EQ(sum, ExpectedSum((*next)->sample_indices()[0]));
      ASSERT_TRUE((*next)->Release().ok());
      ++batches;
    }
  }
  EXPECT_EQ(batches, 300);
  // Every delivered batch was transformed once; a few more may have been
  // read ahead into the next epoch (prefetch 4 + 3 buffers).
  EXPECT_GE(transform->runs(), 300);
  EXPECT_LE(transform->runs(), 307);
  EXPECT_EQ(outputs.size(), 3u);  // one output region per device buffer
  EXPECT_EQ(loader->stats().device_bytes, device_bytes);
  // Each buffer holds the copy (8 x 296-byte samples, 256-aligned fields)
  // and then the output (8 x i64 = 64 bytes, one 256-byte aligned field).
  EXPECT_GT(device_bytes,
            3 * BatchLayout::Create(dataset->layout(), 8)->slot_bytes());
}

TEST(DeviceStage, AHeldBatchKeepsItsOutputWhileOthersFlow) {
  // A held batch's output is not overwritten: its buffer comes back only
  // behind its release (Note [release fences reuse]).
  absl::StatusOr<Loader> loader =
      Build(std::make_shared<Images>(200, true),
            Normalize(ImageLayout::kHWC, DType::kFloat32), 3);
  ASSERT_TRUE(loader.ok()) << loader.status();
  absl::StatusOr<std::optional<DeviceBatch>> held = loader->Next();
  ASSERT_TRUE(held.ok() && held->has_value());
  ASSERT_TRUE((*held)->WaitOnHost().ok());
  for (int k = 0; k < 15; ++k) {
    absl::StatusOr<std::optional<DeviceBatch>> next = loader->Next();
    ASSERT_TRUE(next.ok() && next->has_value()) << k;
    ASSERT_TRUE((*next)->WaitOnHost().ok());
    ExpectNormalized(**next, DType::kFloat32);
    ASSERT_TRUE((*next)->Release().ok());
  }
  ExpectNormalized(**held, DType::kFloat32);
  ASSERT_TRUE((*held)->Release().ok());
  // With every buffer held, Next() says so rather than hanging.
  std::vector<DeviceBatch> all;
  for (int k = 0; k < 3; ++k) {
    absl::StatusOr<std::optional<DeviceBatch>> next = loader->Next();
    ASSERT_TRUE(next.ok() && next->has_value());
    all.push_back(**std::move(next));
  }
  absl::StatusOr<std::optional<DeviceBatch>> stuck = loader->Next();
  EXPECT_EQ(stuck.status().code(), absl::StatusCode::kFailedPrecondition);
  for (DeviceBatch& batch : all) ASSERT_TRUE(batch.Release().ok());
}

TEST(DeviceStage, AHostStreamWaitsForTheTransformBeforeTheConsumer) {
  // The consumer's host stream (a created one) queues the wait for ready;
  // work queued behind it sees the transformed data.
  absl::StatusOr<Loader> loader =
      Build(std::make_shared<Images>(16, true),
            Normalize(ImageLayout::kHWC, DType::kFloat32));
  ASSERT_TRUE(loader.ok()) << loader.status();
  absl::StatusOr<Stream> consumer = Stream::Create(Device::Host());
  ASSERT_TRUE(consumer.ok());
  absl::StatusOr<std::optional<DeviceBatch>> next = loader->Next();
  ASSERT_TRUE(next.ok() && next->has_value());
  ASSERT_TRUE((*next)->WaitOn(*consumer).ok());
  float first = 0;
  const float* data = (*next)->field(0).data_as<float>();
  ASSERT_TRUE(
      consumer->EnqueueHostTask([&first, data] { first = data[0]; }).ok());
  ASSERT_TRUE(consumer->Synchronize().ok());
  EXPECT_EQ(Bits(first),
            Bits(Reference((*next)->sample_indices()[0], 0, 0, 0)));
  ASSERT_TRUE((*next)->Release(*consumer).ok());
  ASSERT_TRUE(consumer->Synchronize().ok());
}

// Like SumBytes, but reads 'a' from the pinned slot (host_input), later,
// as a GPU JPEG decoder reads the compressed bytes: its queued work sleeps
// first, giving the producer time to refill a slot that was let go early.
class SumHostBytesLate : public DeviceTransform {
 public:
  std::string name() const override { return "sum_host_bytes_late"; }
  absl::StatusOr<SampleLayout> OutputLayout(
      const BatchLayout& /*input*/) const override {
    return SampleLayout::Create(
        {{.name = "sum", .dtype = DType::kInt64, .shape = {}}});
  }
  bool Consumes(absl::string_view name) const override { return name == "a"; }
  bool ReadsHostInput() const override { return true; }
  absl::Status Run(const DeviceTransformBatch& batch,
                   const Stream& stream) const override {
    if (batch.host_input.empty()) return absl::InternalError("no host input");
    const FieldView a = batch.host_input[0];
    const FieldView sum = batch.output[0];
    const int64_t samples = batch.samples;
    return stream.EnqueueHostTask([a, sum, samples] {
      absl::SleepFor(absl::Milliseconds(3));
      const size_t row = a.bytes / static_cast<size_t>(a.shape[0]);
      for (int64_t p = 0; p < samples; ++p) {
        int64_t total = 0;
        for (size_t k = 0; k < row; ++k) {
          total += static_cast<int64_t>(
              static_cast<const uint8_t*>(a.data)[p * row + k]);
        }
        sum.data_as<int64_t>()[p] = total;
      }
    });
  }
};

TEST(DeviceStage, AHostReadingTransformSeesItsSlotUnchanged) {
  // 4 slots, 4 workers, 40 batches: with the slot fenced only by its copy,
  // the producer refills it while the transform still reads it.
  absl::StatusOr<Loader> loader =
      Build(std::make_shared<testing_support::PatternDataset>(320),
            std::make_shared<SumHostBytesLate>(), /*device_buffers=*/4,
            /*workers=*/4);
  ASSERT_TRUE(loader.ok()) << loader.status();
  int64_t batches = 0;
  for (;;) {
    absl::StatusOr<std::optional<DeviceBatch>> next = loader->Next();
    ASSERT_TRUE(next.ok()) << next.status();
    if (!next->has_value()) break;
    DeviceBatch& batch = **next;
    ASSERT_TRUE(batch.WaitOnHost().ok());
    const std::vector<std::byte> sums = CopyToHost(batch.field(0), Device());
    for (int64_t p = 0; p < batch.size(); ++p) {
      int64_t sum;
      std::memcpy(&sum, sums.data() + 8 * p, 8);
      ASSERT_EQ(sum, ExpectedSum(batch.sample_indices()[p]))
          << "batch " << batches << " sample " << p;
    }
    ASSERT_TRUE(batch.Release().ok());
    ++batches;
  }
  EXPECT_EQ(batches, 40);
}

// Sums "a" from the pinned slot, declaring it read only on the host (as
// the GPU JPEG decoder does with "jpeg"); fails the batch if the stage gave
// it a device copy of "a". With `host_only` = "b" it declares a field it
// keeps, which the stage refuses.
class SumOnTheHostOnly : public DeviceTransform {
 public:
  explicit SumOnTheHostOnly(std::string host_only = "a")
      : host_only_(std::move(host_only)) {}
  std::string name() const override { return "sum_on_the_host_only"; }
  absl::StatusOr<SampleLayout> OutputLayout(
      const BatchLayout& /*input*/) const override {
    return SampleLayout::Create(
        {{.name = "sum", .dtype = DType::kInt64, .shape = {}}});
  }
  bool Consumes(absl::string_view name) const override { return name == "a"; }
  bool ReadsHostInput() const override { return true; }
  bool ReadsOnlyOnHost(absl::string_view name) const override {
    return name == host_only_;
  }
  absl::Status Run(const DeviceTransformBatch& batch,
                   const Stream& stream) const override {
    if (batch.input[0].data != nullptr || batch.input[0].bytes != 0) {
      return absl::InternalError("'a' has device memory");
    }
    const FieldView a = batch.host_input[0];
    const FieldView sum = batch.output[0];
    const int64_t samples = batch.samples;
    return stream.EnqueueHostTask([a, sum, samples] {
      const size_t row = a.bytes / static_cast<size_t>(a.shape[0]);
      for (int64_t p = 0; p < samples; ++p) {
        int64_t total = 0;
        for (size_t k = 0; k < row; ++k) {
          total += static_cast<int64_t>(
              static_cast<const uint8_t*>(a.data)[p * row + k]);
        }
        sum.data_as<int64_t>()[p] = total;
      }
    });
  }

 private:
  const std::string host_only_;
};

TEST(DeviceStage, AFieldReadOnlyOnTheHostIsNeitherCopiedNorAllocated) {
  auto dataset = std::make_shared<testing_support::PatternDataset>(20);
  const BatchLayout layout = *BatchLayout::Create(dataset->layout(), 8);
  auto host_only = std::make_shared<SumOnTheHostOnly>();
  auto copied = std::make_shared<SumHostBytesLate>();
  // The device buffer: b and c from offset 0, then "sum"; no room for "a".
  const size_t bc = layout.field_offset(2) - layout.field_offset(1) + 8 * 20;
  const size_t sum_offset = (bc + 255) / 256 * 256;
  EXPECT_EQ(
      (*internal::TransformWriter::Create(layout, host_only))->buffer_bytes(),
      sum_offset + 256);
  EXPECT_EQ(
      (*internal::TransformWriter::Create(layout, copied))->buffer_bytes(),
      layout.slot_bytes() + 256);
  // Reads on the consumer's thread: nothing is copied ahead of the epoch,
  // so the byte count below is exact.
  absl::StatusOr<Loader> loader =
      Build(dataset, host_only, /*device_buffers=*/2, /*workers=*/0);
  ASSERT_TRUE(loader.ok()) << loader.status();
  int64_t samples = 0;
  for (;;) {
    absl::StatusOr<std::optional<DeviceBatch>> next = loader->Next();
    ASSERT_TRUE(next.ok()) << next.status();
    if (!next->has_value()) break;
    DeviceBatch& batch = **next;
    ASSERT_TRUE(batch.WaitOnHost().ok());
    ASSERT_EQ(batch.num_fields(), 3);
    const std::vector<std::byte> sums = CopyToHost(batch.field(0), Device());
    const std::vector<std::byte> bs = CopyToHost(batch.field(1), Device());
    const std::vector<std::byte> cs = CopyToHost(batch.field(2), Device());
    for (int64_t p = 0; p < batch.size(); ++p) {
      const int64_t i = batch.sample_indices()[p];
      const std::vector<std::vector<std::byte>> want = dataset->Expected(i);
      int64_t sum;
      std::memcpy(&sum, sums.data() + 8 * p, 8);
      EXPECT_EQ(sum, ExpectedSum(i));
      EXPECT_EQ(std::memcmp(bs.data() + 8 * p, want[1].data(), 8), 0) << i;
      EXPECT_EQ(std::memcmp(cs.data() + 20 * p, want[2].data(), 20), 0) << i;
    }
    samples += batch.size();
    ASSERT_TRUE(batch.Release().ok());
  }
  EXPECT_EQ(samples, 20);
  // Batches of 8, 8 and 4: b's rows and c's, never a's.
  const auto copy = [&](size_t n) {
    return static_cast<int64_t>(layout.field_offset(2) -
                                layout.field_offset(1) + 20 * n);
  };
  const LoaderStats stats = loader->stats();
  EXPECT_EQ(stats.transfer.bytes_copied, 2 * copy(8) + copy(4));
  EXPECT_EQ(stats.bytes_delivered, stats.transfer.bytes_copied);
  EXPECT_EQ(stats.device_bytes, 2 * (sum_offset + 256));  // 2 buffers
}

TEST(DeviceStage, BuildRefusesAHostOnlyFieldItKeeps) {
  absl::StatusOr<Loader> loader =
      Build(std::make_shared<testing_support::PatternDataset>(8),
            std::make_shared<SumOnTheHostOnly>("b"));
  ASSERT_FALSE(loader.ok());
  EXPECT_EQ(loader.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(loader.status().message(),
              HasSubstr("'sum_on_the_host_only': field 'b' is read only on "
                        "the host, so it must be consumed"));
}

TEST(DeviceStage, ABatchOutlivesItsLoaderWithItsTransformedData) {
  // Destroying the loader with transforms queued or done waits for the copy
  // stream; a batch still held keeps its buffer (input and output) alive.
  std::optional<DeviceBatch> kept;
  {
    absl::StatusOr<Loader> loader =
        Build(std::make_shared<Images>(400, true),
              Normalize(ImageLayout::kHWC, DType::kBFloat16), 4);
    ASSERT_TRUE(loader.ok()) << loader.status();
    absl::StatusOr<std::optional<DeviceBatch>> next = loader->Next();
    ASSERT_TRUE(next.ok() && next->has_value());
    kept = **std::move(next);
  }  // more batches were being read, copied and transformed
  ASSERT_TRUE(kept->WaitOnHost().ok());
  ExpectNormalized(*kept, DType::kBFloat16);
  ASSERT_TRUE(kept->Release().ok());
}

TEST(Float16, RoundsToNearestEvenLikeCuda) {
  using internal::FloatToBFloat16Bits;
  using internal::FloatToHalfBits;
  EXPECT_EQ(FloatToHalfBits(1.0f), 0x3c00);
  EXPECT_EQ(FloatToHalfBits(-2.0f), 0xc000);
  EXPECT_EQ(FloatToHalfBits(0.1f), 0x2e66);
  EXPECT_EQ(FloatToHalfBits(65504.0f), 0x7bff);
  EXPECT_EQ(FloatToHalfBits(65519.0f), 0x7bff);
  EXPECT_EQ(FloatToHalfBits(65520.0f), 0x7c00);  // the tie goes to infinity
  EXPECT_EQ(FloatToHalfBits(std::ldexp(1.0f, -24)), 0x0001);
  EXPECT_EQ(FloatToHalfBits(std::ldexp(1.0f, -25)), 0x0000);  // tie to even
  EXPECT_EQ(FloatToHalfBits(std::ldexp(1.5f, -25)), 0x0001);
  EXPECT_EQ(FloatToHalfBits(std::ldexp(1.0f, -14)), 0x0400);
  EXPECT_EQ(FloatToHalfBits(-0.0f), 0x8000);
  EXPECT_EQ(FloatToHalfBits(INFINITY), 0x7c00);
  EXPECT_EQ(FloatToHalfBits(NAN) & 0x7e00, 0x7e00);
  // 1 + 2^-11 is halfway between 1 and 1 + 2^-10: to even (1).
  EXPECT_EQ(FloatToHalfBits(1.0f + std::ldexp(1.0f, -11)), 0x3c00);
  EXPECT_EQ(FloatToHalfBits(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);
  EXPECT_EQ(FloatToBFloat16Bits(1.0f), 0x3f80);
  EXPECT_EQ(FloatToBFloat16Bits(-3.0f), 0xc040);
  EXPECT_EQ(FloatToBFloat16Bits(1.0f + std::ldexp(1.0f, -8)), 0x3f80);
  EXPECT_EQ(FloatToBFloat16Bits(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);
  EXPECT_EQ(FloatToBFloat16Bits(INFINITY), 0x7f80);
  EXPECT_EQ(FloatToBFloat16Bits(NAN) & 0x7fc0, 0x7fc0);
}

TEST(NormalizeImage, MatchesTheHostBitForBitOnTheGpu_CUDA) {
  SKIP_WITHOUT_GPU();
  absl::StatusOr<Device> gpu = Device::Cuda(0);
  ASSERT_TRUE(gpu.ok());
  for (bool hwc : {true, false}) {
    for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
      SCOPED_TRACE(absl::StrCat(hwc ? "HWC " : "CHW ", DTypeName(dtype)));
      absl::StatusOr<Loader> loader =
          Build(std::make_shared<Images>(37, hwc),
                Normalize(hwc ? ImageLayout::kHWC : ImageLayout::kCHW, dtype),
                2, 2, *gpu);
      ASSERT_TRUE(loader.ok()) << loader.status();
      EXPECT_EQ(CheckEpoch(*loader, dtype), 5);
    }
  }
}

}  // namespace
}  // namespace pinwheel
