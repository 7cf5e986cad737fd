// CheckJpegFraming on real JPEGs (from TurboJPEG), cut and broken ones.
#include "transfer/jpeg/jpeg_framing.h"

#include <cstdint>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <vector>

#ifdef PINWHEEL_TEST_HAVE_TURBOJPEG
#include "tests/transfer/turbojpeg_reference.h"
#endif

namespace pinwheel::internal {
namespace {

using ::testing::HasSubstr;

absl::Span<const uint8_t> Bytes(const std::vector<uint8_t>& v) {
  return absl::MakeConstSpan(v);
}

TEST(JpegFraming, RejectsWhatIsNotAJpeg) {
  const std::vector<uint8_t> empty;
  const std::vector<uint8_t> png = {0x89, 'P',  'N',  'G',
                                    0x0D, 0x0A, 0x1A, 0x0A};
  for (const auto* bytes : {&empty, &png}) {
    absl::Status status = CheckJpegFraming(Bytes(*bytes));
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(status.message(), HasSubstr("start-of-image marker FF D8"));
  }
}

TEST(JpegFraming, RejectsAMarkerlessByteAfterTheHeader) {
  const std::vector<uint8_t> bytes = {0xFF, 0xD8, 0x12, 0x34, 0x56};
  absl::Status status = CheckJpegFraming(Bytes(bytes));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("byte 2 is 0x12"));
}

TEST(JpegFraming, RejectsAnEndMarkerBeforeAnyScan) {
  const std::vector<uint8_t> bytes = {0xFF, 0xD8, 0xFF, 0xD9};
  EXPECT_THAT(CheckJpegFraming(Bytes(bytes)).message(),
              HasSubstr("before any scan"));
}

TEST(JpegFraming, SkipsAnEndMarkerInsideASegmentBeforeTheScan) {
  // An APP1 segment (an EXIF thumbnail, say) holding FF D9, then a scan
  // header and no end marker: still truncated.
  const std::vector<uint8_t> bytes = {0xFF, 0xD8, 0xFF, 0xE1, 0x00,
                                      0x04, 0xFF, 0xD9, 0xFF, 0xDA,
                                      0x00, 0x02, 0x11, 0x22, 0x33};
  EXPECT_THAT(CheckJpegFraming(Bytes(bytes)).message(),
              HasSubstr("without the end-of-image marker"));
}

TEST(JpegFraming, RejectsASegmentLongerThanTheData) {
  const std::vector<uint8_t> bytes = {0xFF, 0xD8, 0xFF, 0xDB, 0x01, 0x00, 0x00};
  EXPECT_THAT(CheckJpegFraming(Bytes(bytes)).message(),
              HasSubstr("inside the segment of marker FF db"));
}

#ifdef PINWHEEL_TEST_HAVE_TURBOJPEG

TEST(JpegFraming, AcceptsWholeJpegsAndRejectsEveryCutOfThem) {
  for (bool progressive : {false, true}) {
    const std::vector<uint8_t> jpeg = testing::Compress(
        testing::TestPicture(40, 30, 1), 40, 30,
        {.subsampling = TJSAMP_420, .quality = 90, .progressive = progressive});
    ASSERT_TRUE(CheckJpegFraming(Bytes(jpeg)).ok()) << progressive;
    // Every proper prefix that ends before the EOI marker is refused.
    for (size_t cut = 0; cut + 1 < jpeg.size(); ++cut) {
      std::vector<uint8_t> prefix(jpeg.begin(), jpeg.begin() + cut);
      EXPECT_EQ(CheckJpegFraming(Bytes(prefix)).code(),
                absl::StatusCode::kInvalidArgument)
          << "progressive " << progressive << ", cut at " << cut;
    }
  }
}

#else

TEST(JpegFraming, AcceptsWholeJpegsAndRejectsEveryCutOfThem) {
  GTEST_SKIP() << "TurboJPEG (libturbojpeg0-dev) not found: no JPEGs to cut";
}

#endif

}  // namespace
}  // namespace pinwheel::internal
