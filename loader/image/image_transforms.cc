#include "loader/image/image_transforms.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

#include "loader/image/internal/resample.h"
#include "loader/image/jpeg.h"

namespace pinwheel {
namespace {

// DecodeResizedCrop's scaled decode of a thread: grows to the largest
// box seen, never shrinks.
std::vector<uint8_t>& ThisThreadDecoded() {
  thread_local std::vector<uint8_t> decoded;
  return decoded;
}

}  // namespace

CropRegion RandomResizedCropRegion(int width, int height, SampleRandom& random,
                                   const RandomResizedCropOptions& options) {
  const double area = static_cast<double>(width) * height;
  const double log_min = std::log(options.min_ratio);
  const double log_max = std::log(options.max_ratio);
  for (int attempt = 0; attempt < options.attempts; ++attempt) {
    const double target_area =
        area * (options.min_scale +
                random.Uniform() * (options.max_scale - options.min_scale));
    const double ratio =
        std::exp(log_min + random.Uniform() * (log_max - log_min));
    const int w =
        static_cast<int>(std::nearbyint(std::sqrt(target_area * ratio)));
    const int h =
        static_cast<int>(std::nearbyint(std::sqrt(target_area / ratio)));
    if (w > 0 && w <= width && h > 0 && h <= height) {
      const int64_t y = random.UniformInt(0, height - h);
      const int64_t x = random.UniformInt(0, width - w);
      return CropRegion{.x = static_cast<double>(x),
                        .y = static_cast<double>(y),
                        .width = static_cast<double>(w),
                        .height = static_cast<double>(h)};
    }
  }
  // The fallback: the central crop of the whole image, its ratio clamped.
  const double in_ratio = static_cast<double>(width) / height;
  int w = width;
  int h = height;
  if (in_ratio < options.min_ratio) {
    h = static_cast<int>(std::nearbyint(w / options.min_ratio));
  } else if (in_ratio > options.max_ratio) {
    w = static_cast<int>(std::nearbyint(h * options.max_ratio));
  }
  w = std::clamp(w, 1, width);
  h = std::clamp(h, 1, height);
  return CropRegion{.x = static_cast<double>((width - w) / 2),
                    .y = static_cast<double>((height - h) / 2),
                    .width = static_cast<double>(w),
                    .height = static_cast<double>(h)};
}

CropRegion CenterCropRegion(int width, int height, int resize_size,
                            int crop_size) {
  // Resize(resize_size): the shorter side becomes resize_size, the longer
  // one resize_size * long / short truncated (torchvision's rule).
  int resized_w = resize_size;
  int resized_h = resize_size;
  if (width <= height) {
    resized_h = static_cast<int>(int64_t{resize_size} * height / width);
  } else {
    resized_w = static_cast<int>(int64_t{resize_size} * width / height);
  }
  // CenterCrop(crop_size): offsets round half to even, as Python's round().
  const double left = std::nearbyint((resized_w - crop_size) / 2.0);
  const double top = std::nearbyint((resized_h - crop_size) / 2.0);
  const double sx = static_cast<double>(width) / resized_w;
  const double sy = static_cast<double>(height) / resized_h;
  return CropRegion{.x = left * sx,
                    .y = top * sy,
                    .width = crop_size * sx,
                    .height = crop_size * sy};
}

absl::Status ResizeRegion(const RgbImageView& image, const CropRegion& region,
                          int out_width, int out_height, bool flip,
                          absl::Span<uint8_t> out) {
  if (out_width <= 0 || out_height <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("resize: the output size ",
                                                   out_width, "x", out_height,
                                                   " is not positive"));
  }
  if (image.data == nullptr || image.width <= 0 || image.height <= 0 ||
      image.row_bytes < int64_t{image.width} * 3) {
    return absl::InvalidArgumentError(absl::StrCat(
        "resize: the input image (", image.width, "x", image.height, ", ",
        image.row_bytes, " bytes a row) is empty or its rows are too short"));
  }
  if (!(region.width > 0 && region.height > 0 && region.x >= 0 &&
        region.y >= 0 && region.x + region.width <= image.width + 1e-6 &&
        region.y + region.height <= image.height + 1e-6)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "resize: the region ", region.width, "x", region.height, " at (",
        region.x, ", ", region.y, ") is empty or not inside the ", image.width,
        "x", image.height, " image"));
  }
  const int64_t need = int64_t{out_width} * out_height * 3;
  if (static_cast<int64_t>(out.size()) < need) {
    return absl::InvalidArgumentError(
        absl::StrCat("resize: the output holds ", out.size(), " bytes; ",
                     out_width, "x", out_height, " RGB needs ", need));
  }
  // Note [antialiased bilinear] and Note [fixed point] in
  // internal/resample.cc.
  internal::ResampleScratch& scratch = internal::ThisThreadResampleScratch();
  internal::BuildResampleAxis(region.x, region.width, out_width, 0, image.width,
                              scratch.horizontal);
  internal::BuildResampleAxis(region.y, region.height, out_height, 0,
                              image.height, scratch.vertical);
  internal::ResampleRgb(image.data, image.row_bytes, out_width, out_height,
                        flip, scratch, out.data());
  return absl::OkStatus();
}

void FlipHorizontal(absl::Span<uint8_t> rgb, int width, int height) {
  for (int y = 0; y < height; ++y) {
    uint8_t* row = rgb.data() + static_cast<size_t>(y) * width * 3;
    for (int l = 0, r = width - 1; l < r; ++l, --r) {
      std::swap_ranges(row + l * 3, row + l * 3 + 3, row + r * 3);
    }
  }
}

absl::Status DecodeResizedCrop(absl::Span<const std::byte> jpeg,
                               absl::string_view name, const CropRegion& region,
                               int out_width, int out_height, bool flip,
                               absl::Span<uint8_t> out,
                               const JpegLimits& limits) {
  absl::StatusOr<JpegInfo> info = ReadJpegInfo(jpeg, name, limits);
  if (!info.ok()) return info.status();
  if (out_width <= 0 || out_height <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("JPEG ", name, ": the output size ", out_width, "x",
                     out_height, " is not positive"));
  }
  const JpegScale scale =
      ChooseJpegScale(region.width, region.height, out_width, out_height);
  const int width = ScaledJpegSize(info->width, scale);
  const int height = ScaledJpegSize(info->height, scale);
  const double f = static_cast<double>(scale.num) / scale.denom;
  // The region in the scaled image, kept inside it (the scaled size rounds
  // up, so f * full size <= scaled size).
  CropRegion scaled{.x = region.x * f,
                    .y = region.y * f,
                    .width = region.width * f,
                    .height = region.height * f};
  scaled.width = std::min(scaled.width, width - scaled.x);
  scaled.height = std::min(scaled.height, height - scaled.y);
  if (!(scaled.width > 0 && scaled.height > 0 && scaled.x >= 0 &&
        scaled.y >= 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "JPEG ", name, ": the region ", region.width, "x", region.height,
        " at (", region.x, ", ", region.y, ") is empty or not inside the ",
        info->width, "x", info->height, " image"));
  }
  // Note [region decode]: only the pixels the resize reads are decoded:
  // the region's own pixels (the filter is clipped to them, as torchvision
  // crops before it resizes) and one pixel more on each side, clipped to
  // the image. The one more is there because libjpeg's chroma upsampling
  // (4:2:0, 4:2:2) treats a cut edge as the image's edge, so the outermost
  // pixels along a cut may differ by a level or two from a full decode
  // (jpeg_test checks that all others are exact). The result equals
  // decoding everything at that scale (image_transforms_test checks).
  const int x0 = std::max(0, static_cast<int>(std::floor(scaled.x)) - 1);
  const int y0 = std::max(0, static_cast<int>(std::floor(scaled.y)) - 1);
  const int x1 =
      std::min(width, static_cast<int>(std::ceil(scaled.x + scaled.width)) + 1);
  const int y1 = std::min(
      height, static_cast<int>(std::ceil(scaled.y + scaled.height)) + 1);
  const PixelBox box{.x = x0, .y = y0, .width = x1 - x0, .height = y1 - y0};
  std::vector<uint8_t>& pixels = ThisThreadDecoded();
  pixels.resize(static_cast<size_t>(JpegRegionBytes(box)));
  absl::StatusOr<PixelBox> decoded =
      DecodeJpegRegion(jpeg, name, scale, box, absl::MakeSpan(pixels), limits);
  if (!decoded.ok()) return decoded.status();
  const RgbImageView view{.data = pixels.data(),
                          .width = decoded->width,
                          .height = decoded->height,
                          .row_bytes = int64_t{decoded->width} * 3};
  scaled.x -= decoded->x;
  scaled.y -= decoded->y;
  if (absl::Status s =
          ResizeRegion(view, scaled, out_width, out_height, flip, out);
      !s.ok()) {
    return absl::Status(s.code(),
                        absl::StrCat("JPEG ", name, ": ", s.message()));
  }
  return absl::OkStatus();
}

absl::Status ValidateImageTransformOptions(
    const ImageTransformOptions& options) {
  auto bad = [](absl::string_view field, auto value, absl::string_view rule) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ImageTransformOptions::", field, " = ", value, ": ", rule));
  };
  if (options.size < 1 || options.size > options.limits.max_dimension) {
    return bad("size", options.size, "must be in 1..limits.max_dimension");
  }
  if (options.resize_size != 0 && options.resize_size < options.size) {
    return bad("resize_size", options.resize_size,
               "must be 0 (size * 256 / 224) or >= size");
  }
  const RandomResizedCropOptions& c = options.crop;
  if (!(c.min_scale > 0 && c.min_scale <= c.max_scale && c.max_scale <= 1)) {
    return bad("crop.min_scale/max_scale",
               absl::StrCat(c.min_scale, "/", c.max_scale),
               "need 0 < min_scale <= max_scale <= 1");
  }
  if (!(c.min_ratio > 0 && c.min_ratio <= c.max_ratio)) {
    return bad("crop.min_ratio/max_ratio",
               absl::StrCat(c.min_ratio, "/", c.max_ratio),
               "need 0 < min_ratio <= max_ratio");
  }
  if (c.attempts < 0) return bad("crop.attempts", c.attempts, "must be >= 0");
  if (!(options.flip_probability >= 0 && options.flip_probability <= 1)) {
    return bad("flip_probability", options.flip_probability,
               "must be in [0, 1]");
  }
  if (options.max_jpeg_bytes < 1 ||
      options.max_jpeg_bytes > (int64_t{1} << 30)) {
    return bad("max_jpeg_bytes", options.max_jpeg_bytes,
               "must be in 1 .. 2^30");
  }
  if (options.limits.max_dimension < 1 ||
      options.limits.max_decoded_bytes < 1) {
    return bad("limits", options.limits.max_dimension, "must be >= 1");
  }
  return absl::OkStatus();
}

ImageCropDraw DrawImageCrop(int width, int height,
                            const ImageTransformOptions& options,
                            SampleRandom& random) {
  ImageCropDraw draw;
  if (options.train) {
    draw.region = RandomResizedCropRegion(width, height, random, options.crop);
    draw.flip = random.Bernoulli(options.flip_probability);
  } else {
    const int resize_size =
        options.resize_size != 0
            ? options.resize_size
            : std::max(options.size, options.size * 256 / 224);
    draw.region = CenterCropRegion(width, height, resize_size, options.size);
  }
  return draw;
}

absl::Status DecodeTransformedImage(absl::Span<const std::byte> jpeg,
                                    absl::string_view name,
                                    const ImageTransformOptions& options,
                                    SampleRandom& random,
                                    absl::Span<uint8_t> out) {
  absl::StatusOr<JpegInfo> info = ReadJpegInfo(jpeg, name, options.limits);
  if (!info.ok()) return info.status();
  const ImageCropDraw draw =
      DrawImageCrop(info->width, info->height, options, random);
  return DecodeResizedCrop(jpeg, name, draw.region, options.size, options.size,
                           draw.flip, out, options.limits);
}

}  // namespace pinwheel
