// The fixed-point resize (loader/image/internal/resample.h, through
// ResizeRegion) against a float reference of the same filter, and the
// fused decode + resize at the DCT-scale boundaries and on every kind of
// JPEG the decoder takes.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"

#include "loader/image/image_transforms.h"
#include "loader/image/jpeg.h"
#include "loader/sample_random.h"
#include "tests/loader/image/test_jpegs.h"

namespace pinwheel {
namespace {

using ::pinwheel::testing::EncodeJpeg;
using ::pinwheel::testing::GradientRgb;

RgbImageView View(const std::vector<uint8_t>& rgb, int width, int height) {
  return RgbImageView{.data = rgb.data(),
                      .width = width,
                      .height = height,
                      .row_bytes = int64_t{width} * 3};
}

std::vector<uint8_t> NoiseRgb(int width, int height, uint32_t seed) {
  std::mt19937 gen(seed);
  std::vector<uint8_t> rgb(static_cast<size_t>(width) * height * 3);
  for (uint8_t& v : rgb) v = static_cast<uint8_t>(gen() & 0xff);
  return rgb;
}

// The reference, in double precision: for each axis, output pixel i
// samples at c = start + (i + 0.5) * s, s = length / out; input pixel x
// weighs max(0, 1 - |x + 0.5 - c| / max(s, 1)) for x from
// max(floor(start), floor(c - max(s, 1) + 0.5)) to min(ceil(start +
// length), floor(c + max(s, 1) + 0.5), image size) - 1, the weights
// divided by their sum (torchvision's antialiased bilinear on the crop).
// The separable sum is rounded once, to the nearest level.
std::vector<double> AxisWeights(double start, double length, int out, int size,
                                int i, int* first) {
  const double s = length / out;
  const double support = std::max(s, 1.0);
  const double c = start + (i + 0.5) * s;
  const int lo = std::max(static_cast<int>(std::floor(start)),
                          static_cast<int>(std::floor(c - support + 0.5)));
  const int hi = std::min({static_cast<int>(std::ceil(start + length)), size,
                           static_cast<int>(std::floor(c + support + 0.5))});
  std::vector<double> w;
  double total = 0;
  for (int x = std::max(lo, 0); x < hi; ++x) {
    w.push_back(std::max(0.0, 1.0 - std::abs(x + 0.5 - c) / support));
    total += w.back();
  }
  for (double& v : w) v /= total;
  *first = std::max(lo, 0);
  return w;
}

std::vector<uint8_t> ReferenceResize(const std::vector<uint8_t>& rgb, int width,
                                     int height, const CropRegion& r, int out_w,
                                     int out_h, bool flip) {
  std::vector<uint8_t> out(static_cast<size_t>(out_w) * out_h * 3);
  for (int j = 0; j < out_h; ++j) {
    int y0 = 0;
    const std::vector<double> wy =
        AxisWeights(r.y, r.height, out_h, height, j, &y0);
    for (int i = 0; i < out_w; ++i) {
      int x0 = 0;
      const std::vector<double> wx =
          AxisWeights(r.x, r.width, out_w, width, i, &x0);
      for (int ch = 0; ch < 3; ++ch) {
        double v = 0;
        for (size_t b = 0; b < wy.size(); ++b) {
          for (size_t a = 0; a < wx.size(); ++a) {
            v += wy[b] * wx[a] *
                 rgb[((y0 + b) * width + x0 + a) * 3 + static_cast<size_t>(ch)];
          }
        }
        const int col = flip ? out_w - 1 - i : i;
        out[(static_cast<size_t>(j) * out_w + col) * 3 + ch] =
            static_cast<uint8_t>(std::clamp(std::lround(v), 0L, 255L));
      }
    }
  }
  return out;
}

struct Case {
  int width, height;
  CropRegion region;
  int out_w, out_h;
};

TEST(Resample, MatchesTheFloatReferenceWithinOneLevel) {
  // Shrinks by 1.3 to 9, enlargements, fractional regions (a crop mapped
  // to a reduced DCT scale), a region at the image's edge, 1-pixel sides.
  const Case cases[] = {
      {300, 200, {10, 7, 280, 190}, 224, 150},
      {463, 422, {37, 12, 301, 250}, 224, 224},
      {500, 375, {0, 0, 500, 375}, 224, 224},
      {120, 90, {3.375, 1.5, 100.25, 80.125}, 64, 48},
      {2000, 60, {0, 0, 2000, 60}, 222, 20},
      {40, 30, {5, 5, 10, 8}, 224, 224},
      {64, 64, {63, 0, 1, 64}, 5, 7},
      {17, 9, {0, 0, 17, 9}, 17, 9},
  };
  for (const Case& c : cases) {
    const std::vector<uint8_t> rgb = NoiseRgb(c.width, c.height, 7);
    for (bool flip : {false, true}) {
      std::vector<uint8_t> out(static_cast<size_t>(c.out_w) * c.out_h * 3);
      ASSERT_TRUE(ResizeRegion(View(rgb, c.width, c.height), c.region, c.out_w,
                               c.out_h, flip, absl::MakeSpan(out))
                      .ok());
      const std::vector<uint8_t> reference = ReferenceResize(
          rgb, c.width, c.height, c.region, c.out_w, c.out_h, flip);
      int worst = 0;
      double sum = 0;
      for (size_t k = 0; k < out.size(); ++k) {
        const int d = std::abs(out[k] - reference[k]);
        worst = std::max(worst, d);
        sum += d;
      }
      EXPECT_LE(worst, 1) << c.width << "x" << c.height << " -> " << c.out_w
                          << "x" << c.out_h << " flip " << flip;
      EXPECT_LE(sum / static_cast<double>(out.size()), 0.05)
          << c.width << "x" << c.height << " -> " << c.out_w << "x" << c.out_h;
    }
  }
}

TEST(Resample, ReadsOnlyTheRegionsOwnPixels) {
  // torchvision crops, then resizes: nothing outside the crop leaks in.
  const int w = 50;
  const int h = 40;
  std::vector<uint8_t> rgb(w * h * 3, 255);
  for (int y = 10; y < 30; ++y) {
    std::fill_n(&rgb[(static_cast<size_t>(y) * w + 12) * 3], 25 * 3, 0);
  }
  for (const auto& [ow, oh] : {std::pair{7, 5}, std::pair{60, 44}}) {
    std::vector<uint8_t> out(static_cast<size_t>(ow) * oh * 3);
    ASSERT_TRUE(ResizeRegion(View(rgb, w, h), {12, 10, 25, 20}, ow, oh, false,
                             absl::MakeSpan(out))
                    .ok());
    EXPECT_EQ(*std::max_element(out.begin(), out.end()), 0) << ow << "x" << oh;
  }
}

TEST(Resample, ASlimRegionAtTheImagesEdgeReadsItsLastPixel) {
  const std::vector<uint8_t> rgb = NoiseRgb(9, 6, 5);
  std::vector<uint8_t> out(4 * 3 * 3);
  ASSERT_TRUE(ResizeRegion(View(rgb, 9, 6), {9, 6, 1e-7, 1e-7}, 4, 3, false,
                           absl::MakeSpan(out))
                  .ok());
  for (size_t k = 0; k < out.size(); ++k) {
    ASSERT_EQ(out[k], rgb[(5 * 9 + 8) * 3 + k % 3]) << k;
  }
}

TEST(Resample, EnlargesAOnePixelRegionToAConstantImage) {
  const std::vector<uint8_t> rgb = NoiseRgb(9, 9, 3);
  std::vector<uint8_t> out(224 * 224 * 3);
  ASSERT_TRUE(ResizeRegion(View(rgb, 9, 9), {4, 4, 1, 1}, 224, 224, true,
                           absl::MakeSpan(out))
                  .ok());
  for (size_t k = 0; k < out.size(); ++k) {
    ASSERT_EQ(out[k], rgb[(4 * 9 + 4) * 3 + k % 3]) << k;
  }
}

// A JPEG of each kind the decoder takes, width × height.
std::vector<std::vector<std::byte>> EveryKindOfJpeg(int width, int height) {
  const std::vector<uint8_t> rgb = GradientRgb(width, height);
  std::vector<uint8_t> gray(static_cast<size_t>(width) * height);
  std::vector<uint8_t> cmyk(gray.size() * 4);
  for (size_t i = 0; i < gray.size(); ++i) {
    gray[i] = rgb[i * 3];
    for (int c = 0; c < 4; ++c) cmyk[i * 4 + c] = rgb[i * 3 + c % 3];
  }
  return {
      EncodeJpeg(rgb, width, height, TJPF_RGB, 90, TJSAMP_420),
      EncodeJpeg(rgb, width, height, TJPF_RGB, 90, TJSAMP_422),
      EncodeJpeg(rgb, width, height, TJPF_RGB, 90, TJSAMP_420,
                 TJFLAG_PROGRESSIVE),
      EncodeJpeg(gray, width, height, TJPF_GRAY, 90, TJSAMP_GRAY),
      EncodeJpeg(cmyk, width, height, TJPF_CMYK, 90, TJSAMP_444),
  };
}

// DecodeResizedCrop against a full decode at the scale it picks, then
// ResizeRegion of the mapped crop: the two must be equal.
void ExpectFusedEqualsFullDecode(const std::vector<std::byte>& jpeg, int w,
                                 int h, const CropRegion& crop, int out,
                                 bool flip, JpegScale expected_scale) {
  const JpegScale scale = ChooseJpegScale(crop.width, crop.height, out, out);
  ASSERT_EQ(scale, expected_scale) << crop.width << "x" << crop.height;
  const int sw = ScaledJpegSize(w, scale);
  const int sh = ScaledJpegSize(h, scale);
  std::vector<uint8_t> full(static_cast<size_t>(sw) * sh * 3);
  ASSERT_TRUE(DecodeJpeg(jpeg, "f.jpg", scale, absl::MakeSpan(full)).ok());
  const double f = static_cast<double>(scale.num) / scale.denom;
  const CropRegion scaled{.x = crop.x * f,
                          .y = crop.y * f,
                          .width = std::min(crop.width * f, sw - crop.x * f),
                          .height = std::min(crop.height * f, sh - crop.y * f)};
  std::vector<uint8_t> reference(static_cast<size_t>(out) * out * 3);
  ASSERT_TRUE(ResizeRegion(View(full, sw, sh), scaled, out, out, flip,
                           absl::MakeSpan(reference))
                  .ok());
  std::vector<uint8_t> fused(reference.size());
  const absl::Status s = DecodeResizedCrop(jpeg, "f.jpg", crop, out, out, flip,
                                           absl::MakeSpan(fused));
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(fused, reference) << crop.width << "x" << crop.height << " at ("
                              << crop.x << ", " << crop.y << ")";
}

TEST(DecodeResizedCrop, PicksTheScaleAtItsBoundariesOnEveryKindOfJpeg) {
  // 1000x900: crops just at and just under 448 (1/2) and 896 (1/4) a
  // side, off the 8-pixel block grid, for 224 outputs.
  const int w = 1000;
  const int h = 900;
  struct Crop {
    CropRegion region;
    JpegScale scale;
  };
  const Crop crops[] = {
      {{13, 21, 448, 448}, {1, 2}}, {{13, 21, 447, 600}, {1, 1}},
      {{101, 3, 896, 896}, {1, 4}}, {{0, 0, 1000, 895}, {1, 2}},
      {{999, 899, 1, 1}, {1, 1}},   {{500, 450, 224, 224}, {1, 1}},
      {{7, 9, 223, 225}, {1, 1}},
  };
  int kind = 0;
  for (const std::vector<std::byte>& jpeg : EveryKindOfJpeg(w, h)) {
    SCOPED_TRACE(::testing::Message() << "JPEG kind " << kind++);
    for (const Crop& c : crops) {
      ExpectFusedEqualsFullDecode(jpeg, w, h, c.region, 224, kind % 2 == 0,
                                  c.scale);
    }
  }
}

TEST(DecodeResizedCrop, ReachesOneEighthOnALargeImageAndEnlargesATinyOne) {
  const std::vector<uint8_t> big = GradientRgb(1800, 1800);
  const std::vector<std::byte> big_jpeg =
      EncodeJpeg(big, 1800, 1800, TJPF_RGB, 90, TJSAMP_420);
  ExpectFusedEqualsFullDecode(big_jpeg, 1800, 1800, {0, 0, 1800, 1800}, 224,
                              false, {1, 8});
  ExpectFusedEqualsFullDecode(big_jpeg, 1800, 1800, {5, 8, 1791, 1795}, 224,
                              true, {1, 4});
  const std::vector<uint8_t> tiny = GradientRgb(3, 2);
  const std::vector<std::byte> tiny_jpeg = EncodeJpeg(tiny, 3, 2);
  ExpectFusedEqualsFullDecode(tiny_jpeg, 3, 2, {0, 0, 3, 2}, 224, true, {1, 1});
  ExpectFusedEqualsFullDecode(tiny_jpeg, 3, 2, {1, 1, 1, 1}, 224, false,
                              {1, 1});
}

}  // namespace
}  // namespace pinwheel
