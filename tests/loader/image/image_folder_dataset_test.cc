#include "loader/image/image_folder_dataset.h"

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include "loader/image/image_transforms.h"
#include "loader/loader_builder.h"
#include "tests/loader/image/test_jpegs.h"
#include "tests/support/drain_epoch.h"
#include "transfer/sample_layout.h"

namespace pinwheel {
namespace {

namespace fs = std::filesystem;
using ::pinwheel::testing::SeededJpeg;
using ::pinwheel::testing::WriteFile;
using ::pinwheel::testing_support::DrainedEpoch;
using ::pinwheel::testing_support::DrainEpoch;
using ::pinwheel::testing_support::HostBatch;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// A fresh folder under the test's temporary directory.
class ImageFolderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const ::testing::TestInfo* info =
        ::testing::UnitTest::GetInstance()->current_test_info();
    root_ = fs::path(::testing::TempDir()) /
            (std::string("image_folder_") + info->name());
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  void TearDown() override { fs::remove_all(root_); }

  // root/<cls>/<name> holding a JPEG whose pixels depend on `seed`.
  void AddImage(const std::string& cls, const std::string& name, int seed,
                int width = 48, int height = 40) {
    fs::create_directories(root_ / cls);
    WriteFile((root_ / cls / name).string(), SeededJpeg(width, height, seed));
  }
  // Three classes, out of order on purpose, 4 + 3 + 5 images.
  void AddThreeClasses() {
    // StrCat, not "z" + std::to_string(i): GCC 12 at -O3 (Release) reports
    // a false -Wrestrict in the latter.
    for (int i = 0; i < 4; ++i)
      AddImage("zebra", absl::StrCat("z", i, ".jpg"), i);
    for (int i = 0; i < 3; ++i)
      AddImage("ant", absl::StrCat("a", i, ".JPEG"), 10 + i);
    for (int i = 0; i < 5; ++i)
      AddImage("moth", absl::StrCat("m", i, ".jpeg"), 20 + i);
  }

  fs::path root_;
};

// Each sample's image bytes followed by its label's 8 bytes.
std::vector<std::vector<std::byte>> ReadAll(const ImageFolderDataset& ds) {
  std::vector<std::vector<std::byte>> samples;
  absl::StatusOr<BatchLayout> layout = BatchLayout::Create(ds.layout(), 1);
  EXPECT_TRUE(layout.ok());
  for (int64_t i = 0; i < ds.size(); ++i) {
    std::vector<std::byte> slot(layout->slot_bytes());
    SampleView view(*layout, slot.data(), 0, i);
    absl::Status s = ds.Read(i, view);
    EXPECT_TRUE(s.ok()) << s;
    std::vector<std::byte> sample(view.field(0).begin(), view.field(0).end());
    sample.insert(sample.end(), view.field(1).begin(), view.field(1).end());
    samples.push_back(sample);
  }
  return samples;
}

TEST_F(ImageFolderTest, ListsSortedClassesAndLabelsTheirFiles) {
  AddThreeClasses();
  WriteFile((root_ / "moth" / "notes.txt").string(), {std::byte{'x'}});
  fs::create_directories(root_ / "moth" / "more");
  WriteFile((root_ / "moth" / "more" / "deep.jpg").string(),
            SeededJpeg(8, 8, 1));
  absl::StatusOr<std::shared_ptr<ImageFolderDataset>> ds =
      ImageFolderDataset::Open(root_.string(), {});
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_THAT((*ds)->classes(), ElementsAre("ant", "moth", "zebra"));
  ASSERT_EQ((*ds)->size(), 13);
  EXPECT_EQ((*ds)->label(0), 0);
  EXPECT_EQ((*ds)->label(3), 1);
  EXPECT_EQ((*ds)->label(12), 2);
  EXPECT_EQ((*ds)->path(0), (root_ / "ant" / "a0.JPEG").string());
  // Subfolders are walked, sorted among the files ("m0.jpeg" < "more").
  EXPECT_EQ((*ds)->path(3), (root_ / "moth" / "m0.jpeg").string());
  EXPECT_EQ((*ds)->path(8), (root_ / "moth" / "more" / "deep.jpg").string());
  EXPECT_EQ((*ds)->skipped_files(), 1);
  EXPECT_EQ((*ds)->layout().fields()[0].ToString(), "image u8[224,224,3]");
}

TEST_F(ImageFolderTest, EvalReadIsTheCenterCropAndTheLabel) {
  AddImage("a", "x.jpg", 3, 64, 40);
  absl::StatusOr<std::shared_ptr<ImageFolderDataset>> ds =
      ImageFolderDataset::Open(root_.string(), {{.train = false, .size = 16}});
  ASSERT_TRUE(ds.ok()) << ds.status();
  const std::vector<std::vector<std::byte>> samples = ReadAll(**ds);
  std::vector<uint8_t> expected(16 * 16 * 3);
  ASSERT_TRUE(DecodeResizedCrop(SeededJpeg(64, 40, 3), "x",
                                CenterCropRegion(64, 40, 16 * 256 / 224, 16),
                                16, 16, false, absl::MakeSpan(expected))
                  .ok());
  ASSERT_EQ(samples.size(), 1u);
  EXPECT_EQ(std::memcmp(samples[0].data(), expected.data(), expected.size()),
            0);
  int64_t label = -1;
  std::memcpy(&label, samples[0].data() + 16 * 16 * 3, 8);
  EXPECT_EQ(label, 0);
}

TEST_F(ImageFolderTest, TrainBatchesAreTheSameWithOneOrThreeWorkers) {
  AddThreeClasses();
  absl::StatusOr<std::shared_ptr<ImageFolderDataset>> ds =
      ImageFolderDataset::Open(root_.string(), {{.train = true, .size = 24}});
  ASSERT_TRUE(ds.ok()) << ds.status();
  std::vector<std::vector<std::vector<std::byte>>> runs;
  for (int workers : {1, 3}) {
    absl::StatusOr<Loader> loader = LoaderBuilder(*ds)
                                        .batch_size(4)
                                        .shuffle(5)
                                        .num_workers(workers)
                                        .device(Device::Host())
                                        .Build();
    ASSERT_TRUE(loader.ok()) << loader.status();
    std::vector<std::vector<std::byte>> fields;
    for (int epoch = 0; epoch < 2; ++epoch) {
      const DrainedEpoch drained = DrainEpoch(*loader, {.copy_fields = true});
      ASSERT_TRUE(drained.status.ok()) << drained.status;
      for (const auto& batch : drained.batches) {
        for (const auto& field : batch.fields) fields.push_back(field);
      }
    }
    runs.push_back(fields);
  }
  EXPECT_EQ(runs[0], runs[1]);
  // Augmentation differs between epochs (same images, new crops).
  ASSERT_GE(runs[0].size(), 12u);
  EXPECT_NE(runs[0][0], runs[0][6]);
}

TEST_F(ImageFolderTest, AResumedEpochHasTheSameAugmentedBatches) {
  AddThreeClasses();
  absl::StatusOr<std::shared_ptr<ImageFolderDataset>> ds =
      ImageFolderDataset::Open(root_.string(), {{.train = true, .size = 24}});
  ASSERT_TRUE(ds.ok()) << ds.status();
  auto build = [&](std::optional<LoaderCheckpoint> resume) {
    LoaderBuilder builder(*ds);
    builder.batch_size(2).shuffle(11).num_workers(2).device(Device::Host());
    if (resume.has_value()) builder.resume(*std::move(resume));
    return builder.Build();
  };
  absl::StatusOr<Loader> straight = build(std::nullopt);
  ASSERT_TRUE(straight.ok()) << straight.status();
  const DrainedEpoch all = DrainEpoch(*straight, {.copy_fields = true});
  ASSERT_TRUE(all.status.ok()) << all.status;
  ASSERT_EQ(all.batches.size(), 6u);
  absl::StatusOr<Loader> first = build(std::nullopt);
  ASSERT_TRUE(first.ok()) << first.status();
  for (int b = 0; b < 2; ++b) {
    absl::StatusOr<std::optional<DeviceBatch>> batch = first->Next();
    ASSERT_TRUE(batch.ok() && batch->has_value());
  }
  absl::StatusOr<LoaderCheckpoint> checkpoint = first->Checkpoint();
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  absl::StatusOr<Loader> resumed = build(*checkpoint);
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  const DrainedEpoch rest = DrainEpoch(*resumed, {.copy_fields = true});
  ASSERT_TRUE(rest.status.ok()) << rest.status;
  ASSERT_EQ(rest.batches.size(), 4u);
  for (size_t b = 0; b < rest.batches.size(); ++b) {
    EXPECT_EQ(rest.batches[b].indices, all.batches[b + 2].indices);
    EXPECT_EQ(rest.batches[b].fields, all.batches[b + 2].fields)
        << "batch " << b;
  }
}

TEST_F(ImageFolderTest, ABadFileFailsItsReadNamingItAndSkipSampleCountsIt) {
  AddThreeClasses();
  const fs::path png = root_ / "ant" / "a1.JPEG";
  WriteFile(png.string(), {std::byte{0x89}, std::byte{'P'}, std::byte{'N'},
                           std::byte{'G'}, std::byte{0}, std::byte{0}});
  WriteFile((root_ / "zebra" / "z2.jpg").string(), {});  // empty
  absl::StatusOr<std::shared_ptr<ImageFolderDataset>> ds =
      ImageFolderDataset::Open(root_.string(), {{.size = 16}});
  ASSERT_TRUE(ds.ok()) << ds.status();
  {
    absl::StatusOr<Loader> loader = LoaderBuilder(*ds)
                                        .batch_size(4)
                                        .num_workers(2)
                                        .device(Device::Host())
                                        .Build();
    ASSERT_TRUE(loader.ok()) << loader.status();
    const DrainedEpoch drained = DrainEpoch(*loader, {});
    EXPECT_FALSE(drained.status.ok());
    EXPECT_THAT(drained.status.message(), HasSubstr(png.string()));
    EXPECT_THAT(drained.status.message(), HasSubstr("PNG"));
  }
  absl::StatusOr<Loader> loader = LoaderBuilder(*ds)
                                      .batch_size(4)
                                      .num_workers(2)
                                      .on_error(ErrorPolicy::kSkipSample)
                                      .device(Device::Host())
                                      .Build();
  ASSERT_TRUE(loader.ok()) << loader.status();
  const DrainedEpoch drained = DrainEpoch(*loader, {});
  ASSERT_TRUE(drained.status.ok()) << drained.status;
  EXPECT_EQ(drained.samples(), 10);
  EXPECT_GE(loader->stats().samples_skipped, 2);
}

TEST_F(ImageFolderTest, OpenNamesAMissingRoot) {
  const std::string missing = (root_ / "nope").string();
  absl::StatusOr<std::shared_ptr<ImageFolderDataset>> ds =
      ImageFolderDataset::Open(missing);
  EXPECT_EQ(ds.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(ds.status().message(), HasSubstr(missing));
}

TEST_F(ImageFolderTest, OpenNamesARootWithoutClasses) {
  WriteFile((root_ / "loose.jpg").string(), SeededJpeg(8, 8, 0));
  absl::StatusOr<std::shared_ptr<ImageFolderDataset>> ds =
      ImageFolderDataset::Open(root_.string());
  EXPECT_EQ(ds.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(ds.status().message(), HasSubstr("no class folders"));
  // A file as the root.
  ds = ImageFolderDataset::Open((root_ / "loose.jpg").string());
  EXPECT_THAT(ds.status().message(), HasSubstr("not a directory"));
}

TEST_F(ImageFolderTest, OpenNamesAnEmptyClassFolder) {
  AddImage("cat", "c.jpg", 0);
  fs::create_directories(root_ / "dog");
  WriteFile((root_ / "dog" / "readme.txt").string(), {std::byte{'x'}});
  absl::StatusOr<std::shared_ptr<ImageFolderDataset>> ds =
      ImageFolderDataset::Open(root_.string());
  EXPECT_EQ(ds.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(ds.status().message(), HasSubstr((root_ / "dog").string()));
  EXPECT_THAT(ds.status().message(), HasSubstr("no .jpg"));
}

TEST_F(ImageFolderTest, OpenNamesADirectoryNamedLikeAJpeg) {
  AddImage("cat", "c.jpg", 0);
  fs::create_directories(root_ / "cat" / "x.jpg");
  absl::StatusOr<std::shared_ptr<ImageFolderDataset>> ds =
      ImageFolderDataset::Open(root_.string());
  EXPECT_EQ(ds.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(ds.status().message(),
              HasSubstr((root_ / "cat" / "x.jpg").string()));
  EXPECT_THAT(ds.status().message(), HasSubstr("directory"));
}

TEST_F(ImageFolderTest, ReadNamesAFileReplacedByADirectoryAfterOpen) {
  AddImage("cat", "c.jpg", 0);
  absl::StatusOr<std::shared_ptr<ImageFolderDataset>> ds =
      ImageFolderDataset::Open(root_.string(), {{.size = 8}});
  ASSERT_TRUE(ds.ok()) << ds.status();
  fs::remove(root_ / "cat" / "c.jpg");
  fs::create_directories(root_ / "cat" / "c.jpg");
  absl::StatusOr<BatchLayout> layout = BatchLayout::Create((*ds)->layout(), 1);
  ASSERT_TRUE(layout.ok());
  std::vector<std::byte> slot(layout->slot_bytes());
  SampleView view(*layout, slot.data(), 0, 0);
  absl::Status s = (*ds)->Read(0, view);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr((root_ / "cat" / "c.jpg").string()));
  EXPECT_THAT(s.message(), HasSubstr("is a directory"));
}

TEST_F(ImageFolderTest, OpenRefusesBadOptionsNamingTheField) {
  AddImage("cat", "c.jpg", 0);
  absl::StatusOr<std::shared_ptr<ImageFolderDataset>> ds =
      ImageFolderDataset::Open(root_.string(), {{.size = 0}});
  EXPECT_EQ(ds.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(ds.status().message(), HasSubstr("size = 0"));
}

TEST_F(ImageFolderTest, SymlinkLoopsAreNotFollowedAndOpenReturnsPromptly) {
  // Issue 35, item 3: a/loop -> . listed 83 files for 3 real ones, a/up ->
  // .. listed class b's image under class a, and with two loop links Open()
  // had not returned after 20 s.
  AddImage("a", "1.jpg", 1);
  fs::create_directories(root_ / "a" / "sub");
  AddImage("a", "sub/2.jpg", 2);
  AddImage("b", "3.jpg", 3);
  fs::create_directory_symlink(".", root_ / "a" / "loop");
  fs::create_directory_symlink(".", root_ / "a" / "sub" / "loop2");
  fs::create_directory_symlink("..", root_ / "a" / "up");
  fs::create_directory_symlink("../b", root_ / "a" / "other_class");
  fs::create_directory_symlink("sub", root_ / "a" / "alias");
  fs::create_directory_symlink(".", root_ / "everything");
  fs::create_symlink("../b/3.jpg", root_ / "a" / "linked.jpg");
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<std::shared_ptr<ImageFolderDataset>> ds =
      ImageFolderDataset::Open(root_.string(), {{.size = 8}});
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
  EXPECT_THAT((*ds)->classes(), ElementsAre("a", "b"));
  std::vector<std::string> listed;
  for (int64_t i = 0; i < (*ds)->size(); ++i) {
    listed.push_back(
        fs::path((*ds)->path(i)).lexically_relative(root_).string() + " " +
        std::to_string((*ds)->label(i)));
  }
  // A link to a file is followed; sub is listed under its own path, not
  // through alias; the loops, the way up, the other class and the root's
  // link to itself are left out and counted.
  EXPECT_THAT(listed, ElementsAre("a/1.jpg 0", "a/linked.jpg 0",
                                  "a/sub/2.jpg 0", "b/3.jpg 1"));
  EXPECT_EQ((*ds)->skipped_files(), 6);
}

// Issue 35, item 1: one worker thread reads a folder where corrupt JPEGs
// (of every kind the audit found) sit between good ones. Under each error
// policy every good file must come out, with the pixels a fresh thread
// decodes for it.
class CorruptBetweenGoodTest
    : public ImageFolderTest,
      public ::testing::WithParamInterface<ErrorPolicy> {
 protected:
  static constexpr int kFiles = 30;
  static bool IsBad(int i) { return i % 3 == 1; }

  void SetUp() override {
    ImageFolderTest::SetUp();
    fs::create_directories(root_ / "mix");
    const std::vector<std::byte> donor = SeededJpeg(40, 32, 99);
    for (int i = 0; i < kFiles; ++i) {
      char name[32];
      std::snprintf(name, sizeof(name), "f%03d.jpg", i);
      std::vector<std::byte> bytes = SeededJpeg(40, 32, i);
      if (IsBad(i)) {
        switch ((i / 3) % 5) {
          case 0:  // ff d8 ff, then garbage
            bytes.assign(200, std::byte{0x5a});
            bytes[0] = std::byte{0xff};
            bytes[1] = std::byte{0xd8};
            bytes[2] = std::byte{0xff};
            break;
          case 1:  // cut inside the Huffman tables
            bytes.assign(donor.begin(), donor.begin() + 180);
            break;
          case 2:  // cut in the entropy-coded data
            bytes.assign(donor.begin(), donor.begin() + donor.size() * 2 / 3);
            break;
          case 3:  // an end-of-image marker in the middle of the scan
            bytes.assign(donor.begin(), donor.begin() + donor.size() / 2);
            bytes.push_back(std::byte{0xff});
            bytes.push_back(std::byte{0xd9});
            break;
          case 4:  // not a JPEG at all
            bytes.assign({std::byte{0x89}, std::byte{'P'}, std::byte{'N'},
                          std::byte{'G'}});
            break;
        }
      }
      WriteFile((root_ / "mix" / name).string(), bytes);
    }
  }
};

TEST_P(CorruptBetweenGoodTest, EveryGoodFileIsDeliveredOnOneThread) {
  const ErrorPolicy policy = GetParam();
  absl::StatusOr<std::shared_ptr<ImageFolderDataset>> ds =
      ImageFolderDataset::Open(root_.string(), {{.train = false, .size = 16}});
  ASSERT_TRUE(ds.ok()) << ds.status();
  ASSERT_EQ((*ds)->size(), kFiles);
  absl::StatusOr<BatchLayout> one = BatchLayout::Create((*ds)->layout(), 1);
  ASSERT_TRUE(one.ok());
  const size_t image_bytes = 16 * 16 * 3;
  // Each good file decoded alone on a thread of its own: the reference.
  std::vector<std::vector<std::byte>> reference(kFiles);
  for (int i = 0; i < kFiles; ++i) {
    if (IsBad(i)) continue;
    std::thread([&] {
      std::vector<std::byte> slot(one->slot_bytes());
      SampleView view(*one, slot.data(), 0, i);
      absl::Status s = (*ds)->Read(i, view);
      EXPECT_TRUE(s.ok()) << s;
      reference[i].assign(view.field(0).begin(), view.field(0).end());
    }).join();
  }
  if (policy == ErrorPolicy::kStop) {
    // The dataset itself, every file in turn on this one thread.
    for (int i = 0; i < kFiles; ++i) {
      std::vector<std::byte> slot(one->slot_bytes());
      SampleView view(*one, slot.data(), 0, i);
      absl::Status s = (*ds)->Read(i, view);
      if (IsBad(i)) {
        EXPECT_FALSE(s.ok()) << "file " << i;
        continue;
      }
      ASSERT_TRUE(s.ok()) << "file " << i << ": " << s;
      EXPECT_EQ(
          std::vector<std::byte>(view.field(0).begin(), view.field(0).end()),
          reference[i])
          << "file " << i;
    }
    // The loader stops at the first bad file, naming it, after
    // delivering the good one before it.
    absl::StatusOr<Loader> loader = LoaderBuilder(*ds)
                                        .batch_size(1)
                                        .num_workers(1)
                                        .device(Device::Host())
                                        .Build();
    ASSERT_TRUE(loader.ok()) << loader.status();
    const DrainedEpoch drained = DrainEpoch(*loader, {});
    EXPECT_THAT(drained.indices(), ElementsAre(0));
    EXPECT_THAT(drained.status.message(), HasSubstr("f001.jpg"));
    return;
  }
  // Two epochs: the thread carries whatever the first left behind.
  absl::StatusOr<Loader> loader = LoaderBuilder(*ds)
                                      .batch_size(4)
                                      .num_workers(1)
                                      .on_error(policy)
                                      .device(Device::Host())
                                      .Build();
  ASSERT_TRUE(loader.ok()) << loader.status();
  for (int epoch = 0; epoch < 2; ++epoch) {
    const DrainedEpoch drained = DrainEpoch(*loader, {.copy_fields = true});
    ASSERT_TRUE(drained.status.ok()) << drained.status;
    std::vector<int> seen(kFiles, 0);
    for (const HostBatch& batch : drained.batches) {
      for (size_t k = 0; k < batch.indices.size(); ++k) {
        const int64_t i = batch.indices[k];
        ASSERT_FALSE(IsBad(static_cast<int>(i))) << "bad file " << i;
        ++seen[i];
        const std::vector<std::byte> image(
            batch.fields[0].begin() + k * image_bytes,
            batch.fields[0].begin() + (k + 1) * image_bytes);
        EXPECT_EQ(image, reference[i]) << "file " << i << " epoch " << epoch;
      }
    }
    for (int i = 0; i < kFiles; ++i) {
      if (!IsBad(i)) {
        EXPECT_GE(seen[i], 1) << "good file " << i << " lost";
      }
    }
    if (policy == ErrorPolicy::kSkipSample) {
      EXPECT_EQ(drained.samples(), kFiles - kFiles / 3);
    } else {
      EXPECT_EQ(drained.samples(), kFiles);
    }
  }
  // At least: the loader may already be reading the next epoch ahead.
  if (policy == ErrorPolicy::kSkipSample) {
    EXPECT_GE(loader->stats().samples_skipped, 2 * (kFiles / 3));
  } else {
    EXPECT_GE(loader->stats().samples_replaced, 2 * (kFiles / 3));
  }
}

INSTANTIATE_TEST_SUITE_P(EveryErrorPolicy, CorruptBetweenGoodTest,
                         ::testing::Values(ErrorPolicy::kStop,
                                           ErrorPolicy::kSkipSample,
                                           ErrorPolicy::kReplace));

}  // namespace
}  // namespace pinwheel
