#include "loader/image/jpeg.h"

#include <cstdint>
#include <cstring>
#include <turbojpeg.h>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/types/span.h"

namespace pinwheel {
namespace {

// One thread's TurboJPEG state (see the file comment in jpeg.h): the handle
// is made on first use and destroyed when the thread exits.
struct ThreadDecoder {
  ThreadDecoder() = default;
  ThreadDecoder(const ThreadDecoder&) = delete;
  ThreadDecoder& operator=(const ThreadDecoder&) = delete;
  ~ThreadDecoder() {
    if (handle != nullptr) tjDestroy(handle);
  }
  tjhandle handle = nullptr;
  std::vector<uint8_t> cmyk;  // CMYK decodes only; grows, never shrinks
};

absl::StatusOr<ThreadDecoder*> ThisThreadDecoder() {
  thread_local ThreadDecoder decoder;
  if (decoder.handle == nullptr) {
    decoder.handle = tjInitDecompress();
    if (decoder.handle == nullptr) {
      return absl::ResourceExhaustedError(
          absl::StrCat("creating a TurboJPEG decompressor failed: ",
                       tjGetErrorStr2(nullptr)));
    }
  }
  return &decoder;
}

const unsigned char* Bytes(absl::Span<const std::byte> bytes) {
  return reinterpret_cast<const unsigned char*>(bytes.data());
}

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

JpegColorspace ToColorspace(int tj) {
  switch (tj) {
    case TJCS_RGB:
      return JpegColorspace::kRgb;
    case TJCS_GRAY:
      return JpegColorspace::kGray;
    case TJCS_CMYK:
      return JpegColorspace::kCmyk;
    case TJCS_YCCK:
      return JpegColorspace::kYcck;
    default:
      return JpegColorspace::kYCbCr;
  }
}

JpegSubsampling ToSubsampling(int tj) {
  switch (tj) {
    case TJSAMP_444:
      return JpegSubsampling::k444;
    case TJSAMP_422:
      return JpegSubsampling::k422;
    case TJSAMP_420:
      return JpegSubsampling::k420;
    case TJSAMP_GRAY:
      return JpegSubsampling::kGray;
    case TJSAMP_440:
      return JpegSubsampling::k440;
    case TJSAMP_411:
      return JpegSubsampling::k411;
    default:
      return JpegSubsampling::kUnknown;
  }
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

absl::StatusOr<JpegInfo> ReadHeader(tjhandle handle,
                                    absl::Span<const std::byte> bytes,
                                    absl::string_view name,
                                    const JpegLimits& limits) {
  if (absl::Status s = CheckIsJpeg(bytes, name); !s.ok()) return s;
  int width = 0;
  int height = 0;
  int subsampling = -1;
  int colorspace = -1;
  if (tjDecompressHeader3(handle, Bytes(bytes), bytes.size(), &width, &height,
                          &subsampling, &colorspace) != 0) {
    return absl::DataLossError(
        absl::StrCat("JPEG ", name, ": corrupt or truncated header (",
                     bytes.size(), " bytes): ", tjGetErrorStr2(handle)));
  }
  if (width <= 0 || height <= 0) {
    return absl::DataLossError(absl::StrCat("JPEG ", name, ": the header says ",
                                            width, "x", height, " pixels"));
  }
  if (width > limits.max_dimension || height > limits.max_dimension) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "JPEG ", name, ": ", width, "x", height,
        " pixels is over the limit of ", limits.max_dimension,
        " pixels a side (JpegLimits::max_dimension); refused before decoding"));
  }
  const int64_t decoded = int64_t{width} * height * 3;
  if (decoded > limits.max_decoded_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "JPEG ", name, ": ", width, "x", height, " pixels decode to ", decoded,
        " bytes, over the limit of ", limits.max_decoded_bytes,
        " (JpegLimits::max_decoded_bytes); refused before decoding"));
  }
  return JpegInfo{.width = width,
                  .height = height,
                  .colorspace = ToColorspace(colorspace),
                  .subsampling = ToSubsampling(subsampling)};
}

// Flags of every decode: libjpeg's warnings (a truncated file, a corrupt
// entropy segment) stop it as errors, and a progressive JPEG may have at
// most 500 scans (a hostile one with thousands takes seconds).
constexpr int kDecodeFlags = TJFLAG_STOPONWARNING | TJFLAG_LIMITSCANS;

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
  absl::StatusOr<ThreadDecoder*> decoder = ThisThreadDecoder();
  if (!decoder.ok()) return decoder.status();
  return ReadHeader((*decoder)->handle, bytes, name, limits);
}

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
  absl::StatusOr<ThreadDecoder*> decoder_or = ThisThreadDecoder();
  if (!decoder_or.ok()) return decoder_or.status();
  ThreadDecoder& decoder = **decoder_or;
  absl::StatusOr<JpegInfo> info =
      ReadHeader(decoder.handle, bytes, name, limits);
  if (!info.ok()) return info.status();
  const int width = ScaledJpegSize(info->width, scale);
  const int height = ScaledJpegSize(info->height, scale);
  const int64_t need = int64_t{width} * height * 3;
  if (static_cast<int64_t>(out.size()) < need) {
    return absl::InvalidArgumentError(absl::StrCat(
        "JPEG ", name, ": the output buffer holds ", out.size(), " bytes; the ",
        width, "x", height, " RGB decode needs ", need));
  }
  const bool cmyk = info->colorspace == JpegColorspace::kCmyk ||
                    info->colorspace == JpegColorspace::kYcck;
  unsigned char* target = out.data();
  int pixel_format = TJPF_RGB;
  if (cmyk) {
    // TurboJPEG gives CMYK as stored; it is converted below.
    decoder.cmyk.resize(static_cast<size_t>(width) * height * 4);
    target = decoder.cmyk.data();
    pixel_format = TJPF_CMYK;
  }
  if (tjDecompress2(decoder.handle, Bytes(bytes), bytes.size(), target, width,
                    width * tjPixelSize[pixel_format], height, pixel_format,
                    kDecodeFlags) != 0) {
    return absl::DataLossError(absl::StrCat(
        "JPEG ", name, " (", info->width, "x", info->height, " ",
        JpegColorspaceName(info->colorspace), ", ", bytes.size(),
        " bytes): corrupt or truncated: ", tjGetErrorStr2(decoder.handle)));
  }
  if (cmyk) {
    // Note [CMYK]: JPEG files from Adobe applications (nearly all CMYK
    // JPEGs) store inverted CMYK, 255 meaning no ink, which libjpeg hands
    // back unchanged. Without a colour management system the usual
    // conversion (PIL's and libjpeg-turbo's own tools') is then
    // R = C * K / 255, and likewise G from M and B from Y.
    const uint8_t* src = decoder.cmyk.data();
    uint8_t* dst = out.data();
    const int64_t pixels = int64_t{width} * height;
    for (int64_t p = 0; p < pixels; ++p, src += 4, dst += 3) {
      const unsigned k = src[3];
      dst[0] = static_cast<uint8_t>((src[0] * k + 127) / 255);
      dst[1] = static_cast<uint8_t>((src[1] * k + 127) / 255);
      dst[2] = static_cast<uint8_t>((src[2] * k + 127) / 255);
    }
  }
  return absl::OkStatus();
}

}  // namespace pinwheel
