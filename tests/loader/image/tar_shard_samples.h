// Shards and epochs of the TarShardDataset suites (tar_shards_test.cc, and
// remote_tar_shards_test.cc over HTTP and S3): shards whose samples are
// named by their labels, and one epoch of a loader read back by label.
//
// Example:
//   std::vector<std::string> paths = WriteLabelledShards(dir, 4, 5);
//   auto ds = TarShardDataset::Open(paths, {.transform = {.size = 16}});
//   absl::Status status;
//   const LabelledImages images = SamplesByLabel(*ds, 16, 3, 2, &status);
//   ASSERT_TRUE(status.ok()) << status;
//   EXPECT_EQ(images.size(), 20u);
#ifndef PINWHEEL_TESTS_LOADER_IMAGE_TAR_SHARD_SAMPLES_H_
#define PINWHEEL_TESTS_LOADER_IMAGE_TAR_SHARD_SAMPLES_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gtest/gtest.h"

#include "loader/image/tar_shards.h"
#include "loader/loader_builder.h"
#include "tests/loader/image/test_jpegs.h"
#include "tests/loader/image/test_tars.h"
#include "tests/support/drain_epoch.h"

namespace pinwheel::testing {

// label -> the image bytes of the sample with that label.
using LabelledImages = std::map<int64_t, std::vector<std::byte>>;

// Writes `dir`/shard-<n>.tar for n < `count`, each of `per_shard` samples,
// and returns their paths. Sample s of the whole set is key "part/s<s>":
// SeededJpeg(40 + s, 30 + 2 * s, s) and class s (labels are unique, so they
// name samples), and with `with_json` an extra "{}" member .json that the
// dataset must pass over.
inline std::vector<std::string> WriteLabelledShards(
    const std::filesystem::path& dir, int count, int per_shard,
    bool with_json = true) {
  std::vector<std::string> paths;
  for (int shard = 0; shard < count; ++shard) {
    TarBuilder tar;
    for (int i = 0; i < per_shard; ++i) {
      const int s = shard * per_shard + i;
      const std::string key = "part/s" + std::to_string(s);
      tar.Add(key + ".jpg", SeededJpeg(40 + s, 30 + 2 * s, s));
      tar.Add(key + ".cls", std::to_string(s) + "\n");
      if (with_json) tar.Add(key + ".json", "{}");
    }
    paths.push_back(
        (dir / ("shard-" + std::to_string(shard) + ".tar")).string());
    WriteFile(paths.back(), tar.Finish());
  }
  return paths;
}

// Returns label -> image (field 0, `image_size`² RGB bytes; the label is
// field 1, an i64) of every sample one epoch of a host loader over `ds`
// delivers, in batches of `batch_size` with `workers` workers; a sample
// delivered twice fails the test. `*status` is how the epoch ended (or why
// the loader did not build).
inline LabelledImages SamplesByLabel(std::shared_ptr<TarShardDataset> ds,
                                     int image_size, int batch_size,
                                     int workers, absl::Status* status) {
  LabelledImages samples;
  absl::StatusOr<Loader> loader = LoaderBuilder(std::move(ds))
                                      .batch_size(batch_size)
                                      .num_workers(workers)
                                      .device(Device::Host())
                                      .Build();
  if (!loader.ok()) {
    *status = loader.status();
    return samples;
  }
  const testing_support::DrainedEpoch drained =
      testing_support::DrainEpoch(*loader, {.copy_fields = true});
  *status = drained.status;
  const size_t image_bytes = static_cast<size_t>(image_size) * image_size * 3;
  for (const auto& batch : drained.batches) {
    for (int64_t p = 0; p < batch.size; ++p) {
      int64_t label = 0;
      std::memcpy(&label, batch.fields[1].data() + p * 8, 8);
      const std::byte* image = batch.fields[0].data() + p * image_bytes;
      EXPECT_EQ(samples.count(label), 0u) << "sample " << label << " twice";
      samples[label] = std::vector<std::byte>(image, image + image_bytes);
    }
  }
  return samples;
}

}  // namespace pinwheel::testing

#endif  // PINWHEEL_TESTS_LOADER_IMAGE_TAR_SHARD_SAMPLES_H_
