#include "loader/image/compressed_image.h"

#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"

#include "loader/image/jpeg.h"

namespace pinwheel {

absl::StatusOr<SampleLayout> CompressedImageLayout(int64_t max_jpeg_bytes) {
  if (max_jpeg_bytes < 1 || max_jpeg_bytes > (int64_t{1} << 30)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "max_jpeg_bytes = ", max_jpeg_bytes, ": must be in 1 .. 2^30"));
  }
  return SampleLayout::Create(CompressedSampleFields(max_jpeg_bytes));
}

absl::Status WriteCompressedImage(absl::Span<const std::byte> jpeg,
                                  absl::string_view name,
                                  const ImageTransformOptions& options,
                                  SampleRandom& random, int64_t label,
                                  SampleView& out) {
  if (static_cast<int64_t>(jpeg.size()) > options.max_jpeg_bytes) {
    return absl::ResourceExhaustedError(
        absl::StrCat(name, " has ", jpeg.size(),
                     " bytes, over max_jpeg_bytes = ", options.max_jpeg_bytes,
                     " (the slot's \"", kCompressedJpegName, "\" field)"));
  }
  absl::StatusOr<JpegInfo> info = ReadJpegInfo(jpeg, name, options.limits);
  if (!info.ok()) return info.status();
  const ImageCropDraw draw =
      DrawImageCrop(info->width, info->height, options, random);
  absl::Span<std::byte> bytes = out.field(kCompressedJpegField);
  std::memcpy(bytes.data(), jpeg.data(), jpeg.size());
  out.set_length(kCompressedJpegField, static_cast<int64_t>(jpeg.size()));
  absl::Span<float> crop = out.field_as<float>(kCompressedCropField);
  crop[0] = static_cast<float>(draw.region.x);
  crop[1] = static_cast<float>(draw.region.y);
  crop[2] = static_cast<float>(draw.region.width);
  crop[3] = static_cast<float>(draw.region.height);
  out.field_as<uint8_t>(kCompressedFlipField)[0] = draw.flip ? 1 : 0;
  absl::Span<int32_t> size = out.field_as<int32_t>(kCompressedSourceSizeField);
  size[0] = info->width;
  size[1] = info->height;
  out.field_as<int64_t>(kCompressedLabelField)[0] = label;
  absl::Span<std::byte> source = out.field(kCompressedSourceNameField);
  std::memset(source.data(), 0, source.size());
  if (name.size() <= source.size()) {
    std::memcpy(source.data(), name.data(), name.size());
  } else {
    // The end of a long path names the file; keep it.
    constexpr absl::string_view kCut = "...";
    const size_t tail = source.size() - kCut.size();
    std::memcpy(source.data(), kCut.data(), kCut.size());
    std::memcpy(source.data() + kCut.size(), name.data() + name.size() - tail,
                tail);
  }
  return out.status();
}

}  // namespace pinwheel
