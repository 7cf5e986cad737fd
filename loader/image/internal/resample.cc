// Note [antialiased bilinear]: as PIL's ImagingResample and torch's
// antialiased interpolate (what torchvision's resize with antialias=True
// runs): output pixel i samples at input coordinate center = start + (i +
// 0.5) * scale, scale = length / out_length, with the triangle filter
// max(0, 1 - |t|) stretched by max(scale, 1): a shrink by 3 averages over
// ±3 input pixels instead of interpolating between the two nearest (which
// aliases: a fine pattern becomes a coarse one). Input pixel x weighs
// tri((x + 0.5 - center) / max(scale, 1)); the taps run from floor(center -
// support + 0.5) to floor(center + support + 0.5) - 1, support = max(scale,
// 1), clipped to the span's own pixels, and the rest renormalised.
// Clipping to the span, not to the whole image, is torchvision's
// crop-then-resize: RandomResizedCrop crops the tensor, then resizes it, so
// its filter never reads outside the crop.
//
// Note [fixed point]: the weights are integers in units of 2^-14 summing
// to exactly 2^14 (the rounding's remainder goes to the largest). The
// vertical pass keeps 7 bits below the 0..255 levels in int16 (at most
// 255 * 128 = 32640: the weights are non-negative and sum to one), the
// horizontal pass accumulates in int32 (at most 32640 * 2^14 < 2^31) and
// rounds once, to the nearest level. torch's uint8 path (from
// Pillow-SIMD) rounds to a level after each pass, so the two differ by at
// most a level or so; the float reference in image_transforms_test and
// the torchvision comparison (tests/python/test_resize_vs_torchvision.py)
// measure it.
//
// Note [SSE2]: both passes multiply pairs of 16-bit values by pairs of
// weights and add (pmaddwd, _mm_madd_epi16): the vertical pass two input
// rows at a time, 16 bytes of a row at once; the horizontal pass two taps
// at a time, a pixel's three channels (and a fourth, ignored) at once.
// SSE2 is in every x86-64 CPU, so no dispatch is needed; elsewhere the
// same arithmetic runs as plain loops.
#include "loader/image/internal/resample.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace pinwheel::internal {
namespace {

constexpr int kOutputShift = kWeightBits + kLineBits;

#if defined(__SSE2__)
// Two 16-bit weights in each 32-bit lane, `first` in the low half.
__m128i WeightPair(int16_t first, int16_t second) {
  return _mm_set1_epi32(static_cast<int32_t>(
      static_cast<uint32_t>(static_cast<uint16_t>(first)) |
      (static_cast<uint32_t>(static_cast<uint16_t>(second)) << 16)));
}
#endif

// One output row's vertical pass: line[c] = the rows at `src` (row_bytes
// apart) weighted by w[0 .. count - 1], in 1/128 levels, for c < n.
void VerticalPass(const uint8_t* src, int64_t row_bytes, const int16_t* w,
                  int count, int n, int16_t* line) {
  constexpr int kShift = kWeightBits - kLineBits;
  int c = 0;
#if defined(__SSE2__)
  const __m128i zero = _mm_setzero_si128();
  const __m128i round = _mm_set1_epi32(1 << (kShift - 1));
  for (; c + 16 <= n; c += 16) {
    __m128i acc0 = round;
    __m128i acc1 = round;
    __m128i acc2 = round;
    __m128i acc3 = round;
    for (int k = 0; k < count; k += 2) {
      const __m128i a = _mm_loadu_si128(
          reinterpret_cast<const __m128i*>(src + k * row_bytes + c));
      const bool pair = k + 1 < count;
      const __m128i b = pair ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(
                                   src + (k + 1) * row_bytes + c))
                             : zero;
      const __m128i wp = WeightPair(w[k], pair ? w[k + 1] : int16_t{0});
      // Bytes a0 b0 a1 b1 ..., widened to 16 bits: pairs for pmaddwd.
      const __m128i lo = _mm_unpacklo_epi8(a, b);
      const __m128i hi = _mm_unpackhi_epi8(a, b);
      acc0 =
          _mm_add_epi32(acc0, _mm_madd_epi16(_mm_unpacklo_epi8(lo, zero), wp));
      acc1 =
          _mm_add_epi32(acc1, _mm_madd_epi16(_mm_unpackhi_epi8(lo, zero), wp));
      acc2 =
          _mm_add_epi32(acc2, _mm_madd_epi16(_mm_unpacklo_epi8(hi, zero), wp));
      acc3 =
          _mm_add_epi32(acc3, _mm_madd_epi16(_mm_unpackhi_epi8(hi, zero), wp));
    }
    acc0 = _mm_srai_epi32(acc0, kShift);
    acc1 = _mm_srai_epi32(acc1, kShift);
    acc2 = _mm_srai_epi32(acc2, kShift);
    acc3 = _mm_srai_epi32(acc3, kShift);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(line + c),
                     _mm_packs_epi32(acc0, acc1));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(line + c + 8),
                     _mm_packs_epi32(acc2, acc3));
  }
#endif
  for (; c < n; ++c) {
    int32_t acc = 1 << (kShift - 1);
    for (int k = 0; k < count; ++k) acc += w[k] * src[k * row_bytes + c];
    line[c] = static_cast<int16_t>(acc >> kShift);
  }
}

// One output row's horizontal pass: pixel i of `dst` (mirrored when
// `flip`) is the line's pixels first[i] - col_lo .. weighted by its taps.
// Reads fx.pairs * 2 pixels from each first[i] (the taps past count[i]
// weigh 0) and one int16 more: the line's padding covers them.
void HorizontalPass(const int16_t* line, const ResampleAxis& fx, int col_lo,
                    int out_width, bool flip, uint8_t* dst) {
  const int pairs = fx.pairs;
  for (int i = 0; i < out_width; ++i) {
    const int32_t* wp = &fx.weight_pairs[static_cast<size_t>(i) * pairs];
    const int16_t* p =
        line + static_cast<std::ptrdiff_t>(fx.first[i] - col_lo) * 3;
    uint8_t* d =
        dst + static_cast<std::ptrdiff_t>(flip ? out_width - 1 - i : i) * 3;
#if defined(__SSE2__)
    __m128i acc = _mm_set1_epi32(1 << (kOutputShift - 1));
    for (int k = 0; k < pairs; ++k, p += 6) {
      const __m128i p0 = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
      const __m128i p1 =
          _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + 3));
      // r0 r1 g0 g1 b0 b1 x0 x1: lanes r, g, b (and one ignored).
      acc = _mm_add_epi32(acc, _mm_madd_epi16(_mm_unpacklo_epi16(p0, p1),
                                              _mm_set1_epi32(wp[k])));
    }
    acc = _mm_srai_epi32(acc, kOutputShift);
    const __m128i bytes = _mm_packus_epi16(_mm_packs_epi32(acc, acc), acc);
    const uint32_t rgb = static_cast<uint32_t>(_mm_cvtsi128_si32(bytes));
    d[0] = static_cast<uint8_t>(rgb);
    d[1] = static_cast<uint8_t>(rgb >> 8);
    d[2] = static_cast<uint8_t>(rgb >> 16);
#else
    const int16_t* w = &fx.weights[static_cast<size_t>(i) * fx.taps];
    int32_t acc[3] = {1 << (kOutputShift - 1), 1 << (kOutputShift - 1),
                      1 << (kOutputShift - 1)};
    for (int k = 0; k < fx.count[i]; ++k) {
      for (int c = 0; c < 3; ++c) acc[c] += w[k] * p[k * 3 + c];
    }
    for (int c = 0; c < 3; ++c) {
      d[c] = static_cast<uint8_t>(std::clamp(acc[c] >> kOutputShift, 0, 255));
    }
#endif
  }
}

}  // namespace

void BuildResampleAxis(double start, double length, int out_length,
                       int lo_limit, int hi_limit, ResampleAxis& axis) {
  const double scale = length / out_length;
  const double support = std::max(scale, 1.0);  // bilinear: 1 pixel a unit
  // The span's own pixels (a hair of slack: a span mapped from a larger
  // image may be off by a rounding error).
  const int span_lo =
      std::max(lo_limit, static_cast<int>(std::floor(start + 1e-9)));
  const int span_hi =
      std::min(hi_limit, static_cast<int>(std::ceil(start + length - 1e-9)));
  // An even count: the horizontal pass takes the taps two by two.
  axis.taps = static_cast<int>(std::ceil(support)) * 2 + 2;
  int max_count = 1;
  axis.first.resize(out_length);
  axis.count.resize(out_length);
  axis.weights.assign(static_cast<size_t>(out_length) * axis.taps, 0);
  for (int i = 0; i < out_length; ++i) {
    const double center = start + (i + 0.5) * scale;
    int lo =
        std::max(span_lo, static_cast<int>(std::floor(center - support + 0.5)));
    int hi =
        std::min(span_hi, static_cast<int>(std::floor(center + support + 0.5)));
    hi = std::min(hi, lo + axis.taps);
    auto weight = [&](int x) {
      return std::max(0.0, 1.0 - std::abs((x + 0.5 - center) / support));
    };
    double total = 0;
    for (int x = lo; x < hi; ++x) total += weight(x);
    int16_t* out = &axis.weights[static_cast<size_t>(i) * axis.taps];
    if (!(total > 0)) {  // a span narrower than a pixel: the nearest pixel
      lo = std::clamp(static_cast<int>(std::floor(center)), span_lo,
                      std::max(span_lo, span_hi - 1));
      lo = std::clamp(lo, lo_limit, hi_limit - 1);  // a span at the edge
      hi = lo + 1;
      out[0] = static_cast<int16_t>(1 << kWeightBits);
    } else {
      // Note [fixed point]: integers summing to exactly 1 << kWeightBits.
      int sum = 0;
      int largest = 0;
      for (int x = 0; x < hi - lo; ++x) {
        out[x] = static_cast<int16_t>(
            std::lround(weight(lo + x) / total * (1 << kWeightBits)));
        sum += out[x];
        if (out[x] > out[largest]) largest = x;
      }
      out[largest] =
          static_cast<int16_t>(out[largest] + (1 << kWeightBits) - sum);
    }
    axis.first[i] = lo;
    axis.count[i] = hi - lo;
    max_count = std::max(max_count, hi - lo);
  }
  // Two taps a 32-bit lane, for the horizontal pass (Note [SSE2]).
  axis.pairs = (max_count + 1) / 2;
  axis.weight_pairs.resize(static_cast<size_t>(out_length) * axis.pairs);
  for (int i = 0; i < out_length; ++i) {
    const int16_t* w = &axis.weights[static_cast<size_t>(i) * axis.taps];
    for (int k = 0; k < axis.pairs; ++k) {
      axis.weight_pairs[static_cast<size_t>(i) * axis.pairs + k] =
          static_cast<int32_t>(
              static_cast<uint32_t>(static_cast<uint16_t>(w[2 * k])) |
              (static_cast<uint32_t>(static_cast<uint16_t>(w[2 * k + 1]))
               << 16));
    }
  }
}

ResampleScratch& ThisThreadResampleScratch() {
  thread_local ResampleScratch scratch;
  return scratch;
}

void ResampleRgb(const uint8_t* src, int64_t row_bytes, int out_width,
                 int out_height, bool flip, ResampleScratch& scratch,
                 uint8_t* out) {
  const ResampleAxis& fx = scratch.horizontal;
  const ResampleAxis& fy = scratch.vertical;
  // The input columns the horizontal pass reads.
  int col_lo = fx.first[0];
  int col_hi = col_lo + 1;
  for (int i = 0; i < out_width; ++i) {
    col_lo = std::min(col_lo, fx.first[i]);
    col_hi = std::max(col_hi, fx.first[i] + fx.count[i]);
  }
  const int line_values = (col_hi - col_lo) * 3;
  // Padding: the horizontal pass reads fx.pairs * 2 pixels from a pixel's
  // first tap, and one int16 more.
  scratch.line.resize(static_cast<size_t>(line_values) + fx.pairs * 6 + 8);
  std::fill(scratch.line.begin() + line_values, scratch.line.end(), 0);
  int16_t* line = scratch.line.data();
  for (int j = 0; j < out_height; ++j) {
    VerticalPass(src + fy.first[j] * row_bytes + col_lo * 3, row_bytes,
                 &fy.weights[static_cast<size_t>(j) * fy.taps], fy.count[j],
                 line_values, line);
    HorizontalPass(line, fx, col_lo, out_width, flip,
                   out + static_cast<size_t>(j) * out_width * 3);
  }
}

}  // namespace pinwheel::internal
