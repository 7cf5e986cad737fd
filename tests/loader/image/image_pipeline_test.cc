// The decode option (cpu | gpu | auto) and, on a GPU with nvJPEG, the GPU
// decode path against the CPU one.
#include "loader/image/image_pipeline.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include "loader/loader_builder.h"
#include "tests/loader/image/test_jpegs.h"
#include "tests/support/drain_epoch.h"
#include "tests/support/skip_without_gpu.h"
#if defined(PINWHEEL_HAVE_CUDA)
#include <cuda_runtime_api.h>

#include "tests/support/spin_kernel.h"
#endif

namespace pinwheel {
namespace {

namespace fs = std::filesystem;
using ::pinwheel::testing::SeededJpeg;
using ::pinwheel::testing::WriteFile;
using ::pinwheel::testing_support::DrainedEpoch;
using ::pinwheel::testing_support::DrainEpoch;
using ::pinwheel::testing_support::DrainOptions;
using ::pinwheel::testing_support::HostBatch;
using ::testing::HasSubstr;

class ImagePipelineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::path(::testing::TempDir()) /
            (std::string("image_pipeline_") +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
  }
  void TearDown() override { fs::remove_all(root_); }

  // `count` images in 2 classes, width × height around the given size.
  std::string WriteFolder(int count, int width, int height) {
    for (int i = 0; i < count; ++i) {
      const fs::path cls = root_ / (i % 2 == 0 ? "even" : "odd");
      fs::create_directories(cls);
      char name[32];
      std::snprintf(name, sizeof(name), "%04d.jpg", i);
      WriteFile((cls / name).string(),
                SeededJpeg(width + i % 5, height + i % 3, i));
    }
    return root_.string();
  }

  fs::path root_;
};

absl::StatusOr<Loader> BuildLoader(const ImageFolderPipeline& pipeline,
                                   const Device& device, int batch_size,
                                   std::optional<LoaderCheckpoint> resume = {},
                                   ErrorPolicy on_error = ErrorPolicy::kStop,
                                   int workers = 2,
                                   bool pad_last_batch = false) {
  LoaderBuilder builder(pipeline.dataset);
  builder.batch_size(batch_size)
      .shuffle(17)
      .num_workers(workers)
      .on_error(on_error)
      .pad_last_batch(pad_last_batch)
      .device(device)
      .device_transform(pipeline.transform);
  if (resume.has_value()) builder.resume(*std::move(resume));
  return builder.Build();
}

float Bf16ToFloat(const std::byte* p) {
  uint16_t bits;
  std::memcpy(&bits, p, 2);
  const uint32_t wide = static_cast<uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &wide, 4);
  return f;
}

TEST(ImageDecode, ParsesTheThreeNamesAndNamesABadOne) {
  EXPECT_EQ(*ParseImageDecode("cpu"), ImageDecode::kCpu);
  EXPECT_EQ(*ParseImageDecode("gpu"), ImageDecode::kGpu);
  EXPECT_EQ(*ParseImageDecode("auto"), ImageDecode::kAuto);
  absl::StatusOr<ImageDecode> bad = ParseImageDecode("nvjpeg");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("\"nvjpeg\""));
}

TEST_F(ImagePipelineTest, AutoOnTheHostIsCpuAndSaysWhy) {
  const std::string root = WriteFolder(6, 40, 30);
  absl::StatusOr<ImageFolderPipeline> pipeline =
      OpenImageFolderPipeline(root, {{.size = 16}},
                              {.decode = ImageDecode::kAuto,
                               .device = Device::Host(),
                               .batch_size = 4});
  ASSERT_TRUE(pipeline.ok()) << pipeline.status();
  EXPECT_FALSE(pipeline->gpu_decode);
  EXPECT_THAT(pipeline->decode_report, HasSubstr("cpu (decode = auto: "));
  absl::StatusOr<ImageFolderPipeline> gpu = OpenImageFolderPipeline(
      root, {{.size = 16}},
      {.decode = ImageDecode::kGpu, .device = Device::Host(), .batch_size = 4});
  EXPECT_EQ(gpu.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(gpu.status().message(), HasSubstr("decode = gpu: "));
}

TEST_F(ImagePipelineTest, RefusesNegativeCpuWorkersNamingTheOption) {
  const std::string root = WriteFolder(2, 40, 30);
  absl::StatusOr<ImageFolderPipeline> pipeline =
      OpenImageFolderPipeline(root, {{.size = 16}},
                              {.decode = ImageDecode::kAuto,
                               .device = Device::Host(),
                               .cpu_workers = -1});
  EXPECT_EQ(pipeline.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(pipeline.status().message(),
              HasSubstr("ImagePipelineOptions::cpu_workers = -1"));
}

TEST_F(ImagePipelineTest, TheCpuPathDeliversNormalizedBf16ChwAndLabels) {
  const std::string root = WriteFolder(6, 40, 30);
  absl::StatusOr<ImageFolderPipeline> pipeline = OpenImageFolderPipeline(
      root, {{.size = 16}},
      {.decode = ImageDecode::kCpu, .device = Device::Host(), .batch_size = 4});
  ASSERT_TRUE(pipeline.ok()) << pipeline.status();
  absl::StatusOr<Loader> loader = BuildLoader(*pipeline, Device::Host(), 4);
  ASSERT_TRUE(loader.ok()) << loader.status();
  absl::StatusOr<std::optional<DeviceBatch>> batch = (*loader).Next();
  ASSERT_TRUE(batch.ok() && batch->has_value()) << batch.status();
  ASSERT_TRUE((*batch)->WaitOnHost().ok());
  ASSERT_EQ((*batch)->num_fields(), 2);
  EXPECT_EQ((*batch)->field(0).name, "image");
  EXPECT_EQ((*batch)->field(0).dtype, DType::kBFloat16);
  EXPECT_EQ((*batch)->field(0).shape, (std::vector<int64_t>{4, 3, 16, 16}));
  EXPECT_EQ((*batch)->field(1).name, "label");
}

// The GPU suite: a CUDA device and nvJPEG in this build.
#define SKIP_WITHOUT_GPU_DECODE()                                         \
  do {                                                                    \
    SKIP_WITHOUT_GPU("GPU decode suite");                                 \
    if (!kHaveNvJpeg)                                                     \
      GTEST_SKIP() << "built without nvJPEG (see the configure output): " \
                      "GPU decode suite not run";                         \
  } while (0)

#if defined(PINWHEEL_HAVE_NVJPEG)
constexpr bool kHaveNvJpeg = true;
#else
constexpr bool kHaveNvJpeg = false;
#endif

// The pixel differences of two bf16 image batches, in 0..255 levels.
struct PixelDiff {
  double mean = 0;
  double p99 = 0;
  double max = 0;
};

PixelDiff Compare(const std::vector<std::byte>& a,
                  const std::vector<std::byte>& b) {
  const float std_levels[3] = {0.229f * 255, 0.224f * 255, 0.225f * 255};
  const size_t plane = a.size() / 2;
  std::vector<double> diffs(plane);
  for (size_t k = 0; k < plane; ++k) {
    // Channel of element k: CHW with an unknown H * W; use the first
    // channel's scale (the three differ by 2 %).
    diffs[k] = std::fabs(Bf16ToFloat(&a[2 * k]) - Bf16ToFloat(&b[2 * k])) *
               std_levels[0];
  }
  PixelDiff d;
  for (double x : diffs) d.mean += x;
  d.mean /= static_cast<double>(diffs.size());
  std::sort(diffs.begin(), diffs.end());
  d.p99 = diffs[diffs.size() * 99 / 100];
  d.max = diffs.back();
  return d;
}

TEST_F(ImagePipelineTest, GpuPixelsMatchTheCpuPathOnTheSameCrops_CUDA) {
  SKIP_WITHOUT_GPU_DECODE();
  // Images of 40 x 30 to 44 x 32 and an output of 48: every crop is
  // enlarged, where the CPU resize is plain bilinear like the GPU's (it
  // antialiases only when shrinking). What differs is the JPEG decoders'
  // IDCT and chroma upsampling.
  const std::string root = WriteFolder(64, 40, 30);
  const Device gpu = Device::FirstGpuOrHost();
  ImageFolderPipeline paths[2];
  const ImageDecode decodes[2] = {ImageDecode::kCpu, ImageDecode::kGpu};
  std::vector<DrainedEpoch> epochs;
  for (int k = 0; k < 2; ++k) {
    absl::StatusOr<ImageFolderPipeline> p = OpenImageFolderPipeline(
        root, {{.size = 48}},
        {.decode = decodes[k], .device = gpu, .batch_size = 16});
    ASSERT_TRUE(p.ok()) << p.status();
    std::printf("decode %d: %s\n", k, p->decode_report.c_str());
    absl::StatusOr<Loader> loader = BuildLoader(*p, gpu, 16);
    ASSERT_TRUE(loader.ok()) << loader.status();
    epochs.push_back(DrainEpoch(*loader, {.copy_fields = true}));
    ASSERT_TRUE(epochs.back().status.ok()) << epochs.back().status;
  }
  ASSERT_EQ(epochs[0].batches.size(), 4u);
  ASSERT_EQ(epochs[1].batches.size(), 4u);
  std::vector<std::byte> cpu, gpu_pixels;
  for (int b = 0; b < 4; ++b) {
    ASSERT_EQ(epochs[0].batches[b].indices, epochs[1].batches[b].indices);
    ASSERT_EQ(epochs[0].batches[b].fields[1], epochs[1].batches[b].fields[1])
        << "labels";
    const auto& c = epochs[0].batches[b].fields[0];
    const auto& g = epochs[1].batches[b].fields[0];
    cpu.insert(cpu.end(), c.begin(), c.end());
    gpu_pixels.insert(gpu_pixels.end(), g.begin(), g.end());
  }
  const PixelDiff d = Compare(cpu, gpu_pixels);
  std::printf(
      "gpu vs cpu, 64 images of 48 x 48: mean %.3f, p99 %.3f, max "
      "%.3f levels\n",
      d.mean, d.p99, d.max);
  EXPECT_LE(d.mean, 2.0);
  EXPECT_LE(d.p99, 12.0);
}

TEST_F(ImagePipelineTest, GpuDecodeResumesExactlyAndKeepsMemoryFlat_CUDA) {
  SKIP_WITHOUT_GPU_DECODE();
  const std::string root = WriteFolder(48, 120, 90);
  const Device gpu = Device::FirstGpuOrHost();
  absl::StatusOr<ImageFolderPipeline> p = OpenImageFolderPipeline(
      root, {{.size = 32}},
      {.decode = ImageDecode::kGpu, .device = gpu, .batch_size = 8});
  ASSERT_TRUE(p.ok()) << p.status();
  std::printf("%s\n", p->decode_report.c_str());
  absl::StatusOr<Loader> straight = BuildLoader(*p, gpu, 8);
  ASSERT_TRUE(straight.ok()) << straight.status();
  const DrainedEpoch all = DrainEpoch(*straight, {.copy_fields = true});
  ASSERT_TRUE(all.status.ok()) << all.status;
  ASSERT_EQ(all.batches.size(), 6u);
  {
    absl::StatusOr<Loader> first = BuildLoader(*p, gpu, 8);
    ASSERT_TRUE(first.ok());
    for (int b = 0; b < 2; ++b) {
      absl::StatusOr<std::optional<DeviceBatch>> batch = first->Next();
      ASSERT_TRUE(batch.ok() && batch->has_value());
    }
    absl::StatusOr<LoaderCheckpoint> checkpoint = first->Checkpoint();
    ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
    absl::StatusOr<Loader> resumed = BuildLoader(*p, gpu, 8, *checkpoint);
    ASSERT_TRUE(resumed.ok()) << resumed.status();
    const DrainedEpoch rest = DrainEpoch(*resumed, {.copy_fields = true});
    ASSERT_TRUE(rest.status.ok()) << rest.status;
    ASSERT_EQ(rest.batches.size(), 4u);
    for (size_t b = 0; b < 4; ++b) {
      EXPECT_EQ(rest.batches[b].indices, all.batches[b + 2].indices);
      EXPECT_EQ(rest.batches[b].fields, all.batches[b + 2].fields) << b;
    }
  }
#if defined(PINWHEEL_HAVE_CUDA)
  // Memory: free device bytes after the first epoch and after 40 more.
  size_t free_start = 0, free_end = 0, total = 0;
  ASSERT_EQ(cudaMemGetInfo(&free_start, &total), cudaSuccess);
  int64_t batches = 0;
  for (int epoch = 0; epoch < 40; ++epoch) {
    const DrainedEpoch e = DrainEpoch(*straight, {});
    ASSERT_TRUE(e.status.ok()) << e.status;
    batches += static_cast<int64_t>(e.batches.size());
  }
  ASSERT_EQ(cudaMemGetInfo(&free_end, &total), cudaSuccess);
  std::printf(
      "free device bytes: %zu after epoch 1, %zu after %lld more "
      "batches (diff %lld)\n",
      free_start, free_end, static_cast<long long>(batches),
      static_cast<long long>(free_start) - static_cast<long long>(free_end));
  // Free memory is the device's, not this loader's: another process (or a
  // ctest case beside this one, hence RUN_SERIAL) may free memory meanwhile,
  // never this loader's growth.
  EXPECT_GE(free_end, free_start) << "the decoder's device memory grew";
#endif
}

TEST_F(ImagePipelineTest, ACorruptJpegFailsTheBatchNamingTheSample_CUDA) {
  SKIP_WITHOUT_GPU_DECODE();
  const std::string root = WriteFolder(8, 120, 90);
  // Cut the last 40 % of one file: its header parses on the CPU (its crop
  // is drawn), its scan is truncated, which the GPU decoder finds.
  const fs::path cut = root_ / "odd" / "0003.jpg";
  std::vector<std::byte> bytes = SeededJpeg(120 + 3, 90 + 0, 3);
  bytes.resize(bytes.size() * 6 / 10);
  WriteFile(cut.string(), bytes);
  const Device gpu = Device::FirstGpuOrHost();
  absl::StatusOr<ImageFolderPipeline> p = OpenImageFolderPipeline(
      root, {{.size = 32}},
      {.decode = ImageDecode::kGpu, .device = gpu, .batch_size = 8});
  ASSERT_TRUE(p.ok()) << p.status();
  absl::StatusOr<Loader> loader = BuildLoader(*p, gpu, 8);
  ASSERT_TRUE(loader.ok()) << loader.status();
  const DrainedEpoch e = DrainEpoch(*loader, {});
  std::printf("corrupt: %s\n", e.status.ToString().c_str());
  EXPECT_FALSE(e.status.ok());
  EXPECT_THAT(e.status.message(), HasSubstr("device transform 'jpeg_decode'"));
  // The sample named by its dataset index and its file.
  int64_t index = -1;
  for (int64_t i = 0; i < p->dataset->size(); ++i) {
    if (p->dataset->path(i) == cut.string()) index = i;
  }
  ASSERT_GE(index, 0);
  EXPECT_THAT(e.status.message(),
              HasSubstr(absl::StrCat(" of the batch (dataset index ", index,
                                     ", ", cut.string(), "): ")));
}

// Truncates the scan of `file` (its header intact, so its crop is drawn
// as before): the GPU decoder's framing check finds it.
void TruncateScan(const fs::path& file, int width, int height, int seed) {
  std::vector<std::byte> bytes = SeededJpeg(width, height, seed);
  bytes.resize(bytes.size() * 6 / 10);
  WriteFile(file.string(), bytes);
}

// The batches of `epochs` epochs, fields copied to the host.
std::vector<HostBatch> Drain(Loader& loader, int epochs) {
  std::vector<HostBatch> all;
  for (int e = 0; e < epochs; ++e) {
    DrainedEpoch drained = DrainEpoch(loader, {.copy_fields = true});
    EXPECT_TRUE(drained.status.ok()) << drained.status;
    for (HostBatch& b : drained.batches) all.push_back(std::move(b));
  }
  return all;
}

TEST_F(ImagePipelineTest,
       UnderSkipSampleACorruptJpegIsLeftOutAndTheRestMatchACleanRun_CUDA) {
  SKIP_WITHOUT_GPU_DECODE();
  const std::string root = WriteFolder(24, 120, 90);
  const Device gpu = Device::FirstGpuOrHost();
  auto open = [&] {
    return OpenImageFolderPipeline(
        root, {{.size = 32}},
        {.decode = ImageDecode::kGpu, .device = gpu, .batch_size = 8});
  };
  std::vector<HostBatch> clean;
  {
    absl::StatusOr<ImageFolderPipeline> p = open();
    ASSERT_TRUE(p.ok()) << p.status();
    absl::StatusOr<Loader> loader =
        BuildLoader(*p, gpu, 8, {}, ErrorPolicy::kSkipSample, 0);
    ASSERT_TRUE(loader.ok()) << loader.status();
    clean = Drain(*loader, 2);
    EXPECT_EQ(loader->stats().samples_skipped, 0);
  }
  ASSERT_EQ(clean.size(), 6u);
  // File 0005.jpg (odd class): 120 x 92 pixels, seed 5 (WriteFolder).
  const fs::path cut = root_ / "odd" / "0005.jpg";
  TruncateScan(cut, 120 + 0, 90 + 2, 5);
  absl::StatusOr<ImageFolderPipeline> p = open();
  ASSERT_TRUE(p.ok()) << p.status();
  int64_t bad = -1;
  for (int64_t i = 0; i < p->dataset->size(); ++i) {
    if (p->dataset->path(i) == cut.string()) bad = i;
  }
  ASSERT_GE(bad, 0);
  absl::StatusOr<Loader> loader =
      BuildLoader(*p, gpu, 8, {}, ErrorPolicy::kSkipSample, 0);
  ASSERT_TRUE(loader.ok()) << loader.status();
  const std::vector<HostBatch> skipped = Drain(*loader, 2);
  ASSERT_EQ(skipped.size(), clean.size());
  int shortened = 0;
  for (size_t b = 0; b < clean.size(); ++b) {
    const HostBatch& c = clean[b];
    const HostBatch& s = skipped[b];
    auto at = std::find(c.indices.begin(), c.indices.end(), bad);
    if (at == c.indices.end()) {
      // A batch without the corrupt file: identical to the clean run's,
      // also after the batch that lost a sample (the decoder's state).
      EXPECT_EQ(s.indices, c.indices) << "batch " << b;
      EXPECT_EQ(s.fields, c.fields) << "batch " << b;
      continue;
    }
    ++shortened;
    const auto place = static_cast<size_t>(at - c.indices.begin());
    std::vector<int64_t> expected = c.indices;
    expected.erase(expected.begin() + static_cast<std::ptrdiff_t>(place));
    ASSERT_EQ(s.indices, expected) << "batch " << b;
    ASSERT_EQ(s.size, c.size - 1);
    // Every other sample's image and label, byte for byte the clean run's.
    for (int f = 0; f < 2; ++f) {
      const size_t row = c.fields[f].size() / static_cast<size_t>(c.size);
      ASSERT_EQ(s.fields[f].size(), row * static_cast<size_t>(s.size));
      for (size_t q = 0; q < static_cast<size_t>(s.size); ++q) {
        const size_t from = q < place ? q : q + 1;
        EXPECT_EQ(std::memcmp(s.fields[f].data() + q * row,
                              c.fields[f].data() + from * row, row),
                  0)
            << "field " << f << ", sample " << s.indices[q] << ", batch " << b;
      }
    }
  }
  EXPECT_EQ(shortened, 2);  // once per epoch
  const LoaderStats stats = loader->stats();
  EXPECT_EQ(stats.samples_skipped, 2);
  EXPECT_EQ(stats.transfer.samples_skipped, 2);
  std::printf("skipped: %s\n", stats.transfer.last_skipped.c_str());
  EXPECT_THAT(stats.transfer.last_skipped,
              HasSubstr(absl::StrCat("(dataset index ", bad, ", ", cut.string(),
                                     "): ")));
}

// NvJpegDecoder's Note [parallel checks]: checking a batch on several
// threads changes nothing a user sees, with a corrupt file among the
// samples too.
TEST_F(ImagePipelineTest, ParallelChecksDeliverTheOneThreadBatches_CUDA) {
  SKIP_WITHOUT_GPU_DECODE();
  const std::string root = WriteFolder(24, 120, 90);
  const fs::path cut = root_ / "odd" / "0005.jpg";
  TruncateScan(cut, 120 + 0, 90 + 2, 5);
  const Device gpu = Device::FirstGpuOrHost();
  std::vector<HostBatch> runs[2];
  std::string skipped[2];
  const int checks[2] = {1, 8};
  for (int k = 0; k < 2; ++k) {
    absl::StatusOr<ImageFolderPipeline> p =
        OpenImageFolderPipeline(root, {{.size = 32}},
                                {.decode = ImageDecode::kGpu,
                                 .device = gpu,
                                 .batch_size = 8,
                                 .gpu_check_threads = checks[k]});
    ASSERT_TRUE(p.ok()) << p.status();
    EXPECT_THAT(p->decode_report,
                HasSubstr(absl::StrCat(checks[k], " check thread")));
    absl::StatusOr<Loader> loader =
        BuildLoader(*p, gpu, 8, {}, ErrorPolicy::kSkipSample, 0);
    ASSERT_TRUE(loader.ok()) << loader.status();
    runs[k] = Drain(*loader, 2);
    EXPECT_EQ(loader->stats().samples_skipped, 2);
    skipped[k] = loader->stats().transfer.last_skipped;
  }
  ASSERT_EQ(runs[0].size(), runs[1].size());
  for (size_t b = 0; b < runs[0].size(); ++b) {
    EXPECT_EQ(runs[1][b].indices, runs[0][b].indices) << "batch " << b;
    EXPECT_EQ(runs[1][b].fields, runs[0][b].fields) << "batch " << b;
  }
  // The skipped sample is named alike.
  EXPECT_EQ(skipped[1], skipped[0]);
  EXPECT_THAT(skipped[1], HasSubstr(cut.string()));
}

// JpegDecodeTransform's Note [one scratch for consecutive batches]: with
// every multiprocessor taken by another stream's kernel (as a training
// step's are) after every batch, the crops queued on the GPU wait while
// the next batches are decoded into the same scratch; every batch must
// still be the one a quiet GPU gives, byte for byte.
TEST_F(ImagePipelineTest, BatchesStayTheSameWhileTheSmsAreBusy_CUDA) {
  SKIP_WITHOUT_GPU_DECODE();
#if defined(PINWHEEL_HAVE_CUDA)
  const std::string root = WriteFolder(64, 160, 120);
  const Device gpu = Device::FirstGpuOrHost();
  cudaStream_t busy = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&busy, cudaStreamNonBlocking),
            cudaSuccess);
  std::vector<HostBatch> runs[2];
  for (int k = 0; k < 2; ++k) {
    absl::StatusOr<ImageFolderPipeline> p = OpenImageFolderPipeline(
        root, {{.size = 32}},
        {.decode = ImageDecode::kGpu, .device = gpu, .batch_size = 8});
    ASSERT_TRUE(p.ok()) << p.status();
    absl::StatusOr<Loader> loader = BuildLoader(*p, gpu, 8);
    ASSERT_TRUE(loader.ok()) << loader.status();
    for (int e = 0; e < 2; ++e) {
      DrainOptions options{.copy_fields = true};
      if (k == 1) {
        options.on_batch = [&](const DeviceBatch&) {
          ASSERT_EQ(testing_support::LaunchSpinOnEverySm(busy, 20.0), 0);
        };
      }
      DrainedEpoch drained = DrainEpoch(*loader, options);
      ASSERT_TRUE(drained.status.ok()) << drained.status;
      for (HostBatch& b : drained.batches) runs[k].push_back(std::move(b));
    }
  }
  ASSERT_EQ(cudaStreamSynchronize(busy), cudaSuccess);
  cudaStreamDestroy(busy);
  ASSERT_EQ(runs[0].size(), runs[1].size());
  for (size_t b = 0; b < runs[0].size(); ++b) {
    EXPECT_EQ(runs[1][b].indices, runs[0][b].indices) << "batch " << b;
    EXPECT_TRUE(runs[1][b].fields == runs[0][b].fields)
        << "batch " << b << ": pixels differ while the GPU was busy";
  }
#endif
}

// Note [decode = auto by measurement]: one worker is slower than the GPU,
// a hundred thousand are not. Images of 480 x 360, where one worker decodes
// a few hundred a second and the engines tens of thousands.
TEST_F(ImagePipelineTest, AutoWeighsTheTwoPathsOnTheFirstFile_CUDA) {
  SKIP_WITHOUT_GPU_DECODE();
  const std::string root = WriteFolder(8, 480, 360);
  const Device gpu = Device::FirstGpuOrHost();
  auto open = [&](int cpu_workers) {
    absl::StatusOr<ImageFolderPipeline> p =
        OpenImageFolderPipeline(root, {{.size = 32}},
                                {.decode = ImageDecode::kAuto,
                                 .device = gpu,
                                 .batch_size = 8,
                                 .cpu_workers = cpu_workers});
    if (p.ok()) {
      std::printf("%d workers: %s\n", cpu_workers, p->decode_report.c_str());
    }
    return p;
  };
  absl::StatusOr<ImageFolderPipeline> few = open(1);
  ASSERT_TRUE(few.ok()) << few.status();
  EXPECT_TRUE(few->gpu_decode);
  EXPECT_THAT(few->decode_report,
              HasSubstr("measured on the first file: GPU "));
  EXPECT_THAT(few->decode_report, HasSubstr("CPU 1 workers x "));
  absl::StatusOr<ImageFolderPipeline> many = open(100000);
  ASSERT_TRUE(many.ok()) << many.status();
  EXPECT_FALSE(many->gpu_decode);
  EXPECT_THAT(many->decode_report,
              HasSubstr("cpu (decode = auto: the CPU path measured faster: "));
  absl::StatusOr<Loader> loader = BuildLoader(*many, gpu, 8);
  ASSERT_TRUE(loader.ok()) << loader.status();
  DrainedEpoch epoch = DrainEpoch(*loader, {});
  EXPECT_TRUE(epoch.status.ok()) << epoch.status;
}

TEST_F(ImagePipelineTest, GpuDecodeCopiesOnlyTheLabelsToTheDevice_CUDA) {
  SKIP_WITHOUT_GPU_DECODE();
  const std::string root = WriteFolder(12, 120, 90);
  const Device gpu = Device::FirstGpuOrHost();
  absl::StatusOr<ImageFolderPipeline> p = OpenImageFolderPipeline(
      root, {{.size = 32}},
      {.decode = ImageDecode::kGpu, .device = gpu, .batch_size = 8});
  ASSERT_TRUE(p.ok()) << p.status();
  // Reads on the consumer's thread: nothing copied ahead of the epoch.
  absl::StatusOr<Loader> loader =
      BuildLoader(*p, gpu, 8, {}, ErrorPolicy::kStop, /*workers=*/0);
  ASSERT_TRUE(loader.ok()) << loader.status();
  const DrainedEpoch e = DrainEpoch(*loader, {});
  ASSERT_TRUE(e.status.ok()) << e.status;
  const LoaderStats stats = loader->stats();
  // nvJPEG reads the bytes from the pinned slot: only "label" (i64) is
  // copied, and the device buffers hold no "jpeg" rows (1 MiB a sample).
  EXPECT_EQ(stats.transfer.bytes_copied, 12 * 8);
  EXPECT_EQ(stats.bytes_delivered, 12 * 8);
  EXPECT_LT(stats.device_bytes, size_t{1} << 20);
  std::printf("copied %lld bytes for 12 samples; device buffers %zu bytes\n",
              static_cast<long long>(stats.transfer.bytes_copied),
              stats.device_bytes);
}

TEST_F(ImagePipelineTest, PaddingIsZeroAndNotDecoded_CUDA) {
  SKIP_WITHOUT_GPU_DECODE();
  const std::string root = WriteFolder(12, 120, 90);
  const Device gpu = Device::FirstGpuOrHost();
  absl::StatusOr<ImageFolderPipeline> p = OpenImageFolderPipeline(
      root, {{.size = 32}},
      {.decode = ImageDecode::kGpu, .device = gpu, .batch_size = 8});
  ASSERT_TRUE(p.ok()) << p.status();
  absl::StatusOr<Loader> loader = BuildLoader(
      *p, gpu, 8, {}, ErrorPolicy::kStop, 2, /*pad_last_batch=*/true);
  ASSERT_TRUE(loader.ok()) << loader.status();
  const DrainedEpoch e = DrainEpoch(*loader, {.copy_fields = true});
  ASSERT_TRUE(e.status.ok()) << e.status;
  ASSERT_EQ(e.batches.size(), 2u);
  const HostBatch& last = e.batches[1];
  ASSERT_EQ(last.size, 8);
  const std::vector<std::byte>& image = last.fields[0];
  const size_t row = image.size() / 8;
  for (size_t q = 0; q < 8; ++q) {
    const bool padding = last.indices[q] < 0;
    EXPECT_EQ(padding, q >= 4) << q;
    const bool zero =
        std::all_of(image.begin() + q * row, image.begin() + (q + 1) * row,
                    [](std::byte x) { return x == std::byte{0}; });
    EXPECT_EQ(zero, padding) << "sample " << q;
  }
}

}  // namespace
}  // namespace pinwheel
