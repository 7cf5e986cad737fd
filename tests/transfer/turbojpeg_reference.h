// Test helpers for the JPEG suites: a smooth test picture, and libjpeg-turbo
// (TurboJPEG API) to compress it and to decode the reference pixels the GPU
// decoder is compared with. Only where TurboJPEG was found
// (PINWHEEL_TEST_HAVE_TURBOJPEG, tests/transfer/CMakeLists.txt).
#ifndef PINWHEEL_TESTS_TRANSFER_TURBOJPEG_REFERENCE_H_
#define PINWHEEL_TESTS_TRANSFER_TURBOJPEG_REFERENCE_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <turbojpeg.h>
#include <vector>

namespace pinwheel::testing {

// Returns width x height interleaved RGB: gradients and a soft wave, the
// kind of content JPEG is made for (white noise would measure nothing but
// quantisation); `seed` shifts the pattern so samples differ.
inline std::vector<uint8_t> TestPicture(int width, int height, int seed) {
  std::vector<uint8_t> rgb(static_cast<size_t>(width) * height * 3);
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      const double wave =
          std::sin((x + 3 * seed) * 0.11) * std::cos((y + seed) * 0.07);
      uint8_t* p = &rgb[(static_cast<size_t>(y) * width + x) * 3];
      p[0] = static_cast<uint8_t>((x * 255) / std::max(1, width - 1));
      p[1] = static_cast<uint8_t>((y * 255) / std::max(1, height - 1));
      p[2] = static_cast<uint8_t>(std::lround(127.5 + 100 * wave));
    }
  }
  return rgb;
}

// TurboJPEG sampling and flags, named for the tests.
struct JpegEncoding {
  int subsampling = TJSAMP_444;  // TJSAMP_444, TJSAMP_420, TJSAMP_GRAY
  int quality = 95;
  bool progressive = false;
};

// Returns `rgb` compressed as a JPEG; throws on a TurboJPEG error.
inline std::vector<uint8_t> Compress(const std::vector<uint8_t>& rgb, int width,
                                     int height, const JpegEncoding& encoding) {
  tjhandle handle = tjInitCompress();
  if (handle == nullptr) throw std::runtime_error("tjInitCompress failed");
  unsigned char* jpeg = nullptr;
  unsigned long size = 0;  // NOLINT(runtime/int): TurboJPEG's type
  const int flags =
      TJFLAG_ACCURATEDCT | (encoding.progressive ? TJFLAG_PROGRESSIVE : 0);
  const int rc =
      tjCompress2(handle, rgb.data(), width, 0, height, TJPF_RGB, &jpeg, &size,
                  encoding.subsampling, encoding.quality, flags);
  std::string error = rc == 0 ? "" : tjGetErrorStr2(handle);
  tjDestroy(handle);
  if (rc != 0) throw std::runtime_error("tjCompress2: " + error);
  std::vector<uint8_t> out(jpeg, jpeg + size);
  tjFree(jpeg);
  return out;
}

// Returns libjpeg-turbo's RGB pixels of `jpeg`: accurate integer IDCT and,
// when `replicate_chroma`, chroma upsampled by replication (nvJPEG's
// default) rather than libjpeg's "fancy" interpolation.
inline std::vector<uint8_t> DecodeReference(const std::vector<uint8_t>& jpeg,
                                            bool replicate_chroma, int* width,
                                            int* height) {
  tjhandle handle = tjInitDecompress();
  if (handle == nullptr) throw std::runtime_error("tjInitDecompress failed");
  int subsampling = 0;
  int colorspace = 0;
  if (tjDecompressHeader3(handle, jpeg.data(), jpeg.size(), width, height,
                          &subsampling, &colorspace) != 0) {
    std::string error = tjGetErrorStr2(handle);
    tjDestroy(handle);
    throw std::runtime_error("tjDecompressHeader3: " + error);
  }
  std::vector<uint8_t> rgb(static_cast<size_t>(*width) * *height * 3);
  const int flags =
      TJFLAG_ACCURATEDCT | (replicate_chroma ? TJFLAG_FASTUPSAMPLE : 0);
  const int rc = tjDecompress2(handle, jpeg.data(), jpeg.size(), rgb.data(),
                               *width, 0, *height, TJPF_RGB, flags);
  std::string error = rc == 0 ? "" : tjGetErrorStr2(handle);
  tjDestroy(handle);
  if (rc != 0) throw std::runtime_error("tjDecompress2: " + error);
  return rgb;
}

}  // namespace pinwheel::testing

#endif  // PINWHEEL_TESTS_TRANSFER_TURBOJPEG_REFERENCE_H_
