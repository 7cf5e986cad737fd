#include "loader/image/jpeg.h"

#include <cstdint>
#include <cstring>
#include <string>
#include <turbojpeg.h>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/types/span.h"

#include "loader/image/internal/jpeg_decompressor.h"

namespace pinwheel {
namespace {

// Names what the first bytes look like, for a file that is not a JPEG.
std::string WhatTheBytesAre(absl::Span<const std::byte> bytes) {
  static constexpr unsigned char kPng[] = {0x89, 'P', 'N', 'G'};
  static constexpr unsigned char kGif[] = {'G', 'I', 'F', '8'};
  if (bytes.size() >= 4 && std::memcmp(bytes.data(), kPng, 4) == 0) {
    return "PNG data";
  }
  if (bytes.size() >= 4 && std::memcmp(bytes.data(), kGif, 4) == 0) {
    return "GIF data";
  }
  std::string first;
  for (size_t i = 0; i < bytes.size() && i < 4; ++i) {
    absl::StrAppendFormat(&first, "%s%02x", i == 0 ? "" : " ",
                          static_cast<unsigned>(bytes[i]));
  }
  return absl::StrCat("bytes starting ", first);
}

bool LooksLikeJpeg(absl::Span<const std::byte> bytes) {
  return bytes.size() >= 3 && bytes[0] == std::byte{0xff} &&
         bytes[1] == std::byte{0xd8} && bytes[2] == std::byte{0xff};
}

absl::Status CheckIsJpeg(absl::Span<const std::byte> bytes,
                         absl::string_view name) {
  if (bytes.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("JPEG ", name, ": the file is empty"));
  }
  if (!LooksLikeJpeg(bytes)) {
    return absl::InvalidArgumentError(
        absl::StrCat("JPEG ", name, ": not a JPEG (", WhatTheBytesAre(bytes),
                     ", ", bytes.size(), " bytes; a JPEG starts ff d8 ff)"));
  }
  return absl::OkStatus();
}

absl::Span<const tjscalingfactor> ScalingFactors() {
  static const absl::Span<const tjscalingfactor> factors = [] {
    int n = 0;
    const tjscalingfactor* f = tjGetScalingFactors(&n);
    return f == nullptr ? absl::Span<const tjscalingfactor>()
                        : absl::Span<const tjscalingfactor>(f, n);
  }();
  return factors;
}

// The per-thread scratch of a CMYK decode (see Note [CMYK]): grows to the
// largest CMYK image seen, never shrinks.
std::vector<uint8_t>& CmykScratch() {
  thread_local std::vector<uint8_t> scratch;
  return scratch;
}

// Note [CMYK]: JPEG files from Adobe applications (nearly all CMYK JPEGs)
// store inverted CMYK, 255 meaning no ink, which libjpeg hands back
// unchanged. Without a colour management system the usual conversion
// (PIL's and libjpeg-turbo's own tools') is then R = C * K / 255, and
// likewise G from M and B from Y.
void CmykToRgb(const uint8_t* src, int64_t pixels, uint8_t* dst) {
  for (int64_t p = 0; p < pixels; ++p, src += 4, dst += 3) {
    const unsigned k = src[3];
    dst[0] = static_cast<uint8_t>((src[0] * k + 127) / 255);
    dst[1] = static_cast<uint8_t>((src[1] * k + 127) / 255);
    dst[2] = static_cast<uint8_t>((src[2] * k + 127) / 255);
  }
}

bool IsCmyk(const JpegInfo& info) {
  return info.colorspace == JpegColorspace::kCmyk ||
         info.colorspace == JpegColorspace::kYcck;
}

// Decodes `box` of the image at `scale` as RGB into `out` (see
// DecodeJpegRows), through the CMYK scratch when the file is CMYK/YCCK.
absl::StatusOr<PixelBox> DecodeBox(absl::Span<const std::byte> bytes,
                                   absl::string_view name, const JpegInfo& info,
                                   JpegScale scale, const PixelBox& box,
                                   absl::Span<uint8_t> out) {
  if (!IsCmyk(info)) {
    return internal::DecodeJpegRows(bytes, name, info, scale, box,
                                    internal::JpegPixels::kRgb, out);
  }
  // libjpeg does not convert CMYK to RGB: decode CMYK, then convert.
  std::vector<uint8_t>& cmyk = CmykScratch();
  const size_t pixels = out.size() / 3;
  if (cmyk.size() < pixels * 4) cmyk.resize(pixels * 4);
  absl::StatusOr<PixelBox> decoded = internal::DecodeJpegRows(
      bytes, name, info, scale, box, internal::JpegPixels::kCmyk,
      absl::MakeSpan(cmyk.data(), pixels * 4));
  if (!decoded.ok()) return decoded.status();
  CmykToRgb(cmyk.data(), int64_t{decoded->width} * decoded->height, out.data());
  return decoded;
}

}  // namespace

absl::string_view JpegColorspaceName(JpegColorspace colorspace) {
  switch (colorspace) {
    case JpegColorspace::kRgb:
      return "RGB";
    case JpegColorspace::kYCbCr:
      return "YCbCr";
    case JpegColorspace::kGray:
      return "grayscale";
    case JpegColorspace::kCmyk:
      return "CMYK";
    case JpegColorspace::kYcck:
      return "YCCK";
  }
  return "unknown";
}

absl::string_view JpegSubsamplingName(JpegSubsampling subsampling) {
  switch (subsampling) {
    case JpegSubsampling::k444:
      return "4:4:4";
    case JpegSubsampling::k422:
      return "4:2:2";
    case JpegSubsampling::k420:
      return "4:2:0";
    case JpegSubsampling::kGray:
      return "grayscale";
    case JpegSubsampling::k440:
      return "4:4:0";
    case JpegSubsampling::k411:
      return "4:1:1";
    case JpegSubsampling::kUnknown:
      break;
  }
  return "unknown";
}

int ScaledJpegSize(int size, JpegScale scale) {
  return static_cast<int>((int64_t{size} * scale.num + scale.denom - 1) /
                          scale.denom);
}

int64_t DecodedJpegBytes(const JpegInfo& info, JpegScale scale) {
  return int64_t{ScaledJpegSize(info.width, scale)} *
         ScaledJpegSize(info.height, scale) * 3;
}

JpegScale ChooseJpegScale(double region_width, double region_height,
                          int out_width, int out_height) {
  JpegScale best;
  for (const tjscalingfactor& f : ScalingFactors()) {
    if (f.num > f.denom) continue;  // never enlarge in the decoder
    if (f.num != 1) continue;       // see Note [fast scales] in jpeg.h
    if (region_width * f.num / f.denom < out_width ||
        region_height * f.num / f.denom < out_height) {
      continue;
    }
    if (int64_t{f.num} * best.denom < int64_t{best.num} * f.denom) {
      best = JpegScale{f.num, f.denom};
    }
  }
  return best;
}

absl::StatusOr<JpegInfo> ReadJpegInfo(absl::Span<const std::byte> bytes,
                                      absl::string_view name,
                                      const JpegLimits& limits) {
  if (absl::Status s = CheckIsJpeg(bytes, name); !s.ok()) return s;
  return internal::ReadJpegHeader(bytes, name, limits, /*check_end=*/false);
}

namespace {

// The header, for a decode: a truncated file is refused before anything
// is decoded, whatever part of it the decode would reach.
absl::StatusOr<JpegInfo> ReadHeaderToDecode(absl::Span<const std::byte> bytes,
                                            absl::string_view name,
                                            const JpegLimits& limits) {
  if (absl::Status s = CheckIsJpeg(bytes, name); !s.ok()) return s;
  return internal::ReadJpegHeader(bytes, name, limits, /*check_end=*/true);
}

}  // namespace

absl::Status DecodeJpeg(absl::Span<const std::byte> bytes,
                        absl::string_view name, JpegScale scale,
                        absl::Span<uint8_t> out, const JpegLimits& limits) {
  bool known_scale = false;
  for (const tjscalingfactor& f : ScalingFactors()) {
    known_scale |= f.num == scale.num && f.denom == scale.denom;
  }
  if (!known_scale) {
    return absl::InvalidArgumentError(
        absl::StrCat("JPEG ", name, ": ", scale.num, "/", scale.denom,
                     " is not one of TurboJPEG's scaling factors"));
  }
  absl::StatusOr<JpegInfo> info = ReadHeaderToDecode(bytes, name, limits);
  if (!info.ok()) return info.status();
  const int width = ScaledJpegSize(info->width, scale);
  const int height = ScaledJpegSize(info->height, scale);
  const int64_t need = int64_t{width} * height * 3;
  if (static_cast<int64_t>(out.size()) < need) {
    return absl::InvalidArgumentError(absl::StrCat(
        "JPEG ", name, ": the output buffer holds ", out.size(), " bytes; the ",
        width, "x", height, " RGB decode needs ", need));
  }
  // The whole image: no column is cropped, so the rows are exactly width.
  return DecodeBox(bytes, name, *info, scale, PixelBox{0, 0, width, height},
                   out.subspan(0, static_cast<size_t>(need)))
      .status();
}

int64_t JpegRegionBytes(const PixelBox& box) {
  return (int64_t{box.width} + 64) * box.height * 3;
}

absl::StatusOr<PixelBox> DecodeJpegRegion(absl::Span<const std::byte> bytes,
                                          absl::string_view name,
                                          JpegScale scale, const PixelBox& box,
                                          absl::Span<uint8_t> out,
                                          const JpegLimits& limits) {
  absl::StatusOr<JpegInfo> info = ReadHeaderToDecode(bytes, name, limits);
  if (!info.ok()) return info.status();
  if (absl::Status s = internal::CheckJpegBox(name, *info, scale, box);
      !s.ok()) {
    return s;
  }
  if (static_cast<int64_t>(out.size()) < JpegRegionBytes(box)) {
    return absl::InvalidArgumentError(
        absl::StrCat("JPEG ", name, ": the output buffer holds ", out.size(),
                     " bytes; the box needs up to ", JpegRegionBytes(box)));
  }
  return DecodeBox(bytes, name, *info, scale, box, out);
}

}  // namespace pinwheel
