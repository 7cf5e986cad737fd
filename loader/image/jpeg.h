// JPEG decode with libjpeg-turbo (its libjpeg API), for image datasets:
// the header alone (size, colourspace, subsampling) and a decode to RGB u8
// HWC straight into a caller's buffer, optionally at a reduced DCT scale
// (1/2, 1/4, 1/8, ...: the decoder skips the detail it would throw away).
// Grayscale and CMYK/YCCK JPEGs come out as RGB.
//
// Example (inside a Dataset::Read):
//   PINWHEEL_ASSIGN_OR_RETURN(JpegInfo info, ReadJpegInfo(bytes, path));
//   const JpegScale scale = ChooseJpegScale(info.width, info.height, 224, 224);
//   std::vector<uint8_t> rgb(DecodedJpegBytes(info, scale));
//   PINWHEEL_RETURN_IF_ERROR(DecodeJpeg(bytes, path, scale, rgb));
//
// Every failure is a Status naming the file (the `name` the caller passes)
// and what was wrong: InvalidArgument for bytes that are not a JPEG (empty,
// PNG, a bad marker), DataLoss for a truncated or corrupt JPEG (libjpeg's
// warnings about the data, such as "Premature end of JPEG file", count as
// errors, so a half-grey image never passes as decoded; its warnings about
// metadata, such as an unknown JFIF revision 2.01, do not), ResourceExhausted
// for an image over JpegLimits, refused from its header before anything is
// allocated. A file is truncated when no end-of-image marker follows its
// scan data: DecodeJpeg and DecodeJpegRegion refuse it before decoding,
// whatever region is asked for (ReadJpegInfo reads the header alone). A
// failure never affects the next call on the same thread (see
// Note [one decoder] in internal/jpeg_decompressor.cc).
//
// EXIF orientation is not applied: pixels come out as stored, as
// torchvision's decode_jpeg and PIL's Image.open give them (without
// ImageOps.exif_transpose). Rotate such files when preparing the data.
//
// Each thread decodes with a libjpeg decompressor of its own (created on the
// thread's first decode, destroyed when the thread exits) and, for CMYK only,
// a scratch buffer that grows to the largest CMYK image seen: no per-image
// heap allocation once warm. All functions are thread-safe.
#ifndef PINWHEEL_LOADER_IMAGE_JPEG_H_
#define PINWHEEL_LOADER_IMAGE_JPEG_H_

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace pinwheel {

// The colour space of the JPEG's stored components.
enum class JpegColorspace { kRgb, kYCbCr, kGray, kCmyk, kYcck };
// The chroma subsampling of the JPEG (TurboJPEG's TJSAMP_*); kUnknown for
// a layout TurboJPEG does not name.
enum class JpegSubsampling { k444, k422, k420, kGray, k440, k411, kUnknown };

// Returns "YCbCr", "4:2:0", ... for messages and logs.
absl::string_view JpegColorspaceName(JpegColorspace colorspace);
absl::string_view JpegSubsamplingName(JpegSubsampling subsampling);

// What a decode refuses before allocating or decoding anything.
struct JpegLimits {
  // Largest width and largest height accepted, in pixels (>= 1).
  int max_dimension = 16384;
  // Largest full-size decode accepted, width × height × 3 bytes (>= 1):
  // 16384 × 16384 × 3 = 768 MiB would pass the dimension limit, so this
  // one (256 MiB) is the one that usually refuses a hostile header.
  int64_t max_decoded_bytes = int64_t{256} << 20;
};

// A JPEG's header.
struct JpegInfo {
  int width = 0;   // pixels
  int height = 0;  // pixels
  JpegColorspace colorspace = JpegColorspace::kYCbCr;
  JpegSubsampling subsampling = JpegSubsampling::kUnknown;
};

// A DCT-domain scaling factor num/denom, one of TurboJPEG's (1/8 .. 2/1).
struct JpegScale {
  int num = 1;
  int denom = 1;
  friend bool operator==(const JpegScale&, const JpegScale&) = default;
};

// Returns `size` pixels scaled by `scale` as the decoder rounds it (up).
int ScaledJpegSize(int size, JpegScale scale);

// Returns the bytes of an RGB decode of `info` at `scale`.
int64_t DecodedJpegBytes(const JpegInfo& info, JpegScale scale);

// Returns the smallest of the scales 1/1, 1/2, 1/4, 1/8 at which a region
// of region_width × region_height full-size pixels still measures at least
// out_width × out_height (so the resize after it only shrinks or keeps the
// size, never enlarges what the decoder could have given); 1/1 when no
// smaller one does. REQUIRES: all arguments > 0.
//
// Note [fast scales]: libjpeg-turbo also scales by M/8 (7/8, 3/4, ...), but
// only the 8x8, 4x4, 2x2 and 1x1 inverse DCTs have SIMD code; the others
// (3x3 .. 7x7, and for 4:2:0 chroma 6x6 .. 14x14) are scalar. Measured again
// with the fixed-point resize (issue 32; jpeg_stage_split, 500 make_images
// JPEGs, RandomResizedCrop(224), one thread, median of 5, us an image):
// these four scales 999.6-1017.1; every M/8 1043.5 (the IDCT and
// upsampling 263 -> 320 us, the resize 188 -> 171); adding 3/8 alone
// 1037.3, 5/8 999.0, 6/8 1019.4, 7/8 1113.0. No M/8 pays for its scalar
// IDCT, so they stay out; `jpeg_stage_split --scales=fast,eighths,plus5`
// measures it again on another machine.
JpegScale ChooseJpegScale(double region_width, double region_height,
                          int out_width, int out_height);

// Returns the header of the JPEG in `bytes`, or a Status naming `name` (see
// the file comment); images over `limits` are ResourceExhausted.
[[nodiscard]] absl::StatusOr<JpegInfo> ReadJpegInfo(
    absl::Span<const std::byte> bytes, absl::string_view name,
    const JpegLimits& limits = {});

// Decodes the JPEG in `bytes` at `scale` into `out` as RGB u8, rows of
// ScaledJpegSize(width, scale) × 3 bytes, ScaledJpegSize(height, scale) rows,
// no padding. `out` smaller than that is InvalidArgument (nothing written);
// bytes past it are left alone. On a decode error `out` may hold part of the
// image. `scale` must be one of TurboJPEG's factors (InvalidArgument else).
[[nodiscard]] absl::Status DecodeJpeg(absl::Span<const std::byte> bytes,
                                      absl::string_view name, JpegScale scale,
                                      absl::Span<uint8_t> out,
                                      const JpegLimits& limits = {});

// A rectangle of whole pixels of a (scaled) image.
struct PixelBox {
  int x = 0;
  int y = 0;
  int width = 0;
  int height = 0;
};

// Returns the most bytes DecodeJpegRegion() writes for `box`: its rows,
// each widened by up to two of the decoder's blocks (64 pixels), RGB.
int64_t JpegRegionBytes(const PixelBox& box);

// Decodes only `box` of the JPEG in `bytes` scaled by `scale`, through the
// libjpeg API of libjpeg-turbo: the
// rows above the box are skipped (jpeg_skip_scanlines: entropy-decoded but
// not transformed), the rows below are not decoded at all, and the columns
// outside it are not transformed (jpeg_crop_scanline, which widens the box
// to the decoder's block boundaries). Returns the box actually decoded (the
// same rows; x moved left and width grown to those boundaries) and writes
// its rows, width * 3 bytes each, to `out`. Pixels equal a full decode's
// except, with 4:2:0 or 4:2:2 chroma, the outermost ones along a cut edge
// (the upsampling treats it as the image's edge): within 3 levels.
// CMYK/YCCK JPEGs are decoded as CMYK into per-thread scratch and
// converted. Errors as DecodeJpeg's; a box not inside the scaled image, or
// `out` smaller than JpegRegionBytes(box), is InvalidArgument.
[[nodiscard]] absl::StatusOr<PixelBox> DecodeJpegRegion(
    absl::Span<const std::byte> bytes, absl::string_view name, JpegScale scale,
    const PixelBox& box, absl::Span<uint8_t> out,
    const JpegLimits& limits = {});

}  // namespace pinwheel

#endif  // PINWHEEL_LOADER_IMAGE_JPEG_H_
