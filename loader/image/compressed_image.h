// Compressed image samples: what the image datasets write into the pinned
// slot under ImageDelivery::kJpeg, so that one copy moves the compressed
// batch (about a tenth of the decoded one) and the GPU decodes it
// (JpegDecodeTransform, transfer/jpeg/jpeg_decode_transform.h).
//
// A sample's fields, in this order:
//   "jpeg"        u8 [max_jpeg_bytes], variable-length: the file's bytes
//                 (the batch adds "jpeg_length", i64, the bytes per sample;
//                 the rest of the row is zero)
//   "crop"        f32 [4]: x, y, width, height of the crop in the source
//                 image's pixels (whole pixels when training)
//   "flip"        u8 []: 1 to mirror the crop left-right
//   "source_size" i32 [2]: the source image's width and height, from its
//                 header
//   "label"       i64 []: the class
//   "source_name" u8 [128]: the file, or shard:member, for messages naming
//                 a sample the GPU decoder cannot decode (UTF-8, zero
//                 padded; a longer name keeps its last 125 bytes after
//                 "...")
// The crop and flip are DrawImageCrop() of the header's size with the same
// SampleRandom the pixel path draws from, before any pixel is decoded: a
// sample's crop is identical whichever path decodes it, and resume stays
// exact.
//
// Example (inside Read):
//   PINWHEEL_RETURN_IF_ERROR(WriteCompressedImage(bytes, path, options,
//                                                 out.random(), label, out));
//
// Thread-safe: pure functions.
#ifndef PINWHEEL_LOADER_IMAGE_COMPRESSED_IMAGE_H_
#define PINWHEEL_LOADER_IMAGE_COMPRESSED_IMAGE_H_

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

#include "loader/dataset.h"
#include "loader/image/image_transforms.h"
#include "loader/sample_random.h"
#include "transfer/sample_layout.h"

namespace pinwheel {

// The field indices of a compressed image sample.
inline constexpr int kCompressedJpegField = 0;
inline constexpr int kCompressedCropField = 1;
inline constexpr int kCompressedFlipField = 2;
inline constexpr int kCompressedSourceSizeField = 3;
inline constexpr int kCompressedLabelField = 4;
inline constexpr int kCompressedSourceNameField = 5;
// The bytes of "source_name".
inline constexpr int64_t kCompressedSourceNameBytes = 128;

// Returns the sample layout above for JPEGs of up to `max_jpeg_bytes`, or
// InvalidArgument when that is not in 1 .. 2^30.
[[nodiscard]] absl::StatusOr<SampleLayout> CompressedImageLayout(
    int64_t max_jpeg_bytes);

// Writes one compressed sample into `out` (laid out by
// CompressedImageLayout(options.max_jpeg_bytes)): the bytes of `jpeg`,
// the crop and flip drawn from `random` for the size in its header, that
// size, `label` and `name`. Errors name `name` (the file, or shard:member):
// ResourceExhausted for more than options.max_jpeg_bytes bytes, and
// ReadJpegInfo's for a header that does not parse or breaks
// options.limits. Only the header is parsed: a corrupt scan is found by
// the decoder. REQUIRES: options validated.
[[nodiscard]] absl::Status WriteCompressedImage(
    absl::Span<const std::byte> jpeg, absl::string_view name,
    const ImageTransformOptions& options, SampleRandom& random, int64_t label,
    SampleView& out);

}  // namespace pinwheel

#endif  // PINWHEEL_LOADER_IMAGE_COMPRESSED_IMAGE_H_
