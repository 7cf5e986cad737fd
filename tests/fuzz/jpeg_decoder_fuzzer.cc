// libFuzzer target for the JPEG decoder wrapper (ReadJpegInfo, DecodeJpeg,
// DecodeResizedCrop): arbitrary bytes must give a decode or a Status, never
// a crash or a write outside the output buffer (AddressSanitizer: the
// buffer is exactly the size the header asks for).
//
// Input: one control byte, then the file. Its low 3 bits pick a scale
// (1/8 .. 8/8), bit 3 the fused crop path, bits 4-7 the crop's size.
// Decodes are capped at 4096x4096 (JpegLimits), so a hostile header cannot
// make the fuzzer allocate gigabytes.
//
// libjpeg-turbo itself is the system library, not instrumented: what is
// fuzzed is the wrapper's bounds and error handling around it.
//
// After every input, whatever it did, a known good JPEG must still decode
// on the same thread to the same pixels (issue 35: a failed header parse
// left the thread's decoder broken for every later image).
//
// Seeds: PINWHEEL_WRITE_SEEDS=DIR jpeg_decoder_fuzzer writes small JPEGs
// (RGB 4:2:0 and 4:4:4, grayscale, CMYK, progressive) into DIR and exits.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <turbojpeg.h>
#include <vector>

#include "loader/image/image_transforms.h"
#include "loader/image/jpeg.h"
#include "tests/fuzz/seeds.h"

namespace pinwheel {
namespace {

void Check(bool condition, const char* what) {
  if (!condition) {
    std::fprintf(stderr, "jpeg_decoder_fuzzer: invariant broken: %s\n", what);
    std::abort();
  }
}

absl::StatusOr<std::vector<fuzz::Seed>> MakeSeeds() {
  struct Seed {
    const char* name;
    int pixel_format;
    int subsampling;
    int flags;
  };
  const Seed seeds[] = {
      {"rgb420", TJPF_RGB, TJSAMP_420, 0},
      {"rgb444", TJPF_RGB, TJSAMP_444, 0},
      {"gray", TJPF_GRAY, TJSAMP_GRAY, 0},
      {"cmyk", TJPF_CMYK, TJSAMP_444, 0},
      {"progressive", TJPF_RGB, TJSAMP_420, TJFLAG_PROGRESSIVE},
  };
  tjhandle handle = tjInitCompress();
  if (handle == nullptr) {
    return absl::InternalError(std::string("tjInitCompress: ") +
                               tjGetErrorStr2(nullptr));
  }
  std::vector<fuzz::Seed> files;
  for (const Seed& seed : seeds) {
    const int w = 24;
    const int h = 17;
    std::vector<unsigned char> pixels(w * h * tjPixelSize[seed.pixel_format]);
    for (size_t i = 0; i < pixels.size(); ++i) {
      pixels[i] = static_cast<unsigned char>(i * 7);
    }
    unsigned char* jpeg = nullptr;
    unsigned long size = 0;
    if (tjCompress2(handle, pixels.data(), w,
                    w * tjPixelSize[seed.pixel_format], h, seed.pixel_format,
                    &jpeg, &size, seed.subsampling, 75, seed.flags) != 0) {
      const std::string error = tjGetErrorStr2(handle);
      tjDestroy(handle);
      return absl::InternalError(std::string(seed.name) + ": " + error);
    }
    const char control = 0x1a;  // scale 3/8, fused path
    files.push_back(
        {seed.name, std::string(1, control) +
                        std::string(reinterpret_cast<char*>(jpeg), size)});
    tjFree(jpeg);
  }
  tjDestroy(handle);
  return files;
}

// A good 32x24 JPEG and its pixels, decoded once on a fresh decoder.
struct GoodJpeg {
  std::vector<std::byte> jpeg;
  std::vector<uint8_t> pixels;
};

const GoodJpeg& Good() {
  static const GoodJpeg* good = [] {
    auto* g = new GoodJpeg;
    const int w = 32;
    const int h = 24;
    std::vector<unsigned char> rgb(w * h * 3);
    for (size_t i = 0; i < rgb.size(); ++i) {
      rgb[i] = static_cast<unsigned char>(i * 5);
    }
    tjhandle handle = tjInitCompress();
    Check(handle != nullptr, "tjInitCompress");
    unsigned char* jpeg = nullptr;
    unsigned long size = 0;
    Check(tjCompress2(handle, rgb.data(), w, w * 3, h, TJPF_RGB, &jpeg, &size,
                      TJSAMP_420, 80, 0) == 0,
          "tjCompress2");
    g->jpeg.assign(reinterpret_cast<std::byte*>(jpeg),
                   reinterpret_cast<std::byte*>(jpeg) + size);
    tjFree(jpeg);
    tjDestroy(handle);
    g->pixels.resize(w * h * 3);
    Check(DecodeJpeg(g->jpeg, "good.jpg", {}, absl::MakeSpan(g->pixels)).ok(),
          "the good JPEG decodes");
    return g;
  }();
  return *good;
}

// The good JPEG decodes on this thread, whole and in a region, to its
// pixels.
void CheckTheGoodJpegStillDecodes() {
  const GoodJpeg& good = Good();
  std::vector<uint8_t> out(JpegRegionBytes(PixelBox{0, 0, 32, 24}));
  Check(ReadJpegInfo(good.jpeg, "good.jpg").ok(),
        "a good header reads after any input");
  Check(DecodeJpeg(good.jpeg, "good.jpg", {}, absl::MakeSpan(out)).ok(),
        "a good JPEG decodes after any input");
  Check(std::equal(good.pixels.begin(), good.pixels.end(), out.begin()),
        "a good JPEG decodes to its pixels after any input");
  absl::StatusOr<PixelBox> box = DecodeJpegRegion(
      good.jpeg, "good.jpg", {}, PixelBox{0, 0, 32, 24}, absl::MakeSpan(out));
  Check(box.ok() && box->width == 32, "a good region decodes after any input");
  Check(std::equal(good.pixels.begin(), good.pixels.end(), out.begin()),
        "a good region decodes to its pixels after any input");
}

}  // namespace
}  // namespace pinwheel

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  pinwheel::fuzz::WriteSeedsIfAsked("jpeg_decoder_fuzzer", pinwheel::MakeSeeds);
  return 0;
}

namespace {

int DecodeOne(const uint8_t* data, size_t size) {
  using namespace pinwheel;
  if (size == 0) return 0;
  const uint8_t control = data[0];
  const absl::Span<const std::byte> jpeg(
      reinterpret_cast<const std::byte*>(data + 1), size - 1);
  const JpegLimits limits{.max_dimension = 4096,
                          .max_decoded_bytes = int64_t{48} << 20};
  absl::StatusOr<JpegInfo> info = ReadJpegInfo(jpeg, "fuzz.jpg", limits);
  if (!info.ok()) {
    Check(!info.status().message().empty(), "an error has a message");
    return 0;
  }
  Check(info->width >= 1 && info->height >= 1 && info->width <= 4096 &&
            info->height <= 4096,
        "a parsed header is within the limits");
  if ((control & 0x08) == 0) {
    const JpegScale scale{(control & 7) + 1, 8};
    std::vector<uint8_t> out(
        static_cast<size_t>(DecodedJpegBytes(*info, scale)));
    absl::Status s =
        DecodeJpeg(jpeg, "fuzz.jpg", scale, absl::MakeSpan(out), limits);
    Check(s.ok() || !s.message().empty(), "an error has a message");
  } else {
    const int side = 1 + (control >> 4) * 4;
    const CropRegion region{.x = info->width / 4.0,
                            .y = info->height / 4.0,
                            .width = info->width / 2.0,
                            .height = info->height / 2.0};
    std::vector<uint8_t> out(static_cast<size_t>(side) * side * 3);
    absl::Status s =
        DecodeResizedCrop(jpeg, "fuzz.jpg", region, side, side,
                          (control & 1) != 0, absl::MakeSpan(out), limits);
    Check(s.ok() || !s.message().empty(), "an error has a message");
  }
  return 0;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const int result = DecodeOne(data, size);
  pinwheel::CheckTheGoodJpegStillDecodes();
  return result;
}
