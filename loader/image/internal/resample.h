// The antialiased bilinear resize behind ResizeRegion (image_transforms.h):
// separable, in fixed point, vectorised with SSE2 on x86-64 (a plain C++
// loop elsewhere), the flip fused into its last pass. Internal: callers use
// ResizeRegion and DecodeResizedCrop.
//
// Example:
//   internal::ResampleScratch& scratch = internal::ThisThreadResampleScratch();
//   internal::BuildResampleAxis(crop.x, crop.width, 224, 0, image.width,
//                               scratch.horizontal);
//   internal::BuildResampleAxis(crop.y, crop.height, 224, 0, image.height,
//                               scratch.vertical);
//   internal::ResampleRgb(image.data, image.row_bytes, 224, 224, flip,
//                         scratch, out.data());
//
// Thread-safe: functions of their arguments; each thread has its own
// scratch (ThisThreadResampleScratch).
#ifndef PINWHEEL_LOADER_IMAGE_INTERNAL_RESAMPLE_H_
#define PINWHEEL_LOADER_IMAGE_INTERNAL_RESAMPLE_H_

#include <cstdint>
#include <vector>

namespace pinwheel::internal {

// The weights of one axis are integers summing to exactly 1 << kWeightBits.
inline constexpr int kWeightBits = 14;
// The vertical pass keeps this many bits below the input's 0..255 levels
// (int16: 255 << 7 = 32640 fits), so the result is rounded once, at the end.
inline constexpr int kLineBits = 7;

// One axis of a resize: output pixel i reads the input pixels first[i] ..
// first[i] + count[i] - 1 with weights[i * taps .. i * taps + count[i] - 1].
// The weights past count[i] are 0; weight_pairs holds them two a 32-bit
// lane (tap 2k in the low half), `pairs` lanes an output pixel.
struct ResampleAxis {
  int taps = 0;   // the weights' stride: more than any count[i], even
  int pairs = 0;  // (the largest count[i] + 1) / 2
  std::vector<int> first;
  std::vector<int> count;
  std::vector<int16_t> weights;  // each output pixel's sum to 1 << kWeightBits
  std::vector<int32_t> weight_pairs;
};

// Builds `axis` for resizing the span [start, start + length) of an input
// axis to out_length pixels (Note [antialiased bilinear] in the .cc):
// output pixel i samples at start + (i + 0.5) * length / out_length with
// the triangle filter max(0, 1 - |t|) stretched by max(length /
// out_length, 1), reading only the pixels from floor(start) to
// ceil(start + length) - 1 that lie in [lo_limit, hi_limit), its weights
// renormalised over them. REQUIRES: out_length >= 1, length > 0,
// lo_limit < hi_limit, and the span overlapping [lo_limit, hi_limit).
void BuildResampleAxis(double start, double length, int out_length,
                       int lo_limit, int hi_limit, ResampleAxis& axis);

// A thread's buffers, grown to the largest resize seen, never shrunk.
struct ResampleScratch {
  ResampleAxis horizontal;
  ResampleAxis vertical;
  std::vector<int16_t> line;  // one output row before the horizontal pass
};

// Returns this thread's scratch (made on first use, freed at thread exit).
ResampleScratch& ThisThreadResampleScratch();

// Resizes the RGB u8 image at `src` (rows row_bytes apart) to out_width ×
// out_height RGB u8 at `out` (no padding) with scratch.horizontal and
// scratch.vertical (built for out_width and out_height), mirrored left-right
// when `flip`: each output row is its input rows weighted into one line of
// 1/128 levels (the vertical pass, along the row), then that line weighted
// across into pixels (the horizontal pass), which writes them mirrored.
// REQUIRES: the axes' pixels inside the image; `out` holds the output.
void ResampleRgb(const uint8_t* src, int64_t row_bytes, int out_width,
                 int out_height, bool flip, ResampleScratch& scratch,
                 uint8_t* out);

}  // namespace pinwheel::internal

#endif  // PINWHEEL_LOADER_IMAGE_INTERNAL_RESAMPLE_H_
