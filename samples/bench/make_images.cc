// pinwheel_make_images: writes the W4 image set, an ImageNet-like folder of
// JPEGs in the ImageFolder layout (root/class_NNN/img_NNNNNN.jpg), made once
// before a benchmark run. Deterministic: the same flags give the same bytes.
//
// What makes it ImageNet-like (Note [synthetic photographs]): sizes spread
// around 500x375 (landscape, portrait and square, 300-640 pixels a side),
// quality 90 with 4:2:0 chroma, and content with a natural image's
// statistics rather than white noise: an amplitude spectrum falling as 1/f
// (octaves of smooth value noise, each half the amplitude of the one
// below), a few hard-edged shapes, and colour that is mostly luminance.
// At the defaults the files average about 100 KB, as ImageNet's do (about
// 110 KB), so decode costs what it costs on real photographs.
//
// Usage: pinwheel_make_images --out=DIR [--count=10000] [--classes=100]
//        [--threads=N]
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>
#include <turbojpeg.h>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"

#include "loader/atomic_file.h"
#include "loader/sample_random.h"

ABSL_FLAG(std::string, out, "", "directory to write the image folder into");
ABSL_FLAG(int64_t, count, 10'000, "number of JPEG files");
ABSL_FLAG(int64_t, classes, 100, "number of class folders");
ABSL_FLAG(int, quality, 90, "JPEG quality");
ABSL_FLAG(int, threads, 0, "encoder threads (0: all cores)");
ABSL_FLAG(uint64_t, seed, 4, "fixes every image");

namespace {

// Note [synthetic photographs]: value noise at octave k is a grid of random
// values every 2^k pixels, bilinearly interpolated; summing octaves with
// amplitude proportional to the cell size gives the 1/f amplitude spectrum
// that photographs have (Field 1987), and so JPEG sizes like theirs. The
// finest octave (2 pixels) carries the texture that costs the entropy
// coder; its amplitude is what tunes the average file size.
struct Image {
  int width = 0;
  int height = 0;
  std::vector<uint8_t> rgb;  // HWC
};

void AddValueNoise(pinwheel::SampleRandom& rng, int cell, float amplitude,
                   int width, int height, std::vector<float>& plane) {
  const int gw = width / cell + 2;
  const int gh = height / cell + 2;
  std::vector<float> grid(static_cast<size_t>(gw) * gh);
  for (float& v : grid) v = rng.UniformFloat(-amplitude, amplitude);
  for (int y = 0; y < height; ++y) {
    const float gy = static_cast<float>(y) / cell;
    const int y0 = static_cast<int>(gy);
    const float fy = gy - y0;
    for (int x = 0; x < width; ++x) {
      const float gx = static_cast<float>(x) / cell;
      const int x0 = static_cast<int>(gx);
      const float fx = gx - x0;
      const float* row0 = &grid[static_cast<size_t>(y0) * gw + x0];
      const float* row1 = row0 + gw;
      const float top = row0[0] + (row0[1] - row0[0]) * fx;
      const float bottom = row1[0] + (row1[1] - row1[0]) * fx;
      plane[static_cast<size_t>(y) * width + x] += top + (bottom - top) * fy;
    }
  }
}

Image MakeImage(uint64_t seed, int64_t index) {
  pinwheel::SampleRandom rng(seed, 0, static_cast<uint64_t>(index));
  // Sizes: ImageNet's median is 500x375 (4:3); about a fifth are portrait
  // and a tenth square.
  static constexpr float kAspects[] = {4.f / 3, 4.f / 3, 4.f / 3, 4.f / 3,
                                       3.f / 2, 3.f / 2, 3.f / 4, 2.f / 3,
                                       1.f,     5.f / 4};
  const float aspect = kAspects[rng.UniformInt(0, 9)];
  const int long_side = static_cast<int>(rng.UniformInt(400, 640));
  Image image;
  if (aspect >= 1) {
    image.width = long_side;
    image.height = static_cast<int>(std::lround(long_side / aspect));
  } else {
    image.height = long_side;
    image.width = static_cast<int>(std::lround(long_side * aspect));
  }
  const int w = image.width;
  const int h = image.height;
  const size_t pixels = static_cast<size_t>(w) * h;
  // Luminance with a 1/f spectrum, and two chroma planes with less detail.
  std::vector<float> luma(pixels, 0.f), cb(pixels, 0.f), cr(pixels, 0.f);
  for (int cell = 256; cell >= 1; cell /= 2) {
    AddValueNoise(rng, cell, 18.f * std::pow(static_cast<float>(cell), 0.35f),
                  w, h, luma);
    if (cell >= 8) {
      AddValueNoise(rng, cell, 0.25f * cell, w, h, cb);
      AddValueNoise(rng, cell, 0.25f * cell, w, h, cr);
    }
  }
  // Hard edges: a few flat-shaded ellipses, as objects in a scene.
  const int shapes = static_cast<int>(rng.UniformInt(3, 8));
  for (int s = 0; s < shapes; ++s) {
    const float cx = rng.UniformFloat(0, w), cy = rng.UniformFloat(0, h);
    const float rx = rng.UniformFloat(10, w / 3.f);
    const float ry = rng.UniformFloat(10, h / 3.f);
    const float dl = rng.UniformFloat(-60, 60);
    const float dcb = rng.UniformFloat(-30, 30);
    const float dcr = rng.UniformFloat(-30, 30);
    const int y_lo = std::max(0, static_cast<int>(cy - ry));
    const int y_hi = std::min(h - 1, static_cast<int>(cy + ry));
    for (int y = y_lo; y <= y_hi; ++y) {
      for (int x = 0; x < w; ++x) {
        const float u = (x - cx) / rx, v = (y - cy) / ry;
        if (u * u + v * v > 1) continue;
        const size_t i = static_cast<size_t>(y) * w + x;
        luma[i] += dl;
        cb[i] += dcb;
        cr[i] += dcr;
      }
    }
  }
  const float base = rng.UniformFloat(90, 160);
  image.rgb.resize(pixels * 3);
  for (size_t i = 0; i < pixels; ++i) {
    const float y = base + luma[i];
    const float r = y + 1.402f * cr[i];
    const float g = y - 0.344f * cb[i] - 0.714f * cr[i];
    const float b = y + 1.772f * cb[i];
    image.rgb[3 * i + 0] = static_cast<uint8_t>(std::clamp(r, 0.f, 255.f));
    image.rgb[3 * i + 1] = static_cast<uint8_t>(std::clamp(g, 0.f, 255.f));
    image.rgb[3 * i + 2] = static_cast<uint8_t>(std::clamp(b, 0.f, 255.f));
  }
  return image;
}

// Encodes image `index` and writes it atomically; returns its size in bytes.
absl::StatusOr<int64_t> WriteImage(tjhandle encoder,
                                   const std::filesystem::path& root,
                                   uint64_t seed, int64_t index,
                                   int64_t classes, int quality) {
  const Image image = MakeImage(seed, index);
  unsigned char* jpeg = nullptr;
  unsigned long jpeg_size = 0;  // NOLINT(runtime/int): TurboJPEG's type
  if (tjCompress2(encoder, image.rgb.data(), image.width, 0, image.height,
                  TJPF_RGB, &jpeg, &jpeg_size, TJSAMP_420, quality,
                  TJFLAG_FASTDCT) != 0) {
    return absl::InternalError(absl::StrFormat("encoding image %d: %s", index,
                                               tjGetErrorStr2(encoder)));
  }
  const std::filesystem::path path =
      root / absl::StrFormat("class_%03d", index % classes) /
      absl::StrFormat("img_%06d.jpg", index);
  absl::Status written = pinwheel::WriteFileAtomically(
      path.string(), absl::string_view(reinterpret_cast<const char*>(jpeg),
                                       static_cast<size_t>(jpeg_size)));
  tjFree(jpeg);
  if (!written.ok()) return written;
  return static_cast<int64_t>(jpeg_size);
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const std::string out = absl::GetFlag(FLAGS_out);
  const int64_t count = absl::GetFlag(FLAGS_count);
  const int64_t classes = absl::GetFlag(FLAGS_classes);
  const int quality = absl::GetFlag(FLAGS_quality);
  const uint64_t seed = absl::GetFlag(FLAGS_seed);
  if (out.empty() || count < 1 || classes < 1 || classes > 1000 ||
      quality < 1 || quality > 100) {
    std::fprintf(stderr,
                 "make_images: need --out=DIR, --count >= 1, --classes in "
                 "1..1000, --quality in 1..100\n");
    return 2;
  }
  const std::filesystem::path root(out);
  std::error_code error;
  for (int64_t c = 0; c < classes; ++c) {
    std::filesystem::create_directories(root / absl::StrFormat("class_%03d", c),
                                        error);
    if (error) {
      std::fprintf(stderr, "make_images: cannot create %s: %s\n",
                   (root / absl::StrFormat("class_%03d", c)).c_str(),
                   error.message().c_str());
      return 1;
    }
  }
  int threads = absl::GetFlag(FLAGS_threads);
  if (threads <= 0) {
    threads =
        static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  }
  std::atomic<int64_t> next{0}, bytes{0}, failed{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&] {
      tjhandle encoder = tjInitCompress();
      for (int64_t i = next++; i < count; i = next++) {
        absl::StatusOr<int64_t> size =
            WriteImage(encoder, root, seed, i, classes, quality);
        if (!size.ok()) {
          std::fprintf(stderr, "make_images: %s\n",
                       size.status().ToString().c_str());
          ++failed;
          continue;
        }
        bytes += *size;
      }
      tjDestroy(encoder);
    });
  }
  for (std::thread& t : pool) t.join();
  if (failed > 0) return 1;
  std::printf(
      "make_images: %lld JPEGs in %lld classes under %s, %.1f KB "
      "on average (quality %d)\n",
      static_cast<long long>(count), static_cast<long long>(classes),
      out.c_str(), bytes.load() / 1000.0 / count, quality);
  return 0;
}
