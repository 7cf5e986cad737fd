// image_throughput: decode + RandomResizedCrop + flip per core, on a folder
// of JPEGs (e.g. make_images' output), one thread, files held in memory.
//
// Usage: image_throughput --root=/tmp/w4 [--size=224] [--limit=2000]
//                         [--repeat=3] [--loader_workers=2]
//
// Rows (each the median of --repeat passes over the files):
//   fused     DecodeTransformedImage, the datasets' path: the crop decoded at
//             a reduced DCT scale, only its pixels, resized into the output
//   region    the fused path's decode alone (its boxes, no resize): the
//             rest of `fused` is the resize
//   full      the same crops from a full-size full-image decode (DecodeJpeg
//             at 1/1) + ResizeRegion: what a decoder without the tricks does
//   decode    DecodeJpeg at 1/1 alone: the full decode's share of `full`
//   loader    ImageFolderDataset through a host Loader with
//             --loader_workers workers (file reads included), batch 64
// img/s are given per second of this thread's CPU time (per core) and of
// wall time; on a shared machine the CPU-time figure is the one to quote.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <time.h>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"

#include "pinwheel/pinwheel.h"

ABSL_FLAG(std::string, root, "", "an ImageFolder root of JPEGs");
ABSL_FLAG(int, size, 224, "the output side");
ABSL_FLAG(int, limit, 2000, "at most this many files (0: all)");
ABSL_FLAG(int, repeat, 3, "passes per row (the median is printed)");
ABSL_FLAG(int, loader_workers, 2, "the loader row's workers (0: no row)");
ABSL_FLAG(std::string, rows, "fused,region,full,decode",
          "the rows to run, comma-separated (e.g. fused alone, for perf)");

namespace {

using namespace pinwheel;

double Seconds(clockid_t clock) {
  timespec t;
  clock_gettime(clock, &t);
  return static_cast<double>(t.tv_sec) + t.tv_nsec * 1e-9;
}

struct Timing {
  double cpu = 0;
  double wall = 0;
};

template <typename Body>
Timing Median(int repeat, Body body) {
  std::vector<Timing> runs;
  for (int r = 0; r < repeat; ++r) {
    const double cpu0 = Seconds(CLOCK_PROCESS_CPUTIME_ID);
    const double wall0 = Seconds(CLOCK_MONOTONIC);
    body();
    runs.push_back({Seconds(CLOCK_PROCESS_CPUTIME_ID) - cpu0,
                    Seconds(CLOCK_MONOTONIC) - wall0});
  }
  std::sort(runs.begin(), runs.end(),
            [](const Timing& a, const Timing& b) { return a.cpu < b.cpu; });
  return runs[runs.size() / 2];
}

// Median(), for a row named in --rows; a zero Timing (not printed) else.
template <typename Body>
Timing Row(const char* row, int repeat, Body body) {
  static const std::vector<std::string> rows =
      absl::StrSplit(absl::GetFlag(FLAGS_rows), ',');
  if (std::find(rows.begin(), rows.end(), row) == rows.end()) return {};
  return Median(repeat, body);
}

void Print(const char* row, int64_t images, Timing t, const char* note) {
  if (t.cpu == 0) return;
  std::printf("%-8s %7.0f img/s per core (CPU time) %7.0f img/s wall  %s\n",
              row, images / t.cpu, images / t.wall, note);
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const std::string root = absl::GetFlag(FLAGS_root);
  const int size = absl::GetFlag(FLAGS_size);
  const int repeat = std::max(1, absl::GetFlag(FLAGS_repeat));
  absl::StatusOr<std::shared_ptr<ImageFolderDataset>> folder =
      ImageFolderDataset::Open(root, {{.size = size}});
  if (!folder.ok()) {
    std::fprintf(stderr, "image_throughput: %s\n",
                 folder.status().ToString().c_str());
    return 1;
  }
  int64_t n = (*folder)->size();
  if (absl::GetFlag(FLAGS_limit) > 0) {
    n = std::min<int64_t>(n, absl::GetFlag(FLAGS_limit));
  }
  std::vector<std::vector<std::byte>> files(static_cast<size_t>(n));
  double bytes = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (absl::Status s = ReadWholeFile((*folder)->path(i), int64_t{1} << 26,
                                       files[static_cast<size_t>(i)]);
        !s.ok()) {
      std::fprintf(stderr, "image_throughput: %s\n", s.ToString().c_str());
      return 1;
    }
    bytes += static_cast<double>(files[static_cast<size_t>(i)].size());
  }
  std::printf("%lld JPEGs from %s, mean %.1f KB, output %dx%d, median of %d\n",
              static_cast<long long>(n), root.c_str(), bytes / n / 1000, size,
              size, repeat);
  std::vector<uint8_t> out(static_cast<size_t>(size) * size * 3);
  const ImageTransformOptions train{.train = true, .size = size};
  bool failed = false;

  const Timing fused = Row("fused", repeat, [&] {
    for (int64_t i = 0; i < n; ++i) {
      SampleRandom rng(1, 0, static_cast<uint64_t>(i));
      failed |= !DecodeTransformedImage(files[i], "f", train, rng,
                                        absl::MakeSpan(out))
                     .ok();
    }
  });
  std::vector<uint8_t> full_rgb;
  const Timing full = Row("full", repeat, [&] {
    for (int64_t i = 0; i < n; ++i) {
      absl::StatusOr<JpegInfo> info = ReadJpegInfo(files[i], "f");
      if (!info.ok()) {
        failed = true;
        continue;
      }
      SampleRandom rng(1, 0, static_cast<uint64_t>(i));
      const CropRegion crop =
          RandomResizedCropRegion(info->width, info->height, rng);
      const bool flip = rng.Bernoulli(0.5);
      full_rgb.resize(static_cast<size_t>(DecodedJpegBytes(*info, {})));
      failed |= !DecodeJpeg(files[i], "f", {}, absl::MakeSpan(full_rgb)).ok();
      const RgbImageView view{.data = full_rgb.data(),
                              .width = info->width,
                              .height = info->height,
                              .row_bytes = int64_t{info->width} * 3};
      failed |=
          !ResizeRegion(view, crop, size, size, flip, absl::MakeSpan(out)).ok();
    }
  });
  // The fused path's decode alone: the same boxes DecodeResizedCrop asks
  // for (the crop at its DCT scale, plus the filter's reach), no resize.
  std::vector<uint8_t> region_rgb;
  const Timing region = Row("region", repeat, [&] {
    for (int64_t i = 0; i < n; ++i) {
      absl::StatusOr<JpegInfo> info = ReadJpegInfo(files[i], "f");
      if (!info.ok()) {
        failed = true;
        continue;
      }
      SampleRandom rng(1, 0, static_cast<uint64_t>(i));
      const CropRegion crop =
          RandomResizedCropRegion(info->width, info->height, rng);
      const JpegScale scale =
          ChooseJpegScale(crop.width, crop.height, size, size);
      const double f = static_cast<double>(scale.num) / scale.denom;
      const int w = ScaledJpegSize(info->width, scale);
      const int h = ScaledJpegSize(info->height, scale);
      const int x0 = std::max(0, static_cast<int>(crop.x * f) - 3);
      const int y0 = std::max(0, static_cast<int>(crop.y * f) - 3);
      const PixelBox box{
          .x = x0,
          .y = y0,
          .width =
              std::min(w, static_cast<int>((crop.x + crop.width) * f) + 3) - x0,
          .height =
              std::min(h, static_cast<int>((crop.y + crop.height) * f) + 3) -
              y0};
      region_rgb.resize(static_cast<size_t>(JpegRegionBytes(box)));
      failed |= !DecodeJpegRegion(files[i], "f", scale, box,
                                  absl::MakeSpan(region_rgb))
                     .ok();
    }
  });
  const Timing decode = Row("decode", repeat, [&] {
    for (int64_t i = 0; i < n; ++i) {
      absl::StatusOr<JpegInfo> info = ReadJpegInfo(files[i], "f");
      if (!info.ok()) {
        failed = true;
        continue;
      }
      full_rgb.resize(static_cast<size_t>(DecodedJpegBytes(*info, {})));
      failed |= !DecodeJpeg(files[i], "f", {}, absl::MakeSpan(full_rgb)).ok();
    }
  });
  if (failed) {
    std::fprintf(stderr, "image_throughput: a decode failed\n");
    return 1;
  }
  Print("fused", n, fused, "crop region at reduced DCT scale + resize + flip");
  Print("region", n, region, "fused's decode alone (crop box, DCT scale)");
  Print("full", n, full, "full decode at 1/1 + resize of the crop + flip");
  Print("decode", n, decode, "full decode at 1/1 only");

  const int workers = absl::GetFlag(FLAGS_loader_workers);
  if (workers > 0) {
    absl::StatusOr<Loader> loader = LoaderBuilder(*folder)
                                        .batch_size(64)
                                        .shuffle(1)
                                        .num_workers(workers)
                                        .device(Device::Host())
                                        .Build();
    if (!loader.ok()) {
      std::fprintf(stderr, "image_throughput: %s\n",
                   loader.status().ToString().c_str());
      return 1;
    }
    int64_t images = 0;
    const Timing epoch = Median(1, [&] {
      for (absl::StatusOr<DeviceBatch>& batch : *loader) {
        if (!batch.ok()) {
          std::fprintf(stderr, "image_throughput: %s\n",
                       batch.status().ToString().c_str());
          failed = true;
          return;
        }
        images += batch->size();
      }
    });
    if (failed) return 1;
    std::printf(
        "loader   %7.0f img/s wall with %d workers (%lld images, one epoch; "
        "%.0f img/s per second of process CPU time)\n",
        images / epoch.wall, workers, static_cast<long long>(images),
        images / epoch.cpu);
  }
  return 0;
}
