// Image transforms for a Dataset::Read() (or any code): torchvision's
// RandomResizedCrop parameters drawn from a sample's SampleRandom, the eval
// crop (resize the shorter side, then a center crop), horizontal flip, and
// a bilinear resize that antialiases when it shrinks, all on RGB u8 HWC and
// writing into a caller's buffer (a sample's place in the pinned slot).
//
// The fast path fuses them with the decode: DecodeResizedCrop() decodes the
// JPEG at the smallest DCT scale that still covers the crop at the output
// size, then resizes the crop straight into the output, flipped if asked.
//
// Example (inside Read, training):
//   SampleRandom& rng = out.random();
//   PINWHEEL_ASSIGN_OR_RETURN(JpegInfo info, ReadJpegInfo(jpeg, path));
//   const CropRegion crop = RandomResizedCropRegion(info.width, info.height,
//                                                   rng);
//   const bool flip = rng.Bernoulli(0.5);
//   PINWHEEL_RETURN_IF_ERROR(DecodeResizedCrop(jpeg, path, crop, 224, 224,
//                                              flip,
//                                              out.field_as<uint8_t>(0)));
//
// Thread-safe; the resize keeps per-thread scratch (filter weights, one
// row of the vertical pass, the scaled decode) that grows to the largest image
// seen, so a warm thread allocates nothing per image.
#ifndef PINWHEEL_LOADER_IMAGE_IMAGE_TRANSFORMS_H_
#define PINWHEEL_LOADER_IMAGE_IMAGE_TRANSFORMS_H_

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

#include "loader/image/jpeg.h"
#include "loader/sample_random.h"

namespace pinwheel {

// A region of an image in pixel coordinates: (x, y) its top-left corner,
// width × height its size. Fractional values are allowed (the eval crop's
// region, a crop mapped to a reduced decode).
struct CropRegion {
  double x = 0;
  double y = 0;
  double width = 0;
  double height = 0;
};

// torchvision's RandomResizedCrop ranges (its defaults).
struct RandomResizedCropOptions {
  // The crop's area as a fraction of the image's, drawn uniformly.
  double min_scale = 0.08;
  double max_scale = 1.0;
  // The crop's width / height, drawn log-uniformly.
  double min_ratio = 3.0 / 4.0;
  double max_ratio = 4.0 / 3.0;
  // Draws before the fallback (the largest central crop within the ratios).
  int attempts = 10;
};

// Returns a crop of a width × height image as torchvision's
// RandomResizedCrop.get_params draws it: up to `attempts` times an area
// fraction (uniform in [min_scale, max_scale)) and a ratio (log-uniform),
// rounded to whole pixels, kept when it fits, placed uniformly; else the
// central crop whose ratio is clamped to [min_ratio, max_ratio]. Whole
// pixels. A pure function of the generator's state: the same SampleRandom
// gives the same crop. REQUIRES: width, height >= 1, 0 < min_scale <=
// max_scale, 0 < min_ratio <= max_ratio.
CropRegion RandomResizedCropRegion(
    int width, int height, SampleRandom& random,
    const RandomResizedCropOptions& options = {});

// Returns the region of a width × height image that torchvision's eval
// transform, Resize(resize_size) (the shorter side to resize_size, the longer
// one scaled and truncated) then CenterCrop(crop_size), keeps, in the
// image's own coordinates: resizing that region to crop_size × crop_size is
// that transform. REQUIRES: width, height >= 1, 1 <= crop_size <=
// resize_size.
CropRegion CenterCropRegion(int width, int height, int resize_size,
                            int crop_size);

// An RGB u8 HWC image the caller owns, borrowed for one call.
struct RgbImageView {
  const uint8_t* data = nullptr;
  int width = 0;
  int height = 0;
  int64_t row_bytes = 0;  // >= width * 3
};

// Resizes `region` of `image` to out_width × out_height into `out` (RGB u8
// HWC, no padding), mirrored left-right when `flip`. Bilinear: a triangle
// filter whose support grows with the shrink factor when shrinking
// (torchvision's antialias=True), plain bilinear when enlarging; only the
// region's own pixels are read, from floor(x) to ceil(x + width) - 1 (the
// filter is clipped to them and renormalised, as torchvision's
// crop-then-resize does). Fixed point, within a level of a float
// computation of the same filter (internal/resample.h). InvalidArgument
// when `out` is too small, a size is not positive, or `region` is empty
// or not inside the image.
[[nodiscard]] absl::Status ResizeRegion(const RgbImageView& image,
                                        const CropRegion& region, int out_width,
                                        int out_height, bool flip,
                                        absl::Span<uint8_t> out);

// Mirrors an RGB u8 HWC image (rows of width * 3 bytes) left-right in place.
// REQUIRES: rgb.size() >= width * height * 3.
void FlipHorizontal(absl::Span<uint8_t> rgb, int width, int height);

// The fused fast path: decodes `jpeg` (named `name` in errors) at the
// smallest DCT scale at which `region` (in full-size coordinates) still
// measures at least out_width × out_height, and only the pixels the resize
// reads (DecodeJpegRegion: the rows above skipped, the rows below never
// decoded, the columns outside not transformed), then resizes the region
// into `out` (RGB u8 HWC), mirrored when `flip`. The result equals a full
// decode at that scale followed by ResizeRegion. Errors as DecodeJpeg's and
// ResizeRegion's.
[[nodiscard]] absl::Status DecodeResizedCrop(absl::Span<const std::byte> jpeg,
                                             absl::string_view name,
                                             const CropRegion& region,
                                             int out_width, int out_height,
                                             bool flip, absl::Span<uint8_t> out,
                                             const JpegLimits& limits = {});

// What the image datasets put into the pinned slot for a sample.
enum class ImageDelivery {
  // The image decoded and transformed on the CPU, by the workers: "image",
  // u8 [size, size, 3] RGB HWC.
  kPixels,
  // The JPEG's bytes as they are, with the crop and flip drawn for it, for a
  // decode on the GPU (JpegDecodeTransform, transfer/jpeg/): see
  // loader/image/compressed_image.h for the fields.
  kJpeg,
};

// The image datasets' recipe (ImageFolderDataset, TarShardDataset):
// torchvision's ImageNet training transform (RandomResizedCrop(size) +
// RandomHorizontalFlip) or its eval transform (Resize(resize_size) +
// CenterCrop(size)), on the pixels as stored: EXIF orientation is not
// applied (loader/image/jpeg.h).
struct ImageTransformOptions {
  // true: random crop + flip drawn from the sample's SampleRandom; false:
  // the eval crop (deterministic).
  bool train = true;
  // The output's side, pixels (>= 1): images come out size × size × 3.
  int size = 224;
  // Eval only: the shorter side before the center crop, pixels (>= size);
  // 0 means size * 256 / 224 (torchvision's ImageNet recipe: 256 for 224).
  int resize_size = 0;
  // Train only: the crop's ranges, and the chance of a left-right flip.
  RandomResizedCropOptions crop;
  double flip_probability = 0.5;
  // What a decode refuses (see JpegLimits).
  JpegLimits limits;
  // Pixels decoded by the workers, or the compressed bytes (see
  // ImageDelivery).
  ImageDelivery delivery = ImageDelivery::kPixels;
  // kJpeg: the most bytes of one JPEG, the slot's "jpeg" field (1 .. 1 GiB);
  // a larger file is a ResourceExhausted Read() naming it. The GPU decoder
  // reads the field from the pinned slot, so it is neither copied to nor
  // held on the device, but it is pinned host memory: max_jpeg_bytes x
  // batch_size x prefetch (1 MiB x 256 x 4 slots = 1 GiB). Lower it when
  // the data's JPEGs are known to be smaller.
  int64_t max_jpeg_bytes = int64_t{1} << 20;
};

// A sample's crop (in the source image's pixels) and flip.
struct ImageCropDraw {
  CropRegion region;
  bool flip = false;
};

// Returns the crop and flip of `options` for a width × height image: when
// training, RandomResizedCropRegion then the flip drawn from `random` (in
// that order); else the eval crop, unflipped. Both delivery paths call
// this, so a sample's crop is the same whichever path decodes it.
// REQUIRES: options validated; width, height >= 1.
ImageCropDraw DrawImageCrop(int width, int height,
                            const ImageTransformOptions& options,
                            SampleRandom& random);

// Returns InvalidArgument naming the first field of `options` outside its
// range, or OK.
[[nodiscard]] absl::Status ValidateImageTransformOptions(
    const ImageTransformOptions& options);

// Decodes `jpeg` (named `name` in errors) and applies the transform of
// `options` into `out` (size × size × 3 u8), drawing the crop, then the
// flip, from `random` when training. REQUIRES: options validated.
[[nodiscard]] absl::Status DecodeTransformedImage(
    absl::Span<const std::byte> jpeg, absl::string_view name,
    const ImageTransformOptions& options, SampleRandom& random,
    absl::Span<uint8_t> out);

}  // namespace pinwheel

#endif  // PINWHEEL_LOADER_IMAGE_IMAGE_TRANSFORMS_H_
