#include "loader/image/jpeg.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <turbojpeg.h>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include "tests/loader/image/test_jpegs.h"

namespace pinwheel {
namespace {

using ::pinwheel::testing::EncodeJpeg;
using ::pinwheel::testing::GradientRgb;
using ::pinwheel::testing::MaxAbsDiff;
using ::testing::HasSubstr;

// JPEG is lossy: at quality 100 with 4:4:4 a smooth pattern comes back
// within this many levels per channel.
constexpr int kTolerance = 3;

std::vector<uint8_t> Decode(const std::vector<std::byte>& jpeg, int width,
                            int height, JpegScale scale = {}) {
  std::vector<uint8_t> out(static_cast<size_t>(ScaledJpegSize(width, scale)) *
                           ScaledJpegSize(height, scale) * 3);
  absl::Status s = DecodeJpeg(jpeg, "test.jpg", scale, absl::MakeSpan(out));
  EXPECT_TRUE(s.ok()) << s;
  return out;
}

// Returns `jpeg` with the first SOF marker's height and width replaced.
std::vector<std::byte> WithSofSize(std::vector<std::byte> jpeg, int width,
                                   int height) {
  for (size_t i = 2; i + 9 < jpeg.size(); ++i) {
    if (jpeg[i] == std::byte{0xff} &&
        (jpeg[i + 1] == std::byte{0xc0} || jpeg[i + 1] == std::byte{0xc2})) {
      jpeg[i + 5] = static_cast<std::byte>(height >> 8);
      jpeg[i + 6] = static_cast<std::byte>(height & 0xff);
      jpeg[i + 7] = static_cast<std::byte>(width >> 8);
      jpeg[i + 8] = static_cast<std::byte>(width & 0xff);
      return jpeg;
    }
  }
  ADD_FAILURE() << "no SOF marker";
  return jpeg;
}

TEST(Jpeg, ReadsTheHeader) {
  const std::vector<std::byte> jpeg =
      EncodeJpeg(GradientRgb(40, 24), 40, 24, TJPF_RGB, 90, TJSAMP_420);
  absl::StatusOr<JpegInfo> info = ReadJpegInfo(jpeg, "a.jpg");
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->width, 40);
  EXPECT_EQ(info->height, 24);
  EXPECT_EQ(info->colorspace, JpegColorspace::kYCbCr);
  EXPECT_EQ(info->subsampling, JpegSubsampling::k420);
  EXPECT_EQ(JpegSubsamplingName(info->subsampling), "4:2:0");
}

TEST(Jpeg, DecodesToTheReferencePixelsWithinTolerance) {
  const std::vector<uint8_t> rgb = GradientRgb(64, 48);
  const std::vector<uint8_t> out = Decode(EncodeJpeg(rgb, 64, 48), 64, 48);
  EXPECT_LE(MaxAbsDiff(out.data(), rgb.data(), rgb.size()), kTolerance);
}

TEST(Jpeg, DecodesAtAReducedDctScale) {
  const std::vector<uint8_t> rgb = GradientRgb(64, 48);
  const std::vector<std::byte> jpeg = EncodeJpeg(rgb, 64, 48);
  const std::vector<uint8_t> half = Decode(jpeg, 64, 48, JpegScale{1, 2});
  ASSERT_EQ(half.size(), 32u * 24 * 3);
  // Each half-scale pixel is close to the mean of its 2x2 block.
  int worst = 0;
  for (int y = 0; y < 24; ++y) {
    for (int x = 0; x < 32; ++x) {
      for (int c = 0; c < 3; ++c) {
        int sum = 0;
        for (int dy = 0; dy < 2; ++dy) {
          for (int dx = 0; dx < 2; ++dx) {
            sum += rgb[((2 * y + dy) * 64 + 2 * x + dx) * 3 + c];
          }
        }
        worst = std::max(worst, std::abs(half[(y * 32 + x) * 3 + c] - sum / 4));
      }
    }
  }
  EXPECT_LE(worst, kTolerance + 1);
}

TEST(Jpeg, ChoosesTheSmallestScaleThatCoversTheOutput) {
  EXPECT_EQ(ChooseJpegScale(1000, 1000, 224, 224), (JpegScale{1, 4}));
  EXPECT_EQ(ChooseJpegScale(448, 448, 224, 224), (JpegScale{1, 2}));
  // The n/8 scales are left out (Note [fast scales]).
  EXPECT_EQ(ChooseJpegScale(447, 448, 224, 224), (JpegScale{1, 1}));
  EXPECT_EQ(ChooseJpegScale(1792, 2000, 224, 224), (JpegScale{1, 8}));
  EXPECT_EQ(ChooseJpegScale(100, 100, 224, 224), (JpegScale{1, 1}));
  EXPECT_EQ(ScaledJpegSize(375, JpegScale{1, 8}), 47);
}

TEST(Jpeg, ConvertsGrayscaleToRgb) {
  std::vector<uint8_t> gray(32 * 16);
  for (size_t i = 0; i < gray.size(); ++i)
    gray[i] = static_cast<uint8_t>(i % 32 * 8);
  const std::vector<std::byte> jpeg =
      EncodeJpeg(gray, 32, 16, TJPF_GRAY, 100, TJSAMP_GRAY);
  absl::StatusOr<JpegInfo> info = ReadJpegInfo(jpeg, "g.jpg");
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->colorspace, JpegColorspace::kGray);
  const std::vector<uint8_t> out = Decode(jpeg, 32, 16);
  int worst = 0;
  for (size_t i = 0; i < gray.size(); ++i) {
    for (int c = 0; c < 3; ++c) {
      worst = std::max(worst, std::abs(out[i * 3 + c] - gray[i]));
    }
  }
  EXPECT_LE(worst, kTolerance);
}

TEST(Jpeg, ConvertsCmykToRgb) {
  // Inverted (Adobe) CMYK as stored: R = C * K / 255 (see Note [CMYK]).
  const int w = 16;
  const int h = 16;
  std::vector<uint8_t> cmyk(w * h * 4);
  std::vector<uint8_t> expect(w * h * 3);
  for (int i = 0; i < w * h; ++i) {
    const uint8_t k = i < w * h / 2 ? 255 : 128;
    cmyk[i * 4 + 0] = 200;
    cmyk[i * 4 + 1] = 100;
    cmyk[i * 4 + 2] = 30;
    cmyk[i * 4 + 3] = k;
    expect[i * 3 + 0] = static_cast<uint8_t>((200 * k + 127) / 255);
    expect[i * 3 + 1] = static_cast<uint8_t>((100 * k + 127) / 255);
    expect[i * 3 + 2] = static_cast<uint8_t>((30 * k + 127) / 255);
  }
  const std::vector<std::byte> jpeg =
      EncodeJpeg(cmyk, w, h, TJPF_CMYK, 100, TJSAMP_444);
  absl::StatusOr<JpegInfo> info = ReadJpegInfo(jpeg, "c.jpg");
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_TRUE(info->colorspace == JpegColorspace::kYcck ||
              info->colorspace == JpegColorspace::kCmyk)
      << JpegColorspaceName(info->colorspace);
  const std::vector<uint8_t> out = Decode(jpeg, w, h);
  // Blocks straddle the K edge at row 8 only at its border; compare away
  // from it.
  EXPECT_LE(MaxAbsDiff(out.data(), expect.data(), w * 3 * 4), kTolerance);
  EXPECT_LE(MaxAbsDiff(out.data() + w * 3 * 12, expect.data() + w * 3 * 12,
                       w * 3 * 4),
            kTolerance);
}

TEST(Jpeg, DecodesAOneByOneImage) {
  const std::vector<uint8_t> rgb = {10, 200, 90};
  const std::vector<uint8_t> out = Decode(EncodeJpeg(rgb, 1, 1), 1, 1);
  EXPECT_LE(MaxAbsDiff(out.data(), rgb.data(), 3), kTolerance);
  // At 1/8 a 1x1 image is still 1x1.
  EXPECT_EQ(ScaledJpegSize(1, JpegScale{1, 8}), 1);
  EXPECT_EQ(Decode(EncodeJpeg(rgb, 1, 1), 1, 1, JpegScale{1, 8}).size(), 3u);
}

TEST(Jpeg, RefusesAnEmptyFileNamingIt) {
  std::vector<uint8_t> out(3);
  absl::Status s = DecodeJpeg({}, "data/empty.jpg", {}, absl::MakeSpan(out));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("data/empty.jpg"));
  EXPECT_THAT(s.message(), HasSubstr("empty"));
}

TEST(Jpeg, RefusesPngBytesNamingThem) {
  const unsigned char png[] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n',
                               0,    0,   0,   13,  'I',  'H',  'D',  'R'};
  absl::StatusOr<JpegInfo> info = ReadJpegInfo(
      absl::MakeSpan(reinterpret_cast<const std::byte*>(png), sizeof(png)),
      "cat.jpg");
  EXPECT_EQ(info.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(info.status().message(), HasSubstr("cat.jpg"));
  EXPECT_THAT(info.status().message(), HasSubstr("PNG"));
}

TEST(Jpeg, RefusesATruncatedFile) {
  const std::vector<uint8_t> rgb = GradientRgb(64, 64);
  std::vector<std::byte> jpeg = EncodeJpeg(rgb, 64, 64);
  std::vector<uint8_t> out(64 * 64 * 3);
  // Cut in the entropy-coded data: the header parses, the decode fails.
  jpeg.resize(jpeg.size() * 2 / 3);
  absl::Status s = DecodeJpeg(jpeg, "cut.jpg", {}, absl::MakeSpan(out));
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_THAT(s.message(), HasSubstr("cut.jpg"));
  // Cut in the header.
  jpeg.resize(40);
  s = DecodeJpeg(jpeg, "cut.jpg", {}, absl::MakeSpan(out));
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_THAT(s.message(), HasSubstr("header"));
}

TEST(Jpeg, RefusesACorruptFile) {
  std::vector<std::byte> jpeg = EncodeJpeg(GradientRgb(64, 64), 64, 64);
  // Overwrite the middle of the entropy-coded data with marker bytes.
  for (size_t i = jpeg.size() / 2; i < jpeg.size() / 2 + 64; i += 2) {
    jpeg[i] = std::byte{0xff};
    jpeg[i + 1] = static_cast<std::byte>(0xd9 - i % 3);
  }
  std::vector<uint8_t> out(64 * 64 * 3);
  absl::Status s = DecodeJpeg(jpeg, "bad.jpg", {}, absl::MakeSpan(out));
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("bad.jpg"));
}

TEST(Jpeg, RefusesAHugeHeaderBeforeAllocating) {
  // A real 16x16 JPEG whose SOF claims 20000x20000: refused from its header.
  const std::vector<std::byte> jpeg =
      WithSofSize(EncodeJpeg(GradientRgb(16, 16), 16, 16), 20000, 20000);
  absl::StatusOr<JpegInfo> info = ReadJpegInfo(jpeg, "huge.jpg");
  EXPECT_EQ(info.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(info.status().message(), HasSubstr("huge.jpg"));
  EXPECT_THAT(info.status().message(), HasSubstr("20000x20000"));
  std::vector<uint8_t> out(16);
  EXPECT_EQ(DecodeJpeg(jpeg, "huge.jpg", {}, absl::MakeSpan(out)).code(),
            absl::StatusCode::kResourceExhausted);
  // Within the side limit but over the byte limit.
  const std::vector<std::byte> big =
      WithSofSize(EncodeJpeg(GradientRgb(16, 16), 16, 16), 16000, 16000);
  EXPECT_THAT(ReadJpegInfo(big, "big.jpg").status().message(),
              HasSubstr("max_decoded_bytes"));
}

TEST(Jpeg, RefusesAnOutputBufferTooSmall) {
  const std::vector<std::byte> jpeg = EncodeJpeg(GradientRgb(8, 8), 8, 8);
  std::vector<uint8_t> out(8 * 8 * 3 - 1);
  absl::Status s = DecodeJpeg(jpeg, "a.jpg", {}, absl::MakeSpan(out));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("needs 192"));
  EXPECT_EQ(
      DecodeJpeg(jpeg, "a.jpg", JpegScale{1, 3}, absl::MakeSpan(out)).code(),
      absl::StatusCode::kInvalidArgument);
}

// Returns the box of a full decode at `scale`, rows of box.width.
std::vector<uint8_t> CutBox(const std::vector<uint8_t>& full, int width,
                            const PixelBox& box) {
  std::vector<uint8_t> out;
  for (int y = box.y; y < box.y + box.height; ++y) {
    const uint8_t* row =
        full.data() + (static_cast<size_t>(y) * width + box.x) * 3;
    out.insert(out.end(), row, row + box.width * 3);
  }
  return out;
}

TEST(JpegRegion, EqualsTheSamePixelsOfAFullDecode) {
  const int w = 203;
  const int h = 157;
  const std::vector<uint8_t> rgb = GradientRgb(w, h);
  for (int subsampling : {TJSAMP_420, TJSAMP_444, TJSAMP_422}) {
    const std::vector<std::byte> jpeg =
        EncodeJpeg(rgb, w, h, TJPF_RGB, 85, subsampling);
    for (JpegScale scale :
         {JpegScale{1, 1}, JpegScale{1, 2}, JpegScale{3, 8}}) {
      const int sw = ScaledJpegSize(w, scale);
      const int sh = ScaledJpegSize(h, scale);
      const std::vector<uint8_t> full = Decode(jpeg, w, h, scale);
      for (PixelBox box :
           {PixelBox{0, 0, sw, sh}, PixelBox{5, 9, sw / 2, sh / 3},
            PixelBox{sw - 7, sh - 5, 7, 5}, PixelBox{17, 0, 1, 1}}) {
        std::vector<uint8_t> out(JpegRegionBytes(box));
        absl::StatusOr<PixelBox> got =
            DecodeJpegRegion(jpeg, "r.jpg", scale, box, absl::MakeSpan(out));
        ASSERT_TRUE(got.ok()) << got.status();
        // The decoded box holds the asked one: same rows, wider columns.
        EXPECT_EQ(got->y, box.y);
        EXPECT_EQ(got->height, box.height);
        ASSERT_LE(got->x, box.x);
        ASSERT_GE(got->x + got->width, box.x + box.width);
        // Chroma upsampling (4:2:0, 4:2:2) treats a cut edge as the image's
        // edge, so the outermost pixels along a cut may differ slightly;
        // everything one pixel inside is exact.
        const std::vector<uint8_t> expected = CutBox(full, sw, *got);
        int edge = 0;
        int inside = 0;
        for (int y = 0; y < got->height; ++y) {
          for (int x = 0; x < got->width; ++x) {
            const bool cut_edge =
                (x == 0 && got->x > 0) ||
                (x == got->width - 1 && got->x + got->width < sw) ||
                (y == 0 && got->y > 0) ||
                (y == got->height - 1 && got->y + got->height < sh);
            const size_t at = (static_cast<size_t>(y) * got->width + x) * 3;
            const int d = MaxAbsDiff(out.data() + at, expected.data() + at, 3);
            (cut_edge ? edge : inside) = std::max(cut_edge ? edge : inside, d);
          }
        }
        EXPECT_EQ(inside, 0)
            << "subsampling " << subsampling << " scale " << scale.num << "/"
            << scale.denom << " box " << box.x << "," << box.y << " "
            << box.width << "x" << box.height;
        EXPECT_LE(edge, 3);
      }
    }
  }
}

TEST(JpegRegion, DecodesAProgressiveJpeg) {
  const std::vector<uint8_t> rgb = GradientRgb(120, 90);
  const std::vector<std::byte> jpeg =
      EncodeJpeg(rgb, 120, 90, TJPF_RGB, 90, TJSAMP_444, TJFLAG_PROGRESSIVE);
  const std::vector<uint8_t> full = Decode(jpeg, 120, 90);
  const PixelBox box{16, 24, 40, 30};
  std::vector<uint8_t> out(JpegRegionBytes(box));
  absl::StatusOr<PixelBox> got =
      DecodeJpegRegion(jpeg, "p.jpg", {}, box, absl::MakeSpan(out));
  ASSERT_TRUE(got.ok()) << got.status();
  const std::vector<uint8_t> expected = CutBox(full, 120, *got);
  EXPECT_EQ(MaxAbsDiff(out.data(), expected.data(), expected.size()), 0);
}

TEST(JpegRegion, ConvertsGrayscaleAndCmyk) {
  std::vector<uint8_t> gray(40 * 24);
  for (size_t i = 0; i < gray.size(); ++i)
    gray[i] = static_cast<uint8_t>(i * 3);
  const std::vector<std::byte> g =
      EncodeJpeg(gray, 40, 24, TJPF_GRAY, 100, TJSAMP_GRAY);
  std::vector<uint8_t> cmyk(40 * 24 * 4, 200);
  const std::vector<std::byte> c =
      EncodeJpeg(cmyk, 40, 24, TJPF_CMYK, 100, TJSAMP_444);
  for (const auto* jpeg : {&g, &c}) {
    const std::vector<uint8_t> full = Decode(*jpeg, 40, 24);
    const PixelBox box{3, 4, 20, 10};
    std::vector<uint8_t> out(JpegRegionBytes(box));
    absl::StatusOr<PixelBox> got =
        DecodeJpegRegion(*jpeg, "gc.jpg", {}, box, absl::MakeSpan(out));
    ASSERT_TRUE(got.ok()) << got.status();
    const std::vector<uint8_t> expected = CutBox(full, 40, *got);
    EXPECT_EQ(MaxAbsDiff(out.data(), expected.data(), expected.size()), 0);
  }
}

TEST(JpegRegion, RefusesABoxOutsideAndNamesACorruptFile) {
  const std::vector<std::byte> jpeg = EncodeJpeg(GradientRgb(64, 64), 64, 64);
  std::vector<uint8_t> out(64 * 64 * 3 * 2);
  absl::StatusOr<PixelBox> got =
      DecodeJpegRegion(jpeg, "r.jpg", JpegScale{1, 2}, PixelBox{20, 0, 13, 4},
                       absl::MakeSpan(out));
  EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(got.status().message(), HasSubstr("not inside the 32x32"));
  std::vector<uint8_t> small(10);
  EXPECT_EQ(DecodeJpegRegion(jpeg, "r.jpg", {}, PixelBox{0, 0, 8, 8},
                             absl::MakeSpan(small))
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  std::vector<std::byte> cut = jpeg;
  cut.resize(cut.size() * 2 / 3);
  got = DecodeJpegRegion(cut, "cut.jpg", {}, PixelBox{0, 40, 64, 20},
                         absl::MakeSpan(out));
  EXPECT_EQ(got.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(got.status().message(), HasSubstr("cut.jpg"));
  // The decoder is usable again after an error.
  EXPECT_TRUE(DecodeJpegRegion(jpeg, "r.jpg", {}, PixelBox{0, 0, 8, 8},
                               absl::MakeSpan(out))
                  .ok());
}

// The corruptions of the audit of issue 35 and a few more: each one is a
// file the decoder must refuse, after which it must decode the next good
// file on the same thread as if nothing had happened.
std::vector<std::vector<std::byte>> CorruptJpegs(
    const std::vector<std::byte>& good, std::mt19937& rng) {
  std::vector<std::vector<std::byte>> bad;
  // ff d8 ff and then garbage.
  std::vector<std::byte> garbage = {std::byte{0xff}, std::byte{0xd8},
                                    std::byte{0xff}};
  for (int i = 0; i < 300; ++i) garbage.push_back(std::byte(rng() & 0xff));
  bad.push_back(garbage);
  // Cut inside the header (its quantisation and Huffman tables) at every
  // few bytes, and in the entropy-coded data.
  for (size_t cut = 4; cut < good.size(); cut += 1 + rng() % 97) {
    bad.emplace_back(good.begin(), good.begin() + cut);
  }
  // Random bytes overwritten in the header.
  for (int i = 0; i < 20; ++i) {
    std::vector<std::byte> flipped = good;
    const size_t at = 3 + rng() % 300;
    for (size_t j = at; j < at + 1 + rng() % 8 && j < flipped.size(); ++j) {
      flipped[j] = std::byte(rng() & 0xff);
    }
    bad.push_back(flipped);
  }
  return bad;
}

TEST(Jpeg, ACorruptFileNeverBreaksTheNextGoodOneOnTheSameThread) {
  const std::vector<std::byte> good =
      EncodeJpeg(GradientRgb(64, 48), 64, 48, TJPF_RGB, 90, TJSAMP_420);
  std::vector<uint8_t> reference(64 * 48 * 3);
  ASSERT_TRUE(DecodeJpeg(good, "good.jpg", {}, absl::MakeSpan(reference)).ok());
  std::mt19937 rng(35);
  const std::vector<std::vector<std::byte>> bad = CorruptJpegs(good, rng);
  std::vector<uint8_t> out(64 * 48 * 3 * 2);
  int refused = 0;
  for (size_t i = 0; i < bad.size(); ++i) {
    // A corrupt file through each entry point; most are refused (a flipped
    // byte in a comment may leave a valid file).
    refused += !ReadJpegInfo(bad[i], "bad.jpg").ok();
    refused += !DecodeJpeg(bad[i], "bad.jpg", {}, absl::MakeSpan(out)).ok();
    refused += !DecodeJpegRegion(bad[i], "bad.jpg", {}, PixelBox{8, 8, 16, 16},
                                 absl::MakeSpan(out))
                    .ok();
    // Then the good file, through each of them.
    absl::StatusOr<JpegInfo> info = ReadJpegInfo(good, "good.jpg");
    ASSERT_TRUE(info.ok()) << "after corrupt file " << i << ": "
                           << info.status();
    std::fill(out.begin(), out.end(), 0);
    absl::Status s = DecodeJpeg(good, "good.jpg", {}, absl::MakeSpan(out));
    ASSERT_TRUE(s.ok()) << "after corrupt file " << i << ": " << s;
    ASSERT_EQ(std::memcmp(out.data(), reference.data(), reference.size()), 0);
    const PixelBox box{0, 0, 64, 48};
    absl::StatusOr<PixelBox> region =
        DecodeJpegRegion(good, "good.jpg", {}, box, absl::MakeSpan(out));
    ASSERT_TRUE(region.ok())
        << "after corrupt file " << i << ": " << region.status();
    ASSERT_EQ(std::memcmp(out.data(), reference.data(), reference.size()), 0);
  }
  EXPECT_GT(refused, static_cast<int>(bad.size()));
}

TEST(Jpeg, RefusesATruncatedFileWhateverTheRegion) {
  const std::vector<std::byte> whole =
      EncodeJpeg(GradientRgb(128, 128), 128, 128, TJPF_RGB, 90, TJSAMP_420);
  for (size_t keep :
       {whole.size() - 2, whole.size() * 9 / 10, whole.size() / 2}) {
    const std::vector<std::byte> cut(whole.begin(), whole.begin() + keep);
    std::vector<uint8_t> out(JpegRegionBytes(PixelBox{0, 0, 128, 128}));
    // Regions at the top end long before the cut: refused all the same.
    for (const PixelBox& box : {PixelBox{0, 0, 16, 16}, PixelBox{40, 8, 64, 8},
                                PixelBox{0, 0, 128, 128}}) {
      absl::StatusOr<PixelBox> got =
          DecodeJpegRegion(cut, "cut.jpg", {}, box, absl::MakeSpan(out));
      EXPECT_EQ(got.status().code(), absl::StatusCode::kDataLoss)
          << keep << " of " << whole.size() << " bytes, box at y " << box.y;
      EXPECT_THAT(got.status().message(), HasSubstr("cut.jpg"));
    }
    EXPECT_EQ(DecodeJpeg(cut, "cut.jpg", {}, absl::MakeSpan(out)).code(),
              absl::StatusCode::kDataLoss);
  }
  // Bytes after the end-of-image marker are not a truncation.
  std::vector<std::byte> trailing = whole;
  trailing.resize(whole.size() + 100, std::byte{0});
  std::vector<uint8_t> out(128 * 128 * 3);
  EXPECT_TRUE(DecodeJpeg(trailing, "t.jpg", {}, absl::MakeSpan(out)).ok());
}

TEST(Jpeg, DecodesAJfif201FileAsPilDoes) {
  // libjpeg warns "unknown JFIF revision number 2.01"; the image is valid.
  std::vector<std::byte> jpeg = EncodeJpeg(GradientRgb(32, 16), 32, 16);
  ASSERT_EQ(static_cast<char>(jpeg[6]), 'J');
  ASSERT_EQ(static_cast<char>(jpeg[9]), 'F');
  jpeg[11] = std::byte{2};
  jpeg[12] = std::byte{1};
  std::vector<uint8_t> out(JpegRegionBytes(PixelBox{0, 0, 32, 16}));
  for (int twice = 0; twice < 2; ++twice) {
    absl::StatusOr<JpegInfo> info = ReadJpegInfo(jpeg, "v2.jpg");
    ASSERT_TRUE(info.ok()) << info.status();
    absl::Status s = DecodeJpeg(jpeg, "v2.jpg", {}, absl::MakeSpan(out));
    EXPECT_TRUE(s.ok()) << s;
    absl::StatusOr<PixelBox> region = DecodeJpegRegion(
        jpeg, "v2.jpg", {}, PixelBox{4, 4, 8, 8}, absl::MakeSpan(out));
    EXPECT_TRUE(region.ok()) << region.status();
  }
}

TEST(Jpeg, IgnoresExifOrientationAsDocumented) {
  // Issue 35: EXIF orientation is not applied (jpeg.h): a file tagged
  // "rotate 90" decodes to the pixels as stored, as the same file without
  // the tag does (torchvision's decode_jpeg and PIL without exif_transpose
  // agree).
  const std::vector<std::byte> plain = EncodeJpeg(GradientRgb(40, 16), 40, 16);
  // APP1 "Exif\0\0", little-endian TIFF, one IFD entry: Orientation (0x0112)
  // SHORT 1 = 6 (rotate 90 clockwise to display).
  const unsigned char exif[] = {
      0xff, 0xe1, 0x00, 0x22, 'E',  'x',  'i',  'f',  0x00, 0x00, 'I',  'I',
      0x2a, 0x00, 0x08, 0x00, 0x00, 0x00, 0x01, 0x00, 0x12, 0x01, 0x03, 0x00,
      0x01, 0x00, 0x00, 0x00, 0x06, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00};
  std::vector<std::byte> tagged(plain.begin(), plain.begin() + 2);
  for (unsigned char c : exif) tagged.push_back(static_cast<std::byte>(c));
  tagged.insert(tagged.end(), plain.begin() + 2, plain.end());
  absl::StatusOr<JpegInfo> info = ReadJpegInfo(tagged, "exif.jpg");
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->width, 40);  // not swapped to 16x40
  EXPECT_EQ(info->height, 16);
  EXPECT_EQ(Decode(tagged, 40, 16), Decode(plain, 40, 16));
}

}  // namespace
}  // namespace pinwheel
