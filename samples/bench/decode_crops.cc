// decode_crops: the CPU path's training samples of a folder of JPEGs, with
// the crop and flip that made each, for a comparison with another pipeline
// (resize_vs_torchvision.py runs torchvision's on the same boxes).
//
// Usage: decode_crops --root=DIR --out=PREFIX [--size=224] [--seed=1]
//                     [--limit=0]
//
// For file i (ImageFolderDataset's order) it draws the crop and flip as the
// datasets do (DrawImageCrop, train, SampleRandom(seed, 0, i)), runs
// DecodeTransformedImage, and writes PREFIX.txt, one line a file:
//   <x> <y> <width> <height> <flip 0|1> <scale num>/<denom> <path>
// (the crop in the file's pixels, the DCT scale the decode used; the path
// last, so that it may hold spaces) and
// PREFIX.rgb, the size x size x 3 u8 HWC outputs one after the other.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"

#include "pinwheel/pinwheel.h"

ABSL_FLAG(std::string, root, "", "an ImageFolder root of JPEGs");
ABSL_FLAG(std::string, out, "", "the output prefix (PREFIX.txt, PREFIX.rgb)");
ABSL_FLAG(int, size, 224, "the output side");
ABSL_FLAG(uint64_t, seed, 1, "the seed of the crops");
ABSL_FLAG(int, limit, 0, "at most this many files (0: all)");

int main(int argc, char** argv) {
  using namespace pinwheel;
  absl::ParseCommandLine(argc, argv);
  const std::string prefix = absl::GetFlag(FLAGS_out);
  const int size = absl::GetFlag(FLAGS_size);
  if (prefix.empty()) {
    std::fprintf(stderr, "decode_crops: --out is required\n");
    return 2;
  }
  absl::StatusOr<std::shared_ptr<ImageFolderDataset>> folder =
      ImageFolderDataset::Open(absl::GetFlag(FLAGS_root), {{.size = size}});
  if (!folder.ok()) {
    std::fprintf(stderr, "decode_crops: %s\n",
                 folder.status().ToString().c_str());
    return 1;
  }
  int64_t n = (*folder)->size();
  if (absl::GetFlag(FLAGS_limit) > 0) {
    n = std::min<int64_t>(n, absl::GetFlag(FLAGS_limit));
  }
  std::FILE* index = std::fopen((prefix + ".txt").c_str(), "w");
  std::FILE* pixels = std::fopen((prefix + ".rgb").c_str(), "wb");
  if (index == nullptr || pixels == nullptr) {
    std::fprintf(stderr, "decode_crops: cannot write %s.txt / .rgb\n",
                 prefix.c_str());
    return 1;
  }
  const ImageTransformOptions train{.train = true, .size = size};
  std::vector<uint8_t> out(static_cast<size_t>(size) * size * 3);
  std::vector<std::byte> file;
  for (int64_t i = 0; i < n; ++i) {
    const std::string path = (*folder)->path(i);
    absl::Status s = ReadWholeFile(path, int64_t{1} << 28, file);
    absl::StatusOr<JpegInfo> info =
        s.ok() ? ReadJpegInfo(file, path) : absl::StatusOr<JpegInfo>(s);
    if (!info.ok()) {
      std::fprintf(stderr, "decode_crops: %s\n",
                   info.status().ToString().c_str());
      return 1;
    }
    const uint64_t seed = absl::GetFlag(FLAGS_seed);
    SampleRandom draw_rng(seed, 0, static_cast<uint64_t>(i));
    const ImageCropDraw draw =
        DrawImageCrop(info->width, info->height, train, draw_rng);
    SampleRandom rng(seed, 0, static_cast<uint64_t>(i));
    s = DecodeTransformedImage(file, path, train, rng, absl::MakeSpan(out));
    if (!s.ok()) {
      std::fprintf(stderr, "decode_crops: %s\n", s.ToString().c_str());
      return 1;
    }
    const JpegScale scale =
        ChooseJpegScale(draw.region.width, draw.region.height, size, size);
    std::fprintf(index, "%.17g %.17g %.17g %.17g %d %d/%d %s\n", draw.region.x,
                 draw.region.y, draw.region.width, draw.region.height,
                 draw.flip ? 1 : 0, scale.num, scale.denom, path.c_str());
    std::fwrite(out.data(), 1, out.size(), pixels);
  }
  const bool ok = std::fclose(index) == 0 && std::fclose(pixels) == 0;
  return ok ? 0 : 1;
}
