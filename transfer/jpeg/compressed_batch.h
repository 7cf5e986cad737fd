// The compressed JPEG batch's schema, declared once: the fields an image
// dataset writes into the pinned slot under ImageDelivery::kJpeg
// (loader/image/compressed_image.h) and JpegDecodeTransform reads
// (transfer/jpeg/jpeg_decode_transform.h). Both sides build or check their
// layout from CompressedSampleFields(), so a field is named, typed and
// shaped here and nowhere else.
//
// A sample's fields, in this order (the k*Field indices):
//   "jpeg"        u8 [max_jpeg_bytes], variable-length: the file's bytes
//                 (the batch adds "jpeg_length", i64, the bytes per sample;
//                 the rest of the row is zero)
//   "crop"        f32 [4]: x, y, width, height of the crop in the source
//                 image's pixels
//   "flip"        u8 []: 1 to mirror the crop left-right
//   "source_size" i32 [2]: the source image's width and height, from its
//                 header
//   "label"       i64 []: the class
//   "source_name" u8 [128]: the file, or shard:member, zero padded, for
//                 messages naming a sample that does not decode
//
// Example:
//   PINWHEEL_ASSIGN_OR_RETURN(SampleLayout layout,
//       SampleLayout::Create(CompressedSampleFields(1 << 20)));
//   int size = layout.FieldIndex(kCompressedSourceSizeName);
//
// Thread-safe: constants and a pure function.
#ifndef PINWHEEL_TRANSFER_JPEG_COMPRESSED_BATCH_H_
#define PINWHEEL_TRANSFER_JPEG_COMPRESSED_BATCH_H_

#include <cstdint>
#include <vector>

#include "transfer/sample_layout.h"

namespace pinwheel {

// The field names.
inline constexpr char kCompressedJpegName[] = "jpeg";
// The int64 length field the batch adds for the variable-length "jpeg".
inline constexpr char kCompressedJpegLengthName[] = "jpeg_length";
inline constexpr char kCompressedCropName[] = "crop";
inline constexpr char kCompressedFlipName[] = "flip";
inline constexpr char kCompressedSourceSizeName[] = "source_size";
inline constexpr char kCompressedLabelName[] = "label";
inline constexpr char kCompressedSourceNameName[] = "source_name";

// The field indices of a compressed image sample.
inline constexpr int kCompressedJpegField = 0;
inline constexpr int kCompressedCropField = 1;
inline constexpr int kCompressedFlipField = 2;
inline constexpr int kCompressedSourceSizeField = 3;
inline constexpr int kCompressedLabelField = 4;
inline constexpr int kCompressedSourceNameField = 5;
inline constexpr int kCompressedFields = 6;
// The bytes of "source_name".
inline constexpr int64_t kCompressedSourceNameBytes = 128;

// Returns the sample's fields above, in order, for JPEGs of up to
// `max_jpeg_bytes` (the caller validates it; SampleLayout::Create() checks
// the rest).
inline std::vector<FieldSpec> CompressedSampleFields(int64_t max_jpeg_bytes) {
  return {
      {.name = kCompressedJpegName,
       .dtype = DType::kUInt8,
       .shape = {max_jpeg_bytes},
       .variable_length = true},
      {.name = kCompressedCropName, .dtype = DType::kFloat32, .shape = {4}},
      {.name = kCompressedFlipName, .dtype = DType::kUInt8},
      {.name = kCompressedSourceSizeName, .dtype = DType::kInt32, .shape = {2}},
      {.name = kCompressedLabelName, .dtype = DType::kInt64},
      {.name = kCompressedSourceNameName,
       .dtype = DType::kUInt8,
       .shape = {kCompressedSourceNameBytes}}};
}

}  // namespace pinwheel

#endif  // PINWHEEL_TRANSFER_JPEG_COMPRESSED_BATCH_H_
