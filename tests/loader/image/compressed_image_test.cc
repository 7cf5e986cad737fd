// ImageDelivery::kJpeg: the image datasets deliver each sample's JPEG bytes,
// its crop and flip and its label; the crop is the one the pixel path uses.
#include "loader/image/compressed_image.h"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include "loader/image/image_folder_dataset.h"
#include "loader/image/image_transforms.h"
#include "loader/image/tar_shards.h"
#include "loader/loader_builder.h"
#include "tests/loader/image/test_jpegs.h"
#include "tests/loader/image/test_tars.h"
#include "tests/support/case_dir.h"
#include "tests/support/drain_epoch.h"

namespace pinwheel {
namespace {

namespace fs = std::filesystem;
using ::pinwheel::testing::SeededJpeg;
using ::pinwheel::testing::TarBuilder;
using ::pinwheel::testing::WriteFile;
using ::pinwheel::testing_support::CaseDir;
using ::pinwheel::testing_support::DrainedEpoch;
using ::pinwheel::testing_support::DrainEpoch;
using ::pinwheel::testing_support::HostBatch;
using ::testing::HasSubstr;

constexpr int kSize = 16;
constexpr int64_t kMaxJpeg = 8192;

// Batch field indices (BatchLayout: the sample's fields, then jpeg_length).
constexpr int kJpeg = 0, kCrop = 1, kFlip = 2, kSourceSize = 3, kLabel = 4,
              kSourceName = 5, kJpegLength = 6;

class CompressedImageTest : public ::testing::Test {
 protected:
  // dir/<cls>/<i>.jpg for 2 classes of 5 images of various sizes.
  std::string WriteFolder() {
    const fs::path root = dir_ / "folder";
    for (int i = 0; i < 10; ++i) {
      const fs::path cls = root / (i < 5 ? "a" : "b");
      fs::create_directories(cls);
      WriteFile((cls / (std::to_string(i) + ".jpg")).string(),
                SeededJpeg(40 + 3 * i, 30 + 2 * i, i));
    }
    return root.string();
  }

  const CaseDir case_dir_{"compressed_image_"};
  const fs::path& dir_ = case_dir_.path();
};

// One sample of a compressed batch, read back on the host.
struct CompressedSample {
  std::vector<std::byte> jpeg;
  float crop[4];
  bool flip;
  int32_t source_size[2];
  int64_t label;
  std::string source_name;  // up to its first zero byte
};

CompressedSample SampleOf(const HostBatch& batch, int64_t p) {
  CompressedSample s;
  int64_t length = 0;
  std::memcpy(&length, batch.fields[kJpegLength].data() + p * 8, 8);
  const std::byte* row = batch.fields[kJpeg].data() + p * kMaxJpeg;
  s.jpeg.assign(row, row + length);
  // Padding past the length is zero.
  for (int64_t b = length; b < kMaxJpeg; ++b) {
    EXPECT_EQ(row[b], std::byte{0}) << "byte " << b << " of sample " << p;
    if (row[b] != std::byte{0}) break;
  }
  std::memcpy(s.crop, batch.fields[kCrop].data() + p * 16, 16);
  s.flip = batch.fields[kFlip][p] != std::byte{0};
  std::memcpy(s.source_size, batch.fields[kSourceSize].data() + p * 8, 8);
  std::memcpy(&s.label, batch.fields[kLabel].data() + p * 8, 8);
  const char* name =
      reinterpret_cast<const char*>(batch.fields[kSourceName].data()) +
      p * kCompressedSourceNameBytes;
  s.source_name.assign(name, strnlen(name, kCompressedSourceNameBytes));
  return s;
}

absl::StatusOr<Loader> HostLoader(std::shared_ptr<Dataset> ds, int workers,
                                  std::optional<LoaderCheckpoint> resume = {}) {
  LoaderBuilder builder(std::move(ds));
  builder.batch_size(4).shuffle(9).num_workers(workers).device(Device::Host());
  if (resume.has_value()) builder.resume(*std::move(resume));
  return builder.Build();
}

TEST_F(CompressedImageTest, LayoutIsJpegCropFlipSourceSizeLabel) {
  absl::StatusOr<SampleLayout> layout = CompressedImageLayout(kMaxJpeg);
  ASSERT_TRUE(layout.ok()) << layout.status();
  EXPECT_EQ(layout->ToString(),
            "jpeg u8[8192] (variable length), crop f32[4], flip u8[], "
            "source_size i32[2], "
            "label i64[], source_name u8[128]");
  EXPECT_TRUE(layout->fields()[kJpeg].variable_length);
  EXPECT_FALSE(CompressedImageLayout(0).ok());
}

TEST_F(CompressedImageTest, FolderSamplesCarryTheFileAndThePixelPathsCrop) {
  const std::string root = WriteFolder();
  ImageFolderOptions jpeg_options;
  jpeg_options.size = kSize;
  jpeg_options.delivery = ImageDelivery::kJpeg;
  jpeg_options.max_jpeg_bytes = kMaxJpeg;
  absl::StatusOr<std::shared_ptr<ImageFolderDataset>> compressed =
      ImageFolderDataset::Open(root, jpeg_options);
  ASSERT_TRUE(compressed.ok()) << compressed.status();
  ImageFolderOptions pixel_options;
  pixel_options.size = kSize;
  absl::StatusOr<std::shared_ptr<ImageFolderDataset>> pixels =
      ImageFolderDataset::Open(root, pixel_options);
  ASSERT_TRUE(pixels.ok()) << pixels.status();

  absl::StatusOr<Loader> jpeg_loader = HostLoader(*compressed, 3);
  ASSERT_TRUE(jpeg_loader.ok()) << jpeg_loader.status();
  absl::StatusOr<Loader> pixel_loader = HostLoader(*pixels, 1);
  ASSERT_TRUE(pixel_loader.ok()) << pixel_loader.status();
  int flips = 0;
  for (int epoch = 0; epoch < 2; ++epoch) {
    const DrainedEpoch a = DrainEpoch(*jpeg_loader, {.copy_fields = true});
    const DrainedEpoch b = DrainEpoch(*pixel_loader, {.copy_fields = true});
    ASSERT_TRUE(a.status.ok()) << a.status;
    ASSERT_TRUE(b.status.ok()) << b.status;
    ASSERT_EQ(a.batches.size(), b.batches.size());
    for (size_t k = 0; k < a.batches.size(); ++k) {
      ASSERT_EQ(a.batches[k].indices, b.batches[k].indices);
      for (int64_t p = 0; p < a.batches[k].size; ++p) {
        const int64_t index = a.batches[k].indices[p];
        const CompressedSample s = SampleOf(a.batches[k], p);
        const std::vector<std::byte> file =
            SeededJpeg(40 + 3 * index, 30 + 2 * index, index);
        EXPECT_EQ(s.jpeg, file) << "sample " << index;
        EXPECT_EQ(s.source_size[0], 40 + 3 * index);
        EXPECT_EQ(s.source_size[1], 30 + 2 * index);
        EXPECT_EQ(s.label, index < 5 ? 0 : 1);
        EXPECT_EQ(s.source_name, (fs::path(root) / (index < 5 ? "a" : "b") /
                                  (std::to_string(index) + ".jpg"))
                                     .string());
        flips += s.flip;
        // Decoding the file with the delivered crop gives the pixel path's
        // image exactly: the same crop and flip.
        std::vector<uint8_t> decoded(kSize * kSize * 3);
        ASSERT_TRUE(DecodeResizedCrop(file, "x",
                                      {.x = s.crop[0],
                                       .y = s.crop[1],
                                       .width = s.crop[2],
                                       .height = s.crop[3]},
                                      kSize, kSize, s.flip,
                                      absl::MakeSpan(decoded))
                        .ok());
        EXPECT_EQ(
            std::memcmp(decoded.data(),
                        b.batches[k].fields[0].data() + p * decoded.size(),
                        decoded.size()),
            0)
            << "sample " << index << " epoch " << epoch;
      }
    }
  }
  EXPECT_GT(flips, 0);
  EXPECT_LT(flips, 20);
}

TEST_F(CompressedImageTest, ALongFileNameKeepsItsEndInSourceName) {
  const fs::path root = dir_ / "long";
  const fs::path cls = root / std::string(150, 'c');
  fs::create_directories(cls);
  const fs::path file = cls / "image.jpg";
  WriteFile(file.string(), SeededJpeg(40, 30, 0));
  ImageFolderOptions options;
  options.size = kSize;
  options.delivery = ImageDelivery::kJpeg;
  options.max_jpeg_bytes = kMaxJpeg;
  absl::StatusOr<std::shared_ptr<ImageFolderDataset>> ds =
      ImageFolderDataset::Open(root.string(), options);
  ASSERT_TRUE(ds.ok()) << ds.status();
  absl::StatusOr<Loader> loader =
      LoaderBuilder(*ds).batch_size(1).device(Device::Host()).Build();
  ASSERT_TRUE(loader.ok()) << loader.status();
  const DrainedEpoch drained = DrainEpoch(*loader, {.copy_fields = true});
  ASSERT_TRUE(drained.status.ok()) << drained.status;
  ASSERT_EQ(drained.batches.size(), 1u);
  const std::string path = file.string();
  ASSERT_GT(path.size(), static_cast<size_t>(kCompressedSourceNameBytes));
  const std::string name(reinterpret_cast<const char*>(
                             drained.batches[0].fields[kSourceName].data()),
                         kCompressedSourceNameBytes);
  EXPECT_EQ(name, "..." + path.substr(path.size() - 125));
}

TEST_F(CompressedImageTest, AFileOverMaxJpegBytesIsAnErrorNamingIt) {
  const std::string root = WriteFolder();
  ImageFolderOptions options;
  options.size = kSize;
  options.delivery = ImageDelivery::kJpeg;
  options.max_jpeg_bytes = 64;
  absl::StatusOr<std::shared_ptr<ImageFolderDataset>> ds =
      ImageFolderDataset::Open(root, options);
  ASSERT_TRUE(ds.ok()) << ds.status();
  absl::StatusOr<Loader> loader = HostLoader(*ds, 2);
  ASSERT_TRUE(loader.ok()) << loader.status();
  const DrainedEpoch drained = DrainEpoch(*loader, {});
  EXPECT_EQ(drained.status.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(drained.status.message(), HasSubstr(".jpg has "));
  EXPECT_THAT(drained.status.message(), HasSubstr("max_jpeg_bytes = 64"));
  options.max_jpeg_bytes = 0;
  EXPECT_FALSE(ImageFolderDataset::Open(root, options).ok());
}

TEST_F(CompressedImageTest, AHeaderThatDoesNotParseIsAnErrorNamingTheFile) {
  const std::string root = WriteFolder();
  // The first 100 bytes of a JPEG: no frame header, so no crop can be
  // drawn; the worker's Read fails (the GPU never sees it).
  std::vector<std::byte> head = SeededJpeg(43, 36, 3);
  head.resize(100);
  const std::string cut = (fs::path(root) / "a" / "3.jpg").string();
  WriteFile(cut, head);
  ImageFolderOptions options;
  options.size = kSize;
  options.delivery = ImageDelivery::kJpeg;
  options.max_jpeg_bytes = kMaxJpeg;
  absl::StatusOr<std::shared_ptr<ImageFolderDataset>> ds =
      ImageFolderDataset::Open(root, options);
  ASSERT_TRUE(ds.ok()) << ds.status();
  absl::StatusOr<Loader> loader = HostLoader(*ds, 2);
  ASSERT_TRUE(loader.ok()) << loader.status();
  const DrainedEpoch drained = DrainEpoch(*loader, {});
  EXPECT_FALSE(drained.status.ok());
  EXPECT_THAT(drained.status.message(), HasSubstr(cut));
  EXPECT_THAT(drained.status.message(), HasSubstr("index 3"));
}

TEST_F(CompressedImageTest, AResumedFolderEpochHasTheSameCrops) {
  const std::string root = WriteFolder();
  ImageFolderOptions options;
  options.size = kSize;
  options.delivery = ImageDelivery::kJpeg;
  options.max_jpeg_bytes = kMaxJpeg;
  absl::StatusOr<std::shared_ptr<ImageFolderDataset>> ds =
      ImageFolderDataset::Open(root, options);
  ASSERT_TRUE(ds.ok()) << ds.status();
  absl::StatusOr<Loader> straight = HostLoader(*ds, 2);
  ASSERT_TRUE(straight.ok());
  const DrainedEpoch all = DrainEpoch(*straight, {.copy_fields = true});
  ASSERT_TRUE(all.status.ok()) << all.status;
  absl::StatusOr<Loader> first = HostLoader(*ds, 2);
  ASSERT_TRUE(first.ok());
  absl::StatusOr<std::optional<DeviceBatch>> batch = first->Next();
  ASSERT_TRUE(batch.ok() && batch->has_value());
  absl::StatusOr<LoaderCheckpoint> checkpoint = first->Checkpoint();
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  absl::StatusOr<Loader> resumed = HostLoader(*ds, 3, *checkpoint);
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  const DrainedEpoch rest = DrainEpoch(*resumed, {.copy_fields = true});
  ASSERT_TRUE(rest.status.ok()) << rest.status;
  ASSERT_EQ(rest.batches.size() + 1, all.batches.size());
  for (size_t k = 0; k < rest.batches.size(); ++k) {
    EXPECT_EQ(rest.batches[k].fields, all.batches[k + 1].fields) << k;
  }
}

TEST_F(CompressedImageTest, TarSamplesCarryTheMemberAndThePixelPathsCrop) {
  TarBuilder tar;
  for (int s = 0; s < 6; ++s) {
    tar.Add(absl::StrCat("s", s, ".jpg"), SeededJpeg(40 + s, 30 + s, s));
    tar.Add(absl::StrCat("s", s, ".cls"), std::to_string(s));
  }
  const std::string path = (dir_ / "shard.tar").string();
  WriteFile(path, tar.Finish());
  TarShardOptions jpeg_options{.transform = {.size = kSize}, .seed = 4};
  jpeg_options.transform.delivery = ImageDelivery::kJpeg;
  jpeg_options.transform.max_jpeg_bytes = kMaxJpeg;
  absl::StatusOr<std::shared_ptr<TarShardDataset>> compressed =
      TarShardDataset::Open({path}, jpeg_options);
  ASSERT_TRUE(compressed.ok()) << compressed.status();
  absl::StatusOr<std::shared_ptr<TarShardDataset>> pixels =
      TarShardDataset::Open({path}, {.transform = {.size = kSize}, .seed = 4});
  ASSERT_TRUE(pixels.ok()) << pixels.status();
  absl::StatusOr<Loader> jpeg_loader =
      LoaderBuilder(*compressed).batch_size(3).device(Device::Host()).Build();
  ASSERT_TRUE(jpeg_loader.ok()) << jpeg_loader.status();
  absl::StatusOr<Loader> pixel_loader =
      LoaderBuilder(*pixels).batch_size(3).device(Device::Host()).Build();
  ASSERT_TRUE(pixel_loader.ok()) << pixel_loader.status();
  const DrainedEpoch a = DrainEpoch(*jpeg_loader, {.copy_fields = true});
  const DrainedEpoch b = DrainEpoch(*pixel_loader, {.copy_fields = true});
  ASSERT_TRUE(a.status.ok()) << a.status;
  ASSERT_TRUE(b.status.ok()) << b.status;
  ASSERT_EQ(a.batches.size(), 2u);
  ASSERT_EQ(b.batches.size(), 2u);
  for (size_t k = 0; k < 2; ++k) {
    for (int64_t p = 0; p < 3; ++p) {
      const CompressedSample s = SampleOf(a.batches[k], p);
      int64_t label = 0;
      std::memcpy(&label, b.batches[k].fields[1].data() + p * 8, 8);
      ASSERT_EQ(s.label, label);
      const std::vector<std::byte> file =
          SeededJpeg(40 + label, 30 + label, label);
      EXPECT_EQ(s.jpeg, file);
      EXPECT_THAT(s.source_name,
                  HasSubstr("shard.tar:s" + std::to_string(label) + ".jpg"));
      std::vector<uint8_t> decoded(kSize * kSize * 3);
      ASSERT_TRUE(DecodeResizedCrop(file, "x",
                                    {.x = s.crop[0],
                                     .y = s.crop[1],
                                     .width = s.crop[2],
                                     .height = s.crop[3]},
                                    kSize, kSize, s.flip,
                                    absl::MakeSpan(decoded))
                      .ok());
      EXPECT_EQ(std::memcmp(decoded.data(),
                            b.batches[k].fields[0].data() + p * decoded.size(),
                            decoded.size()),
                0)
          << "sample " << label;
    }
  }
}

}  // namespace
}  // namespace pinwheel
