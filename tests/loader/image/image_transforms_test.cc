#include "loader/image/image_transforms.h"

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include "loader/image/jpeg.h"
#include "loader/sample_random.h"
#include "tests/loader/image/test_jpegs.h"

namespace pinwheel {
namespace {

using ::pinwheel::testing::EncodeJpeg;
using ::pinwheel::testing::GradientRgb;
using ::pinwheel::testing::MaxAbsDiff;
using ::testing::HasSubstr;

RgbImageView View(const std::vector<uint8_t>& rgb, int width, int height) {
  return RgbImageView{.data = rgb.data(),
                      .width = width,
                      .height = height,
                      .row_bytes = int64_t{width} * 3};
}

CropRegion Whole(int width, int height) {
  return CropRegion{
      .x = 0, .y = 0, .width = 1.0 * width, .height = 1.0 * height};
}

TEST(RandomResizedCrop, CropsStayInsideTheImageWithAreaAndRatioInRange) {
  int fallbacks = 0;
  for (uint64_t key = 0; key < 2000; ++key) {
    SampleRandom rng(7, 0, key);
    const int width = 500;
    const int height = 375;
    const CropRegion c = RandomResizedCropRegion(width, height, rng);
    ASSERT_GE(c.x, 0);
    ASSERT_GE(c.y, 0);
    ASSERT_GE(c.width, 1);
    ASSERT_GE(c.height, 1);
    ASSERT_LE(c.x + c.width, width);
    ASSERT_LE(c.y + c.height, height);
    ASSERT_EQ(c.x, std::floor(c.x));  // whole pixels
    ASSERT_EQ(c.width, std::floor(c.width));
    const double area = c.width * c.height / (width * height);
    const double ratio = c.width / c.height;
    if (area == 1.0) {
      ++fallbacks;
      continue;
    }
    // Rounding to whole pixels moves area and ratio by a pixel's worth.
    EXPECT_GE(area, 0.08 * 0.9) << key;
    EXPECT_LE(area, 1.0) << key;
    EXPECT_GE(ratio, 0.75 * 0.9) << key;
    EXPECT_LE(ratio, 4.0 / 3.0 * 1.1) << key;
  }
  // 500x375 has ratio 4:3, inside the range: a fallback is the whole image
  // and comes only when ten draws all miss (rare).
  EXPECT_LT(fallbacks, 100);
}

TEST(RandomResizedCrop, IsAPureFunctionOfTheGenerator) {
  SampleRandom a(3, 2, 99);
  SampleRandom b(3, 2, 99);
  SampleRandom c(3, 2, 100);
  const CropRegion ra = RandomResizedCropRegion(640, 480, a);
  const CropRegion rb = RandomResizedCropRegion(640, 480, b);
  const CropRegion rc = RandomResizedCropRegion(640, 480, c);
  EXPECT_EQ(ra.x, rb.x);
  EXPECT_EQ(ra.y, rb.y);
  EXPECT_EQ(ra.width, rb.width);
  EXPECT_EQ(ra.height, rb.height);
  EXPECT_FALSE(ra.x == rc.x && ra.y == rc.y && ra.width == rc.width &&
               ra.height == rc.height);
}

TEST(RandomResizedCrop, FallsBackToTheCentralCropWithItsRatioClamped) {
  // 1000x10: no crop of area >= 8 % with ratio <= 4/3 fits in 10 rows.
  SampleRandom rng(1, 0, 0);
  const CropRegion c = RandomResizedCropRegion(1000, 10, rng);
  EXPECT_EQ(c.width, 13);  // round(10 * 4/3)
  EXPECT_EQ(c.height, 10);
  EXPECT_EQ(c.x, (1000 - 13) / 2);
  EXPECT_EQ(c.y, 0);
}

TEST(CenterCrop, MatchesResizeShorterSideThenCenterCrop) {
  // 500x375 -> Resize(256) = 341x256 -> CenterCrop(224): left =
  // round(58.5) = 58 (half to even, as Python), top = 16.
  const CropRegion c = CenterCropRegion(500, 375, 256, 224);
  const double s = 500.0 / 341;
  EXPECT_DOUBLE_EQ(c.x, 58 * s);
  EXPECT_DOUBLE_EQ(c.y, 16 * 375.0 / 256);
  EXPECT_DOUBLE_EQ(c.width, 224 * s);
  EXPECT_DOUBLE_EQ(c.height, 224 * 375.0 / 256);
  // A portrait image: the width is the shorter side.
  const CropRegion p = CenterCropRegion(300, 600, 100, 100);
  EXPECT_DOUBLE_EQ(p.x, 0);
  EXPECT_DOUBLE_EQ(p.y, 150);
  EXPECT_DOUBLE_EQ(p.width, 300);
}

TEST(Flip, MirrorsEachRow) {
  std::vector<uint8_t> rgb = {1,  2,  3,  4,  5,  6,  7,  8,  9,  //
                              10, 11, 12, 13, 14, 15, 16, 17, 18};
  FlipHorizontal(absl::MakeSpan(rgb), 3, 2);
  EXPECT_EQ(rgb, (std::vector<uint8_t>{7, 8, 9, 4, 5, 6, 1, 2, 3,  //
                                       16, 17, 18, 13, 14, 15, 10, 11, 12}));
}

TEST(Resize, SameSizeIsACopy) {
  const std::vector<uint8_t> rgb = GradientRgb(20, 10);
  std::vector<uint8_t> out(rgb.size());
  ASSERT_TRUE(ResizeRegion(View(rgb, 20, 10), Whole(20, 10), 20, 10, false,
                           absl::MakeSpan(out))
                  .ok());
  EXPECT_EQ(out, rgb);
}

TEST(Resize, FlipInTheResizeEqualsFlipAfterIt) {
  const std::vector<uint8_t> rgb = GradientRgb(37, 23);
  std::vector<uint8_t> a(16 * 9 * 3);
  std::vector<uint8_t> b(a.size());
  const CropRegion r{.x = 3, .y = 2, .width = 30, .height = 17};
  ASSERT_TRUE(
      ResizeRegion(View(rgb, 37, 23), r, 16, 9, true, absl::MakeSpan(a)).ok());
  ASSERT_TRUE(
      ResizeRegion(View(rgb, 37, 23), r, 16, 9, false, absl::MakeSpan(b)).ok());
  FlipHorizontal(absl::MakeSpan(b), 16, 9);
  EXPECT_EQ(a, b);
}

TEST(Resize, AConstantImageStaysConstant) {
  std::vector<uint8_t> rgb(101 * 77 * 3);
  for (size_t i = 0; i < rgb.size(); ++i) rgb[i] = i % 3 == 0 ? 200 : 17;
  for (const auto& [w, h] : {std::pair{13, 29}, std::pair{224, 224},
                             std::pair{1, 1}, std::pair{300, 10}}) {
    std::vector<uint8_t> out(static_cast<size_t>(w) * h * 3);
    const CropRegion r{.x = 5.5, .y = 3.25, .width = 80.5, .height = 60};
    ASSERT_TRUE(
        ResizeRegion(View(rgb, 101, 77), r, w, h, false, absl::MakeSpan(out))
            .ok());
    for (size_t i = 0; i < out.size(); ++i) {
      ASSERT_EQ(out[i], i % 3 == 0 ? 200 : 17) << w << "x" << h << " @" << i;
    }
  }
}

TEST(Resize, AntialiasesWhenShrinking) {
  // Columns 255, 0, 0, 255, 0, 0, ...: shrunk by 3, each output pixel's
  // center lands on a 0 column, so plain bilinear would give 0 (aliasing).
  // The stretched triangle filter (support ±3 input pixels, weights 1/3,
  // 2/3, 1, 2/3, 1/3 summing to 3) averages: 255 * (1/3) / 3 * 3 = 85.
  const int w = 60;
  const int h = 4;
  std::vector<uint8_t> rgb(w * h * 3);
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      for (int c = 0; c < 3; ++c)
        rgb[(y * w + x) * 3 + c] = x % 3 == 0 ? 255 : 0;
    }
  }
  std::vector<uint8_t> out(20 * h * 3);
  ASSERT_TRUE(ResizeRegion(View(rgb, w, h), Whole(w, h), 20, h, false,
                           absl::MakeSpan(out))
                  .ok());
  for (int y = 0; y < h; ++y) {
    for (int x = 1; x < 19; ++x) {  // the edges are renormalised
      EXPECT_EQ(out[(y * 20 + x) * 3], 85) << x;
    }
  }
}

TEST(Resize, RefusesARegionOutsideTheImage) {
  const std::vector<uint8_t> rgb = GradientRgb(10, 10);
  std::vector<uint8_t> out(4 * 4 * 3);
  const CropRegion r{.x = 8, .y = 0, .width = 5, .height = 5};
  absl::Status s =
      ResizeRegion(View(rgb, 10, 10), r, 4, 4, false, absl::MakeSpan(out));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("not inside"));
  std::vector<uint8_t> small(10);
  EXPECT_EQ(ResizeRegion(View(rgb, 10, 10), Whole(10, 10), 4, 4, false,
                         absl::MakeSpan(small))
                .code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(DecodeResizedCrop, MatchesAFullDecodeThenResizeWithinTolerance) {
  const int w = 256;
  const int h = 192;
  const std::vector<uint8_t> rgb = GradientRgb(w, h);
  const std::vector<std::byte> jpeg = EncodeJpeg(rgb, w, h);
  // The crop 200x150 to 48x36 decodes at 1/4 (ChooseJpegScale); the
  // reference resizes the original pixels.
  const CropRegion crop{.x = 40, .y = 20, .width = 200, .height = 150};
  ASSERT_EQ(ChooseJpegScale(200, 150, 48, 36), (JpegScale{1, 4}));
  std::vector<uint8_t> fast(48 * 36 * 3);
  std::vector<uint8_t> reference(fast.size());
  absl::Status s = DecodeResizedCrop(jpeg, "g.jpg", crop, 48, 36, true,
                                     absl::MakeSpan(fast));
  ASSERT_TRUE(s.ok()) << s;
  ASSERT_TRUE(ResizeRegion(View(rgb, w, h), crop, 48, 36, true,
                           absl::MakeSpan(reference))
                  .ok());
  EXPECT_LE(MaxAbsDiff(fast.data(), reference.data(), fast.size()), 4);
}

TEST(DecodeResizedCrop, EqualsAFullDecodeAtTheSameScaleThenResize) {
  // Note [region decode]: decoding only the pixels the filter reaches
  // changes nothing.
  const int w = 500;
  const int h = 375;
  const std::vector<std::byte> jpeg =
      EncodeJpeg(GradientRgb(w, h), w, h, TJPF_RGB, 90, TJSAMP_420);
  for (uint64_t key = 0; key < 20; ++key) {
    SampleRandom rng(4, 0, key);
    const CropRegion crop = RandomResizedCropRegion(w, h, rng);
    const JpegScale scale = ChooseJpegScale(crop.width, crop.height, 64, 64);
    const int sw = ScaledJpegSize(w, scale);
    const int sh = ScaledJpegSize(h, scale);
    std::vector<uint8_t> full(static_cast<size_t>(sw) * sh * 3);
    ASSERT_TRUE(DecodeJpeg(jpeg, "f.jpg", scale, absl::MakeSpan(full)).ok());
    const double f = static_cast<double>(scale.num) / scale.denom;
    const CropRegion scaled{
        .x = crop.x * f,
        .y = crop.y * f,
        .width = std::min(crop.width * f, sw - crop.x * f),
        .height = std::min(crop.height * f, sh - crop.y * f)};
    std::vector<uint8_t> reference(64 * 64 * 3);
    ASSERT_TRUE(ResizeRegion(View(full, sw, sh), scaled, 64, 64, key % 2 == 1,
                             absl::MakeSpan(reference))
                    .ok());
    std::vector<uint8_t> fast(reference.size());
    ASSERT_TRUE(DecodeResizedCrop(jpeg, "f.jpg", crop, 64, 64, key % 2 == 1,
                                  absl::MakeSpan(fast))
                    .ok());
    EXPECT_EQ(fast, reference) << "key " << key;
  }
}

TEST(DecodeResizedCrop, TheEvalCropOfA500x375Image) {
  const std::vector<uint8_t> rgb = GradientRgb(500, 375);
  const std::vector<std::byte> jpeg = EncodeJpeg(rgb, 500, 375);
  const CropRegion crop = CenterCropRegion(500, 375, 256, 224);
  std::vector<uint8_t> fast(224 * 224 * 3);
  std::vector<uint8_t> reference(fast.size());
  ASSERT_TRUE(DecodeResizedCrop(jpeg, "e.jpg", crop, 224, 224, false,
                                absl::MakeSpan(fast))
                  .ok());
  ASSERT_TRUE(ResizeRegion(View(rgb, 500, 375), crop, 224, 224, false,
                           absl::MakeSpan(reference))
                  .ok());
  EXPECT_LE(MaxAbsDiff(fast.data(), reference.data(), fast.size()), 4);
}

TEST(DecodeResizedCrop, NamesTheFileOfABadJpeg) {
  std::vector<std::byte> jpeg = EncodeJpeg(GradientRgb(64, 64), 64, 64);
  jpeg.resize(jpeg.size() / 2);
  std::vector<uint8_t> out(8 * 8 * 3);
  absl::Status s = DecodeResizedCrop(jpeg, "dir/half.jpg", Whole(64, 64), 8, 8,
                                     false, absl::MakeSpan(out));
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), HasSubstr("dir/half.jpg"));
}

TEST(DecodeTransformedImage, EnlargesAOneByOneImageInTrainAndEval) {
  const std::vector<uint8_t> rgb = {10, 200, 90};
  const std::vector<std::byte> jpeg = EncodeJpeg(rgb, 1, 1);
  for (bool train : {true, false}) {
    std::vector<uint8_t> out(32 * 32 * 3);
    SampleRandom rng(1, 0, 0);
    absl::Status s =
        DecodeTransformedImage(jpeg, "one.jpg", {.train = train, .size = 32},
                               rng, absl::MakeSpan(out));
    ASSERT_TRUE(s.ok()) << s;
    for (size_t i = 0; i < out.size(); ++i) {
      ASSERT_LE(std::abs(out[i] - rgb[i % 3]), 3) << "train " << train;
    }
  }
}

TEST(DecodeTransformedImage, RefusesAHugeHeaderNamingTheFile) {
  std::vector<std::byte> jpeg = EncodeJpeg(GradientRgb(16, 16), 16, 16);
  // The SOF0 marker's height and width: 20000x20000, never allocated.
  bool patched = false;
  for (size_t i = 2; i + 9 < jpeg.size() && !patched; ++i) {
    if (jpeg[i] == std::byte{0xff} && jpeg[i + 1] == std::byte{0xc0}) {
      jpeg[i + 5] = std::byte{20000 >> 8};
      jpeg[i + 6] = std::byte{20000 & 0xff};
      jpeg[i + 7] = std::byte{20000 >> 8};
      jpeg[i + 8] = std::byte{20000 & 0xff};
      patched = true;
    }
  }
  ASSERT_TRUE(patched);
  std::vector<uint8_t> out(8 * 8 * 3);
  SampleRandom rng(1, 0, 0);
  absl::Status s = DecodeTransformedImage(jpeg, "huge.jpg", {.size = 8}, rng,
                                          absl::MakeSpan(out));
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(s.message(), HasSubstr("huge.jpg"));
  EXPECT_THAT(s.message(), HasSubstr("20000x20000"));
}

TEST(DecodeTransformedImage, ValidatesItsOptions) {
  EXPECT_TRUE(ValidateImageTransformOptions({}).ok());
  EXPECT_THAT(ValidateImageTransformOptions({.size = 224, .resize_size = 100})
                  .message(),
              HasSubstr("resize_size = 100"));
  EXPECT_THAT(
      ValidateImageTransformOptions({.crop = {.min_scale = 0}}).message(),
      HasSubstr("min_scale"));
  EXPECT_THAT(ValidateImageTransformOptions({.flip_probability = 2}).message(),
              HasSubstr("flip_probability"));
}

}  // namespace
}  // namespace pinwheel
