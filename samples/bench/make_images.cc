// make_images: writes an ImageNet-like folder of JPEGs for the image
// workload (W4), in ImageFolder layout: <out>/c<class>/<index>.jpg.
//
// Usage: make_images --out=/tmp/w4 --count=10000 --classes=100 [--seed=1]
//                    [--threads=0 (one per hardware thread)]
//
// What the images are like (ImageNet's train set: JPEG, sizes spread around
// 500x375, about 110 KB each):
//   - sizes: 45 % 500x375 or 500x333, 20 % the portrait 375x500 or 333x500,
//     35 % a width of 200..800 with an aspect ratio of 0.6..1.6;
//   - content with natural-image structure, not white noise: a smooth
//     two-colour gradient, a sum of value-noise octaves of 2..256 pixels
//     (each octave's amplitude grows with its wavelength, as wavelength^0.2:
//     flatter than 1/f, standing in for the texture that makes camera
//     photos ~100 KB), 3..9 flat shapes with hard edges, and a sensor grain
//     of +-8 levels;
//   - quality 90, 4:2:0 (what most cameras and ImageNet's files use).
// Deterministic: the same seed writes the same files, whatever --threads
// (image i's content is a function of (seed, i) alone). It prints the count,
// the mean size and the mean bytes at the end.
#include <algorithm>
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
#include "absl/strings/str_cat.h"

#include "loader/sample_random.h"

ABSL_FLAG(std::string, out, "", "the folder to write (created)");
ABSL_FLAG(int, count, 10000, "images to write");
ABSL_FLAG(int, classes, 100, "class folders (images dealt round-robin)");
ABSL_FLAG(uint64_t, seed, 1, "the seed of the content");
ABSL_FLAG(int, quality, 90, "JPEG quality");
ABSL_FLAG(int, threads, 0, "writer threads (0: one per hardware thread)");

namespace {

using pinwheel::SampleRandom;

struct Size {
  int width;
  int height;
};

Size DrawSize(SampleRandom& rng) {
  const double r = rng.Uniform();
  if (r < 0.45) return {500, rng.Bernoulli(0.6) ? 375 : 333};
  if (r < 0.65) return {rng.Bernoulli(0.6) ? 375 : 333, 500};
  const int w = static_cast<int>(rng.UniformInt(200, 800));
  const double ratio = 0.6 + rng.Uniform() * 1.0;
  return {w, std::clamp(static_cast<int>(w / ratio), 150, 800)};
}

// Adds one value-noise octave (a grid of `cell` pixels, bilinear between
// random values in [-amplitude, amplitude]) to `plane`.
void AddOctave(std::vector<float>& plane, int w, int h, int cell,
               float amplitude, SampleRandom& rng) {
  const int gw = w / cell + 2;
  const int gh = h / cell + 2;
  std::vector<float> grid(static_cast<size_t>(gw) * gh);
  for (float& g : grid)
    g = static_cast<float>(rng.Uniform() * 2 - 1) * amplitude;
  for (int y = 0; y < h; ++y) {
    const float fy = static_cast<float>(y) / cell;
    const int gy = static_cast<int>(fy);
    const float ty = fy - gy;
    for (int x = 0; x < w; ++x) {
      const float fx = static_cast<float>(x) / cell;
      const int gx = static_cast<int>(fx);
      const float tx = fx - gx;
      const float* g0 = &grid[static_cast<size_t>(gy) * gw + gx];
      const float* g1 = g0 + gw;
      const float top = g0[0] + (g0[1] - g0[0]) * tx;
      const float bottom = g1[0] + (g1[1] - g1[0]) * tx;
      plane[static_cast<size_t>(y) * w + x] += top + (bottom - top) * ty;
    }
  }
}

std::vector<uint8_t> DrawImage(Size size, SampleRandom& rng) {
  const int w = size.width;
  const int h = size.height;
  const size_t n = static_cast<size_t>(w) * h;
  // Luminance texture (1/f-like) and a weaker chroma texture.
  std::vector<float> luma(n, 0.0f);
  std::vector<float> chroma_a(n, 0.0f);
  std::vector<float> chroma_b(n, 0.0f);
  for (int cell = 256; cell >= 2; cell /= 2) {
    const float amplitude = 46.0f * std::pow(static_cast<float>(cell), 0.2f);
    AddOctave(luma, w, h, cell, amplitude, rng);
    if (cell >= 8) {
      AddOctave(chroma_a, w, h, cell, amplitude * 0.35f, rng);
      AddOctave(chroma_b, w, h, cell, amplitude * 0.35f, rng);
    }
  }
  // The gradient's two colours and direction.
  float c0[3];
  float c1[3];
  for (int c = 0; c < 3; ++c) {
    c0[c] = static_cast<float>(rng.UniformInt(20, 235));
    c1[c] = static_cast<float>(rng.UniformInt(20, 235));
  }
  const double angle = rng.Uniform() * 2 * M_PI;
  const float dx = static_cast<float>(std::cos(angle));
  const float dy = static_cast<float>(std::sin(angle));
  std::vector<uint8_t> rgb(n * 3);
  std::vector<float> base(n * 3);
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      const float t = std::clamp(
          0.5f + (dx * (x - w / 2.0f) + dy * (y - h / 2.0f)) / (w + h), 0.0f,
          1.0f);
      for (int c = 0; c < 3; ++c) {
        base[(static_cast<size_t>(y) * w + x) * 3 + c] =
            c0[c] + (c1[c] - c0[c]) * t;
      }
    }
  }
  // Flat shapes with hard edges: ellipses and rectangles.
  const int shapes = static_cast<int>(rng.UniformInt(3, 9));
  for (int s = 0; s < shapes; ++s) {
    const float cx = static_cast<float>(rng.Uniform() * w);
    const float cy = static_cast<float>(rng.Uniform() * h);
    const float rx = static_cast<float>((0.05 + rng.Uniform() * 0.3) * w);
    const float ry = static_cast<float>((0.05 + rng.Uniform() * 0.3) * h);
    const bool ellipse = rng.Bernoulli(0.5);
    float colour[3];
    for (float& c : colour) c = static_cast<float>(rng.UniformInt(0, 255));
    const int x0 = std::max(0, static_cast<int>(cx - rx));
    const int x1 = std::min(w, static_cast<int>(cx + rx) + 1);
    const int y0 = std::max(0, static_cast<int>(cy - ry));
    const int y1 = std::min(h, static_cast<int>(cy + ry) + 1);
    for (int y = y0; y < y1; ++y) {
      for (int x = x0; x < x1; ++x) {
        const float u = (x - cx) / rx;
        const float v = (y - cy) / ry;
        if (ellipse && u * u + v * v > 1) continue;
        for (int c = 0; c < 3; ++c) {
          base[(static_cast<size_t>(y) * w + x) * 3 + c] = colour[c];
        }
      }
    }
  }
  for (size_t i = 0; i < n; ++i) {
    const float grain = static_cast<float>(rng.Uniform() - 0.5) * 16.0f;
    const float l = luma[i] + grain;
    const float v[3] = {l + chroma_a[i], l - 0.5f * chroma_a[i] + chroma_b[i],
                        l - chroma_b[i]};
    for (int c = 0; c < 3; ++c) {
      rgb[i * 3 + c] = static_cast<uint8_t>(
          std::clamp(base[i * 3 + c] + v[c] + 0.5f, 0.0f, 255.0f));
    }
  }
  return rgb;
}

struct Totals {
  double bytes = 0;
  double width = 0;
  double height = 0;
  std::string error;  // the first failure; empty when all were written
};

// Writes images first, first + stride, ... below --count.
Totals WriteImages(const std::string& out, int first, int stride) {
  Totals totals;
  const int count = absl::GetFlag(FLAGS_count);
  const int classes = absl::GetFlag(FLAGS_classes);
  tjhandle handle = tjInitCompress();
  if (handle == nullptr) {
    totals.error = absl::StrCat("tjInitCompress: ", tjGetErrorStr2(nullptr));
    return totals;
  }
  for (int i = first; i < count; i += stride) {
    SampleRandom rng(absl::GetFlag(FLAGS_seed), 0, static_cast<uint64_t>(i));
    const Size size = DrawSize(rng);
    const std::vector<uint8_t> rgb = DrawImage(size, rng);
    unsigned char* jpeg = nullptr;
    unsigned long bytes = 0;
    if (tjCompress2(handle, rgb.data(), size.width, size.width * 3, size.height,
                    TJPF_RGB, &jpeg, &bytes, TJSAMP_420,
                    absl::GetFlag(FLAGS_quality), 0) != 0) {
      totals.error = absl::StrCat("image ", i, ": ", tjGetErrorStr2(handle));
      break;
    }
    const std::string path =
        (std::filesystem::path(out) / absl::StrCat("c", i % classes) /
         absl::StrCat(i, ".jpg"))
            .string();
    std::FILE* f = std::fopen(path.c_str(), "wb");
    const bool ok = f != nullptr && std::fwrite(jpeg, 1, bytes, f) == bytes &&
                    std::fclose(f) == 0;
    tjFree(jpeg);
    if (!ok) {
      totals.error = absl::StrCat(path, ": cannot write");
      break;
    }
    totals.bytes += static_cast<double>(bytes);
    totals.width += size.width;
    totals.height += size.height;
  }
  tjDestroy(handle);
  return totals;
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const std::string out = absl::GetFlag(FLAGS_out);
  const int count = absl::GetFlag(FLAGS_count);
  const int classes = absl::GetFlag(FLAGS_classes);
  if (out.empty() || count < 1 || classes < 1) {
    std::fprintf(
        stderr, "make_images: --out is required; --count and --classes >= 1\n");
    return 2;
  }
  for (int c = 0; c < classes; ++c) {
    std::filesystem::create_directories(std::filesystem::path(out) /
                                        absl::StrCat("c", c));
  }
  int threads = absl::GetFlag(FLAGS_threads);
  if (threads <= 0) {
    threads =
        std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  }
  threads = std::min(threads, count);
  // Thread t writes images t, t + threads, ...; each keeps its own totals.
  std::vector<Totals> totals(static_cast<size_t>(threads));
  std::vector<std::thread> writers;
  for (int t = 0; t < threads; ++t) {
    writers.emplace_back([&, t] {
      totals[static_cast<size_t>(t)] = WriteImages(out, t, threads);
    });
  }
  for (std::thread& writer : writers) writer.join();
  Totals all;
  for (const Totals& part : totals) {
    if (!part.error.empty()) {
      std::fprintf(stderr, "make_images: %s\n", part.error.c_str());
      return 1;
    }
    all.bytes += part.bytes;
    all.width += part.width;
    all.height += part.height;
  }
  const double total_bytes = all.bytes;
  const double total_width = all.width;
  const double total_height = all.height;
  std::printf(
      "make_images: %d JPEGs in %d classes under %s: mean %.0fx%.0f, mean "
      "%.1f KB\n",
      count, classes, out.c_str(), total_width / count, total_height / count,
      total_bytes / count / 1000);
  return 0;
}
