// Test JPEGs made in the test with TurboJPEG's compressor from known pixels.
#ifndef PINWHEEL_TESTS_LOADER_IMAGE_TEST_JPEGS_H_
#define PINWHEEL_TESTS_LOADER_IMAGE_TEST_JPEGS_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <turbojpeg.h>
#include <vector>

namespace pinwheel::testing {

// Returns `pixels` (width × height, pixel_format of TurboJPEG's TJPF_*)
// compressed at `quality` with `subsampling` (TJSAMP_*) and TurboJPEG
// `flags` (TJFLAG_PROGRESSIVE, ...); aborts on failure.
inline std::vector<std::byte> EncodeJpeg(const std::vector<uint8_t>& pixels,
                                         int width, int height,
                                         int pixel_format = TJPF_RGB,
                                         int quality = 100,
                                         int subsampling = TJSAMP_444,
                                         int flags = 0) {
  tjhandle handle = tjInitCompress();
  if (handle == nullptr) std::abort();
  unsigned char* jpeg = nullptr;
  unsigned long size = 0;
  if (tjCompress2(handle, pixels.data(), width,
                  width * tjPixelSize[pixel_format], height, pixel_format,
                  &jpeg, &size, subsampling, quality, flags) != 0) {
    std::abort();
  }
  std::vector<std::byte> out(reinterpret_cast<std::byte*>(jpeg),
                             reinterpret_cast<std::byte*>(jpeg) + size);
  tjFree(jpeg);
  tjDestroy(handle);
  return out;
}

// A smooth RGB test pattern (gradients; JPEG keeps it within a few levels
// at quality 100, 4:4:4).
inline std::vector<uint8_t> GradientRgb(int width, int height) {
  std::vector<uint8_t> rgb(static_cast<size_t>(width) * height * 3);
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      uint8_t* p = &rgb[(static_cast<size_t>(y) * width + x) * 3];
      p[0] = static_cast<uint8_t>(x * 255 / std::max(1, width - 1));
      p[1] = static_cast<uint8_t>(y * 255 / std::max(1, height - 1));
      p[2] = static_cast<uint8_t>(128 + (x - y) / 4);
    }
  }
  return rgb;
}

// Returns the largest absolute difference of two equally long buffers.
inline int MaxAbsDiff(const uint8_t* a, const uint8_t* b, size_t n) {
  int worst = 0;
  for (size_t i = 0; i < n; ++i) worst = std::max(worst, std::abs(a[i] - b[i]));
  return worst;
}

// Writes `bytes` to `path` (creating nothing else); aborts on failure.
inline void WriteFile(const std::string& path,
                      const std::vector<std::byte>& bytes) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) std::abort();
  if (!bytes.empty() &&
      std::fwrite(bytes.data(), 1, bytes.size(), f) != bytes.size()) {
    std::abort();
  }
  std::fclose(f);
}

// A JPEG of width × height whose pixels all depend on `seed` (a gradient
// shifted by it), quality 90, 4:2:0.
inline std::vector<std::byte> SeededJpeg(int width, int height, int seed) {
  std::vector<uint8_t> rgb = GradientRgb(width, height);
  for (size_t i = 0; i < rgb.size(); i += 3) {
    rgb[i + 2] = static_cast<uint8_t>(rgb[i + 2] + seed * 37);
  }
  return EncodeJpeg(rgb, width, height, TJPF_RGB, 90, TJSAMP_420);
}

}  // namespace pinwheel::testing

#endif  // PINWHEEL_TESTS_LOADER_IMAGE_TEST_JPEGS_H_
