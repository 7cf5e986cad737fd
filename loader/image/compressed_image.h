// Compressed image samples: what the image datasets write into the pinned
// slot under ImageDelivery::kJpeg, so that one copy moves the compressed
// batch (about a tenth of the decoded one) and the GPU decodes it
// (JpegDecodeTransform, transfer/jpeg/jpeg_decode_transform.h).
//
// A sample's fields are the compressed batch's schema, declared in
// transfer/jpeg/compressed_batch.h: "jpeg" (the file's bytes, variable
// length), "crop" (whole pixels when training), "flip", "source_size" (from
// the JPEG's header), "label" and "source_name" (the file, or
// shard:member; a longer name keeps its last 125 bytes after "...").
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
#include "transfer/jpeg/compressed_batch.h"
#include "transfer/sample_layout.h"

namespace pinwheel {

// Returns the layout of CompressedSampleFields() for JPEGs of up to
// `max_jpeg_bytes`, or InvalidArgument when that is not in 1 .. 2^30.
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
