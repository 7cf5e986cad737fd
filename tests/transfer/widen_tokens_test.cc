// WidenTokens, the device stage's token widening, on the host backend (and
// on a GPU in the *_CUDA case): values of every width and signedness, the
// layout checks at Build(), and a TokenWindowDataset's windows widened to
// what its CPU widening ships.
#include "transfer/widen_tokens.h"

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <memory>
#include <optional>
#include <string>
#include <unistd.h>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

#include "loader/dataset.h"
#include "loader/loader.h"
#include "loader/loader_builder.h"
#include "loader/token_window_dataset.h"
#include "tests/support/skip_without_gpu.h"
#include "tests/support/test_datasets.h"
#include "transfer/device.h"

namespace pinwheel {
namespace {

using ::testing::HasSubstr;
using testing_support::CopyToHost;

constexpr int64_t kSeqLen = 9;

// Token k of sample i: a bit pattern spread over the whole width (both
// halves, so a wrong sign or zero extension shows).
uint64_t Token(int64_t i, int64_t k) {
  return static_cast<uint64_t>(i * 31 + k + 1) * 0x9E3779B97F4A7C15ULL;
}

// Sample i: "tokens" [kSeqLen + 1] of `dtype`, "id" i64[] = i.
class Windows : public Dataset {
 public:
  explicit Windows(DType dtype, int64_t size = 29) : size_(size) {
    layout_ = *SampleLayout::Create({
        {.name = "id", .dtype = DType::kInt64, .shape = {}},
        {.name = "tokens", .dtype = dtype, .shape = {kSeqLen + 1}},
    });
  }
  int64_t size() const override { return size_; }
  const SampleLayout& layout() const override { return layout_; }
  absl::Status Read(int64_t i, SampleView& out) const override {
    out.field_as<int64_t>(0)[0] = i;
    const size_t width = DTypeSize(layout_.fields()[1].dtype);
    std::byte* tokens = out.field(1).data();
    for (int64_t k = 0; k <= kSeqLen; ++k) {
      const uint64_t t = Token(i, k);
      std::memcpy(tokens + k * width, &t, width);  // little-endian low bytes
    }
    return absl::OkStatus();
  }

 private:
  int64_t size_;
  SampleLayout layout_;
};

// Returns token k of sample i as the transform must widen it.
int64_t Widened(DType dtype, int64_t i, int64_t k) {
  const uint64_t t = Token(i, k);
  switch (dtype) {
    case DType::kUInt8:
      return static_cast<uint8_t>(t);
    case DType::kInt8:
      return static_cast<int8_t>(t);
    case DType::kUInt16:
      return static_cast<uint16_t>(t);
    case DType::kInt16:
      return static_cast<int16_t>(t);
    case DType::kUInt32:
      return static_cast<uint32_t>(t);
    case DType::kInt32:
      return static_cast<int32_t>(t);
    default:
      return static_cast<int64_t>(t);
  }
}

absl::StatusOr<Loader> Build(std::shared_ptr<const Dataset> dataset,
                             Device device = Device::Host()) {
  absl::StatusOr<std::shared_ptr<WidenTokens>> widen = WidenTokens::Create({});
  if (!widen.ok()) return widen.status();
  return LoaderBuilder(std::move(dataset))
      .batch_size(8)
      .num_workers(2)
      .device(device)
      .device_transform(*widen)
      .Build();
}

void CheckEpoch(Loader& loader, DType dtype) {
  int64_t samples = 0;
  while (true) {
    absl::StatusOr<std::optional<DeviceBatch>> next = loader.Next();
    ASSERT_TRUE(next.ok()) << next.status();
    if (!next->has_value()) break;
    DeviceBatch& batch = **next;
    ASSERT_TRUE(batch.WaitOnHost().ok());
    ASSERT_EQ(batch.num_fields(), 3);
    EXPECT_EQ(batch.field(0).name, "input");
    EXPECT_EQ(batch.field(1).name, "target");
    EXPECT_EQ(batch.field(2).name, "id");
    EXPECT_EQ(batch.field(0).dtype, DType::kInt64);
    EXPECT_EQ(batch.field(1).shape,
              (std::vector<int64_t>{batch.size(), kSeqLen}));
    const std::vector<std::byte> input =
        CopyToHost(batch.field(0), batch.device());
    const std::vector<std::byte> target =
        CopyToHost(batch.field(1), batch.device());
    const std::vector<std::byte> ids =
        CopyToHost(batch.field(2), batch.device());
    for (int64_t p = 0; p < batch.size(); ++p) {
      int64_t id;
      std::memcpy(&id, ids.data() + 8 * p, 8);
      ASSERT_EQ(id, batch.sample_indices()[p]);
      for (int64_t k = 0; k < kSeqLen; ++k) {
        int64_t x, y;
        std::memcpy(&x, input.data() + 8 * (p * kSeqLen + k), 8);
        std::memcpy(&y, target.data() + 8 * (p * kSeqLen + k), 8);
        ASSERT_EQ(x, Widened(dtype, id, k)) << id << " " << k;
        ASSERT_EQ(y, Widened(dtype, id, k + 1)) << id << " " << k;
      }
    }
    samples += batch.size();
    ASSERT_TRUE(batch.Release().ok());
  }
  EXPECT_EQ(samples, 29);
}

const DType kWidths[] = {DType::kUInt8,  DType::kInt8,   DType::kUInt16,
                         DType::kInt16,  DType::kUInt32, DType::kInt32,
                         DType::kUInt64, DType::kInt64};

TEST(WidenTokens, WidensEveryWidthToInputAndShiftedTarget) {
  for (DType dtype : kWidths) {
    SCOPED_TRACE(DTypeName(dtype));
    absl::StatusOr<Loader> loader = Build(std::make_shared<Windows>(dtype));
    ASSERT_TRUE(loader.ok()) << loader.status();
    CheckEpoch(*loader, dtype);
  }
}

TEST(WidenTokens, MatchesTokenWindowDatasetsCpuWidening) {
  const std::string path =
      absl::StrCat(::testing::TempDir(), "/widen_", getpid(), "_tokens.bin");
  {
    std::vector<uint16_t> tokens(5000);
    for (size_t i = 0; i < tokens.size(); ++i) {
      tokens[i] = static_cast<uint16_t>(i * 7919u);
    }
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(tokens.data()),
              static_cast<std::streamsize>(tokens.size() * 2));
  }
  TokenWindowOptions options = {.token_bytes = 2, .seq_len = 33, .seed = 4};
  absl::StatusOr<std::shared_ptr<TokenWindowDataset>> wide =
      TokenWindowDataset::Open(path, options);
  options.output = TokenOutput::kWindow;
  absl::StatusOr<std::shared_ptr<TokenWindowDataset>> windows =
      TokenWindowDataset::Open(path, options);
  ASSERT_TRUE(wide.ok() && windows.ok());
  absl::StatusOr<Loader> a =
      LoaderBuilder(*wide).batch_size(16).device(Device::Host()).Build();
  absl::StatusOr<Loader> b = Build(*windows);
  ASSERT_TRUE(a.ok() && b.ok()) << b.status();
  for (int batch = 0; batch < 5; ++batch) {
    absl::StatusOr<std::optional<DeviceBatch>> x = a->Next();
    absl::StatusOr<std::optional<DeviceBatch>> y = b->Next();
    ASSERT_TRUE(x.ok() && y.ok() && x->has_value() && y->has_value());
    ASSERT_TRUE((*x)->WaitOnHost().ok() && (*y)->WaitOnHost().ok());
    // b's batches are 8, a's 16: compare a's first half with b's batch.
    for (int f = 0; f < 2; ++f) {
      const std::vector<std::byte> want = CopyToHost((*x)->field(f), Device());
      const std::vector<std::byte> got = CopyToHost((*y)->field(f), Device());
      ASSERT_EQ((*y)->field(f).name, (*x)->field(f).name);
      ASSERT_TRUE(std::equal(got.begin(), got.end(), want.begin()))
          << "field " << f << " batch " << batch;
    }
    ASSERT_TRUE((*x)->Release().ok());
    ASSERT_TRUE((*y)->Release().ok());
    absl::StatusOr<std::optional<DeviceBatch>> skip = b->Next();
    ASSERT_TRUE(skip.ok() && skip->has_value());
    ASSERT_TRUE((*skip)->Release().ok());
  }
  std::remove(path.c_str());
}

TEST(WidenTokens, BuildRefusesFieldsItCannotWidenNamingThem) {
  absl::StatusOr<Loader> loader =
      Build(std::make_shared<testing_support::PatternDataset>(8));
  ASSERT_FALSE(loader.ok());
  EXPECT_EQ(loader.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(loader.status().message(),
              HasSubstr("option 'device_transform'"));
  EXPECT_THAT(loader.status().message(),
              HasSubstr("'tokens' is not in the batch (a u8[37]"));
  auto floats = std::make_shared<Windows>(DType::kFloat32);
  loader = Build(floats);
  ASSERT_FALSE(loader.ok());
  EXPECT_THAT(loader.status().message(), HasSubstr("'tokens f32[10]'"));
  EXPECT_THAT(loader.status().message(), HasSubstr("expected an integer"));
  auto one = std::make_shared<testing_support::PatternDataset>(8);
  absl::StatusOr<std::shared_ptr<WidenTokens>> on_b =
      WidenTokens::Create({.field = "b"});  // i64[]: rank 0
  ASSERT_TRUE(on_b.ok());
  loader = LoaderBuilder(one)
               .batch_size(4)
               .device(Device::Host())
               .device_transform(*on_b)
               .Build();
  ASSERT_FALSE(loader.ok());
  EXPECT_THAT(loader.status().message(), HasSubstr("'b i64[]'"));
}

TEST(WidenTokens, CreateRefusesBadOptionsNamingThem) {
  EXPECT_THAT(WidenTokens::Create({.field = ""}).status().message(),
              HasSubstr("'field'"));
  EXPECT_THAT(WidenTokens::Create({.input_field = "x", .target_field = "x"})
                  .status()
                  .message(),
              HasSubstr("'target_field': 'x' is also input_field"));
  EXPECT_THAT(WidenTokens::Create({.input_field = ""}).status().message(),
              HasSubstr("'input_field'"));
}

TEST(WidenTokens, WidensEveryWidthOnTheGpu_CUDA) {
  SKIP_WITHOUT_GPU();
  absl::StatusOr<Device> gpu = Device::Cuda(0);
  ASSERT_TRUE(gpu.ok());
  for (DType dtype : kWidths) {
    SCOPED_TRACE(DTypeName(dtype));
    absl::StatusOr<Loader> loader =
        Build(std::make_shared<Windows>(dtype), *gpu);
    ASSERT_TRUE(loader.ok()) << loader.status();
    CheckEpoch(*loader, dtype);
  }
}

}  // namespace
}  // namespace pinwheel
