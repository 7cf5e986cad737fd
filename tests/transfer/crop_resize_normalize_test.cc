// The GPU crop/flip/resize/normalise (transfer/jpeg/crop_resize_normalize.h)
// against a host reference of the same arithmetic. Every case skips, saying
// so, without CUDA or a GPU.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <memory>
#include <random>
#include <vector>

#include "tests/support/skip_without_gpu.h"

#ifdef PINWHEEL_HAVE_CUDA
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include "transfer/jpeg/crop_resize_normalize.h"
#endif

namespace pinwheel::internal {
namespace {

using ::testing::HasSubstr;

#ifdef PINWHEEL_HAVE_CUDA

// A host image, its device copy, and the reference resize.
struct TestImage {
  TestImage(int w, int h, uint32_t seed) : width(w), height(h) {
    std::mt19937 rng(seed);
    host.resize(static_cast<size_t>(w) * h * 3);
    for (auto& v : host) v = static_cast<uint8_t>(rng() & 0xFF);
    pitch = 3 * w + 13;  // not tight, on purpose
    EXPECT_EQ(cudaMalloc(&device, pitch * h), cudaSuccess);
    EXPECT_EQ(cudaMemcpy2D(device, pitch, host.data(), 3 * w, 3 * w, h,
                           cudaMemcpyHostToDevice),
              cudaSuccess);
  }
  ~TestImage() { cudaFree(device); }
  DeviceRgbImage view() const {
    return {static_cast<const uint8_t*>(device), pitch, width, height};
  }
  int width;
  int height;
  size_t pitch;
  std::vector<uint8_t> host;
  void* device = nullptr;
};

// The kernel's arithmetic on the host (float, same order of operations).
std::vector<float> Reference(const TestImage& image, const ImageCrop& crop,
                             int out_h, int out_w,
                             const CropResizeNormalizeOptions& options) {
  std::vector<float> out(3 * static_cast<size_t>(out_h) * out_w);
  for (int oy = 0; oy < out_h; ++oy) {
    for (int ox = 0; ox < out_w; ++ox) {
      const int cx = crop.flip ? out_w - 1 - ox : ox;
      const float fx =
          (cx + 0.5f) * (static_cast<float>(crop.width) / out_w) - 0.5f;
      const float fy =
          (oy + 0.5f) * (static_cast<float>(crop.height) / out_h) - 0.5f;
      const float x =
          std::min(std::max(fx, 0.f), static_cast<float>(crop.width - 1));
      const float y =
          std::min(std::max(fy, 0.f), static_cast<float>(crop.height - 1));
      const int x0 = static_cast<int>(x);
      const int y0 = static_cast<int>(y);
      const int x1 = std::min(x0 + 1, crop.width - 1);
      const int y1 = std::min(y0 + 1, crop.height - 1);
      const float wx = x - x0;
      const float wy = y - y0;
      auto at = [&](int xx, int yy, int c) {
        return static_cast<float>(
            image.host[((crop.y + yy) * image.width + crop.x + xx) * 3 + c]);
      };
      for (int c = 0; c < 3; ++c) {
        const float top = at(x0, y0, c) + (at(x1, y0, c) - at(x0, y0, c)) * wx;
        const float bottom =
            at(x0, y1, c) + (at(x1, y1, c) - at(x0, y1, c)) * wx;
        const float v = top + (bottom - top) * wy;
        out[(static_cast<size_t>(c) * out_h + oy) * out_w + ox] =
            (v / 255.f - options.mean[c]) / options.std[c];
      }
    }
  }
  return out;
}

std::vector<float> ReadBf16(const void* device, size_t count) {
  std::vector<__nv_bfloat16> raw(count);
  EXPECT_EQ(cudaMemcpy(raw.data(), device, count * sizeof(__nv_bfloat16),
                       cudaMemcpyDeviceToHost),
            cudaSuccess);
  std::vector<float> out(count);
  for (size_t i = 0; i < count; ++i) out[i] = __bfloat162float(raw[i]);
  return out;
}

// bf16 keeps 8 significant bits: rounding is within 2^-8 of the value;
// the float arithmetic of host and device may differ in the last bits.
double WorstError(const std::vector<float>& got,
                  const std::vector<float>& want) {
  double worst = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double allowed = std::max(std::fabs(want[i]) / 256.0, 1e-3);
    worst = std::max(worst, std::fabs(got[i] - want[i]) / allowed);
  }
  return worst;  // <= 1 passes
}

struct Stream {
  Stream() { cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking); }
  ~Stream() { cudaStreamDestroy(stream); }
  cudaStream_t stream = nullptr;
};

TEST(CropResizeNormalize, MatchesTheHostReferenceForRandomCropsAndFlips_CUDA) {
  SKIP_WITHOUT_GPU("GPU crop suite");
  CropResizeNormalizeOptions options;
  options.max_batch_size = 8;
  options.out_height = 48;
  options.out_width = 64;
  Stream s;
  auto transform = CropResizeNormalize::Create(0, s.stream, options);
  ASSERT_TRUE(transform.ok()) << transform.status();
  std::vector<std::unique_ptr<TestImage>> images;
  std::vector<DeviceRgbImage> views;
  std::vector<ImageCrop> crops;
  std::mt19937 rng(7);
  for (int i = 0; i < 8; ++i) {
    images.push_back(std::make_unique<TestImage>(90 + 17 * i, 70 + 9 * i, i));
    const TestImage& image = *images.back();
    ImageCrop crop;
    // Shrinking, enlarging and 1:1 crops, flipped or not.
    crop.width = 1 + static_cast<int>(rng() % image.width);
    crop.height = 1 + static_cast<int>(rng() % image.height);
    crop.x = static_cast<int>(rng() % (image.width - crop.width + 1));
    crop.y = static_cast<int>(rng() % (image.height - crop.height + 1));
    crop.flip = i % 2 == 1;
    views.push_back(image.view());
    crops.push_back(crop);
  }
  const size_t per_sample = 3 * 48 * 64;
  void* out = nullptr;
  ASSERT_EQ(cudaMalloc(&out, 8 * per_sample * 2), cudaSuccess);
  ASSERT_TRUE((*transform)->Run(views, crops, out).ok());
  ASSERT_EQ(cudaStreamSynchronize(s.stream), cudaSuccess);
  const std::vector<float> got = ReadBf16(out, 8 * per_sample);
  for (int i = 0; i < 8; ++i) {
    const std::vector<float> want =
        Reference(*images[i], crops[i], 48, 64, options);
    const std::vector<float> mine(got.begin() + i * per_sample,
                                  got.begin() + (i + 1) * per_sample);
    EXPECT_LE(WorstError(mine, want), 1.0)
        << "sample " << i << " crop " << crops[i].width << "x"
        << crops[i].height << " flip " << crops[i].flip;
  }
  cudaFree(out);
}

TEST(CropResizeNormalize, AOneToOneCropIsThePixelsAndAFlipMirrorsThem_CUDA) {
  SKIP_WITHOUT_GPU("GPU crop suite");
  CropResizeNormalizeOptions options;
  options.max_batch_size = 2;
  options.out_height = 20;
  options.out_width = 30;
  options.mean = {0, 0, 0};
  options.std = {1, 1, 1};  // out = pixel / 255
  Stream s;
  auto transform = CropResizeNormalize::Create(0, s.stream, options);
  ASSERT_TRUE(transform.ok()) << transform.status();
  TestImage image(50, 40, 3);
  const ImageCrop plain{.x = 11, .y = 7, .width = 30, .height = 20};
  ImageCrop flipped = plain;
  flipped.flip = true;
  const DeviceRgbImage views[] = {image.view(), image.view()};
  const ImageCrop crops[] = {plain, flipped};
  void* out = nullptr;
  ASSERT_EQ(cudaMalloc(&out, 2 * 3 * 20 * 30 * 2), cudaSuccess);
  ASSERT_TRUE((*transform)->Run(views, crops, out).ok());
  ASSERT_EQ(cudaStreamSynchronize(s.stream), cudaSuccess);
  const std::vector<float> got = ReadBf16(out, 2 * 3 * 20 * 30);
  for (int c = 0; c < 3; ++c) {
    for (int y = 0; y < 20; ++y) {
      for (int x = 0; x < 30; ++x) {
        const float pixel =
            image.host[((plain.y + y) * 50 + plain.x + x) * 3 + c] / 255.f;
        const float a = got[(c * 20 + y) * 30 + x];
        const float b = got[3 * 20 * 30 + (c * 20 + y) * 30 + (29 - x)];
        ASSERT_NEAR(a, pixel, pixel / 256 + 1e-6) << c << " " << y << " " << x;
        ASSERT_EQ(a, b) << "flip is not the mirror at " << c << " " << y << " "
                        << x;
      }
    }
  }
  cudaFree(out);
}

TEST(CropResizeNormalize, ANullImageBecomesZerosAndABadCropIsRefused_CUDA) {
  SKIP_WITHOUT_GPU("GPU crop suite");
  CropResizeNormalizeOptions options;
  options.max_batch_size = 2;
  options.out_height = 8;
  options.out_width = 8;
  Stream s;
  auto transform = CropResizeNormalize::Create(0, s.stream, options);
  ASSERT_TRUE(transform.ok()) << transform.status();
  TestImage image(16, 16, 1);
  void* out = nullptr;
  ASSERT_EQ(cudaMalloc(&out, 2 * 3 * 64 * 2), cudaSuccess);
  ASSERT_EQ(cudaMemset(out, 0x7F, 2 * 3 * 64 * 2), cudaSuccess);
  const DeviceRgbImage ok_views[] = {image.view(), DeviceRgbImage{}};
  const ImageCrop ok_crops[] = {{.x = 0, .y = 0, .width = 16, .height = 16},
                                {}};
  ASSERT_TRUE((*transform)->Run(ok_views, ok_crops, out).ok());
  ASSERT_EQ(cudaStreamSynchronize(s.stream), cudaSuccess);
  const std::vector<float> got = ReadBf16(out, 2 * 3 * 64);
  for (size_t i = 3 * 64; i < got.size(); ++i) ASSERT_EQ(got[i], 0.f) << i;

  const ImageCrop outside[] = {{.x = 10, .y = 0, .width = 8, .height = 8}, {}};
  absl::Status status = (*transform)->Run(ok_views, outside, out);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(),
              HasSubstr("sample 0: crop of 8 x 8 at (10, 0) is not inside its "
                        "16 x 16 image"));
  const DeviceRgbImage three[] = {image.view(), image.view(), image.view()};
  const ImageCrop three_crops[3] = {};
  EXPECT_THAT((*transform)->Run(three, three_crops, out).message(),
              HasSubstr("more than max_batch_size 2"));
  CropResizeNormalizeOptions bad = options;
  bad.std = {1, 0, 1};
  EXPECT_THAT(CropResizeNormalize::Create(0, s.stream, bad).status().message(),
              HasSubstr("std[1] is 0"));
  cudaFree(out);
}

#else

TEST(CropResizeNormalize, MatchesTheHostReferenceForRandomCropsAndFlips_CUDA) {
  SKIP_WITHOUT_GPU("GPU crop suite");
}

#endif

}  // namespace
}  // namespace pinwheel::internal
