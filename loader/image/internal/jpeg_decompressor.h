// The one JPEG decoder behind loader/image/jpeg.h: libjpeg-turbo's libjpeg
// API, one decompressor per thread, with one error rule for the header, a
// whole decode and a region decode alike (Note [one decoder] in the .cc).
// Internal: callers use ReadJpegInfo, DecodeJpeg and DecodeJpegRegion.
//
// Thread-safe: each thread uses its own decompressor.
#ifndef PINWHEEL_LOADER_IMAGE_INTERNAL_JPEG_DECOMPRESSOR_H_
#define PINWHEEL_LOADER_IMAGE_INTERNAL_JPEG_DECOMPRESSOR_H_

#include <cstddef>
#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

#include "loader/image/jpeg.h"

namespace pinwheel::internal {

// Returns the header of the JPEG in `bytes`: DataLoss for a header that does
// not parse, ResourceExhausted over `limits`. With `check_end`, also
// DataLoss for a file whose scan data has no end-of-image marker after it
// (truncated: Note [one decoder]). REQUIRES: `bytes` starts ff d8 ff (the
// caller says what else it is).
[[nodiscard]] absl::StatusOr<JpegInfo> ReadJpegHeader(
    absl::Span<const std::byte> bytes, absl::string_view name,
    const JpegLimits& limits, bool check_end);

// The pixels a decode writes.
enum class JpegPixels {
  kRgb,   // 3 bytes a pixel
  kCmyk,  // 4 bytes a pixel, as stored (YCCK converted to CMYK)
};

// Returns OK when `box` lies inside the image of `info` decoded at `scale`,
// else InvalidArgument naming `name`, the box and the scaled size.
[[nodiscard]] absl::Status CheckJpegBox(absl::string_view name,
                                        const JpegInfo& info, JpegScale scale,
                                        const PixelBox& box);

// Decodes the rows [box.y, box.y + box.height) of the JPEG in `bytes` at
// `scale`, columns widened to the decoder's block boundaries, into `out`,
// rows of (decoded width) × bytes-a-pixel bytes with no padding; returns
// the box decoded. `info` is ReadJpegHeader's for the same bytes.
// DataLoss naming `name` for corrupt data; InvalidArgument when the box is
// not inside the scaled image or `out` cannot hold the widened box.
[[nodiscard]] absl::StatusOr<PixelBox> DecodeJpegRows(
    absl::Span<const std::byte> bytes, absl::string_view name,
    const JpegInfo& info, JpegScale scale, const PixelBox& box,
    JpegPixels pixels, absl::Span<uint8_t> out);

}  // namespace pinwheel::internal

#endif  // PINWHEEL_LOADER_IMAGE_INTERNAL_JPEG_DECOMPRESSOR_H_
