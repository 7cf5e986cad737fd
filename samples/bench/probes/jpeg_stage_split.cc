// jpeg_stage_split: where one worker's time goes on the CPU decode path
// (issue 32), one thread, files in memory, the crops the datasets draw
// (RandomResizedCrop(size) from SampleRandom(1, 0, i)).
//
// Usage: jpeg_stage_split --root=/tmp/w4 [--size=224] [--limit=500]
//                         [--repeat=5] [--scales=fast,eighths]
//
// For each scale rule (fast: the smallest of 1/1, 1/2, 1/4, 1/8 that keeps
// the crop >= size; eighths: the smallest M/8; plusM, e.g. plus6: fast's
// and M/8) and the box the fused path
// decodes (the crop at that scale plus one pixel), it times, in this order
// and each over all files (median of --repeat passes, thread CPU time):
//   entropy   jpeg_start_decompress + jpeg_skip_scanlines to the box's
//             bottom: the entropy decode of the rows decoded (libjpeg-turbo
//             skips whole iMCU rows without the IDCT)
//   ycc       the box decoded to YCbCr: entropy + IDCT + chroma upsampling
//   rgb       the box decoded to RGB: ycc + colour conversion
//   resize    ResizeRegion of the crop in the decoded box to size x size,
//             flipped as drawn
// so IDCT+upsampling = ycc - entropy, colour conversion = rgb - ycc.
#include <algorithm>
#include <cmath>
#include <csetjmp>
#include <cstdint>
#include <cstdio>
#include <string>
#include <time.h>
#include <vector>
// clang-format off
#include <jpeglib.h>
#include <jerror.h>
// clang-format on

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_split.h"

#include "pinwheel/pinwheel.h"

ABSL_FLAG(std::string, root, "", "an ImageFolder root of JPEGs");
ABSL_FLAG(int, size, 224, "the output side");
ABSL_FLAG(int, limit, 500, "at most this many files (0: all)");
ABSL_FLAG(int, repeat, 5, "passes per stage (the median is printed)");
ABSL_FLAG(std::string, scales, "fast,eighths", "scale rules to measure");

namespace {

using namespace pinwheel;

double ThreadSeconds() {
  timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + t.tv_nsec * 1e-9;
}

struct Probe {
  jpeg_decompress_struct cinfo{};
  jpeg_error_mgr err{};
  Probe() {
    cinfo.err = jpeg_std_error(&err);
    jpeg_create_decompress(&cinfo);
  }
  ~Probe() { jpeg_destroy_decompress(&cinfo); }
};

enum class Stage { kEntropy, kYcc, kRgb };

// Decodes (or, kEntropy, skips) the rows of `box` at `scale`; returns the
// decoded box's width (columns widened by jpeg_crop_scanline).
int DecodeStage(Probe& p, const std::vector<std::byte>& file, JpegScale scale,
                const PixelBox& box, Stage stage, std::vector<uint8_t>& out,
                int* x_decoded) {
  j_decompress_ptr c = &p.cinfo;
  jpeg_mem_src(c, reinterpret_cast<const unsigned char*>(file.data()),
               static_cast<unsigned long>(file.size()));
  jpeg_read_header(c, TRUE);
  c->scale_num = static_cast<unsigned>(scale.num);
  c->scale_denom = static_cast<unsigned>(scale.denom);
  c->out_color_space = stage == Stage::kRgb ? JCS_EXT_RGB : JCS_YCbCr;
  c->dct_method = JDCT_ISLOW;
  jpeg_start_decompress(c);
  JDIMENSION x = static_cast<JDIMENSION>(box.x);
  JDIMENSION w = static_cast<JDIMENSION>(box.width);
  if (w != c->output_width) jpeg_crop_scanline(c, &x, &w);
  *x_decoded = static_cast<int>(x);
  if (stage == Stage::kEntropy) {
    jpeg_skip_scanlines(c, static_cast<JDIMENSION>(box.y + box.height));
  } else {
    if (box.y > 0) jpeg_skip_scanlines(c, static_cast<JDIMENSION>(box.y));
    out.resize(static_cast<size_t>(w) * 3 * box.height);
    for (int r = 0; r < box.height;) {
      JSAMPROW row = out.data() + static_cast<size_t>(r) * w * 3;
      r += static_cast<int>(jpeg_read_scanlines(c, &row, 1));
    }
  }
  jpeg_abort_decompress(c);
  return static_cast<int>(w);
}

// The smallest M/8 at which the region keeps >= out on both sides, M
// taken from `allowed` (bit M set), or 8/8.
JpegScale SmallestEighth(double w, double h, int out, unsigned allowed) {
  for (int m = 1; m < 8; ++m) {
    if ((allowed >> m & 1) != 0 && w * m / 8 >= out && h * m / 8 >= out) {
      return {m, 8};
    }
  }
  return {1, 1};
}

// The M allowed by a rule: "fast" 1, 2, 4; "eighths" 1..7; "plusM" (e.g.
// plus6) 1, 2, 4 and M.
unsigned AllowedEighths(absl::string_view rule) {
  if (rule == "eighths") return 0xfe;
  unsigned fast = (1u << 1) | (1u << 2) | (1u << 4);
  if (rule.size() == 5 && rule.substr(0, 4) == "plus" && rule[4] >= '1' &&
      rule[4] <= '7') {
    fast |= 1u << (rule[4] - '0');
  }
  return fast;
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const int size = absl::GetFlag(FLAGS_size);
  const int repeat = std::max(1, absl::GetFlag(FLAGS_repeat));
  absl::StatusOr<std::shared_ptr<ImageFolderDataset>> folder =
      ImageFolderDataset::Open(absl::GetFlag(FLAGS_root), {{.size = size}});
  if (!folder.ok()) {
    std::fprintf(stderr, "%s\n", folder.status().ToString().c_str());
    return 1;
  }
  int64_t n = (*folder)->size();
  if (absl::GetFlag(FLAGS_limit) > 0) {
    n = std::min<int64_t>(n, absl::GetFlag(FLAGS_limit));
  }
  std::vector<std::vector<std::byte>> files(static_cast<size_t>(n));
  std::vector<JpegInfo> infos(static_cast<size_t>(n));
  std::vector<ImageCropDraw> draws(static_cast<size_t>(n));
  const ImageTransformOptions train{.train = true, .size = size};
  for (int64_t i = 0; i < n; ++i) {
    if (absl::Status s = ReadWholeFile((*folder)->path(i), int64_t{1} << 26,
                                       files[static_cast<size_t>(i)]);
        !s.ok()) {
      std::fprintf(stderr, "%s\n", s.ToString().c_str());
      return 1;
    }
    infos[i] = *ReadJpegInfo(files[i], "f");
    SampleRandom rng(1, 0, static_cast<uint64_t>(i));
    draws[i] = DrawImageCrop(infos[i].width, infos[i].height, train, rng);
  }
  Probe probe;
  std::vector<uint8_t> decoded;
  std::vector<uint8_t> out(static_cast<size_t>(size) * size * 3);
  std::printf(
      "%lld JPEGs, output %dx%d, thread CPU us per image, median of "
      "%d\n",
      static_cast<long long>(n), size, size, repeat);
  for (absl::string_view rule :
       absl::StrSplit(absl::GetFlag(FLAGS_scales), ',')) {
    std::vector<JpegScale> scales(static_cast<size_t>(n));
    std::vector<PixelBox> boxes(static_cast<size_t>(n));
    double pixels = 0;
    for (int64_t i = 0; i < n; ++i) {
      const CropRegion& r = draws[i].region;
      scales[i] = SmallestEighth(r.width, r.height, size, AllowedEighths(rule));
      const double f = static_cast<double>(scales[i].num) / scales[i].denom;
      const int w = ScaledJpegSize(infos[i].width, scales[i]);
      const int h = ScaledJpegSize(infos[i].height, scales[i]);
      const int x0 = std::max(0, static_cast<int>(std::floor(r.x * f)) - 1);
      const int y0 = std::max(0, static_cast<int>(std::floor(r.y * f)) - 1);
      const int x1 =
          std::min(w, static_cast<int>(std::ceil((r.x + r.width) * f)) + 1);
      const int y1 =
          std::min(h, static_cast<int>(std::ceil((r.y + r.height) * f)) + 1);
      boxes[i] = PixelBox{x0, y0, x1 - x0, y1 - y0};
      pixels += static_cast<double>(boxes[i].width) * boxes[i].height;
    }
    double us[4];
    const Stage stages[3] = {Stage::kEntropy, Stage::kYcc, Stage::kRgb};
    for (int s = 0; s < 4; ++s) {
      std::vector<double> runs;
      for (int rep = 0; rep < repeat; ++rep) {
        if (s < 3) {
          const double t0 = ThreadSeconds();
          for (int64_t i = 0; i < n; ++i) {
            int x = 0;
            DecodeStage(probe, files[i], scales[i], boxes[i], stages[s],
                        decoded, &x);
          }
          runs.push_back(ThreadSeconds() - t0);
        } else {
          // The resize alone, of the RGB decode made before its clock.
          double resize = 0;
          for (int64_t i = 0; i < n; ++i) {
            int x = 0;
            const int w = DecodeStage(probe, files[i], scales[i], boxes[i],
                                      Stage::kRgb, decoded, &x);
            const double f =
                static_cast<double>(scales[i].num) / scales[i].denom;
            const CropRegion& r = draws[i].region;
            CropRegion scaled{r.x * f - x, r.y * f - boxes[i].y, r.width * f,
                              r.height * f};
            scaled.width = std::min(scaled.width, w - scaled.x);
            scaled.height = std::min(scaled.height, boxes[i].height - scaled.y);
            const RgbImageView view{decoded.data(), w, boxes[i].height,
                                    int64_t{w} * 3};
            const double r0 = ThreadSeconds();
            if (!ResizeRegion(view, scaled, size, size, draws[i].flip,
                              absl::MakeSpan(out))
                     .ok()) {
              std::fprintf(stderr, "resize failed on %lld\n",
                           static_cast<long long>(i));
              return 1;
            }
            resize += ThreadSeconds() - r0;
          }
          runs.push_back(resize);
        }
      }
      std::sort(runs.begin(), runs.end());
      us[s] = runs[runs.size() / 2] / n * 1e6;
    }
    std::printf(
        "%-8s entropy %6.1f  idct+upsample %6.1f  colour %6.1f  resize+flip "
        "%6.1f  = %6.1f us (%.0f img/s); decoded %.0f px a box\n",
        std::string(rule).c_str(), us[0], us[1] - us[0], us[2] - us[1], us[3],
        us[2] + us[3], 1e6 / (us[2] + us[3]), pixels / n);
  }
  return 0;
}
