// ImageFolderDataset: a map-style dataset over a folder of JPEGs in
// torchvision's ImageFolder convention, root/<class>/.../<file>.jpg, the
// classes sorted by name and numbered from 0. Each sample is the image
// decoded and transformed into its place in the pinned slot ("image", u8
// [size, size, 3], RGB HWC) and its class ("label", i64).
//
// Example:
//   PINWHEEL_ASSIGN_OR_RETURN(
//       std::shared_ptr<ImageFolderDataset> train,
//       ImageFolderDataset::Open("/data/imagenet/train", {.size = 224}));
//   PINWHEEL_ASSIGN_OR_RETURN(Loader loader,
//       LoaderBuilder(train).batch_size(256).shuffle(7).num_workers(8).Build());
//
// The file list is built once, by Open(): files with the extensions .jpg or
// .jpeg (any case) in each class folder and its subfolders, in sorted
// order; other files are left out and counted (skipped_files()).
//
// Note [symbolic links]: a link to a file is followed (the file is listed
// under the link's path). A link to a directory is followed only when it
// resolves inside its own class folder to a directory not listed yet; real
// directories are listed first, so a folder reached both ways is listed
// under its own path. Every other directory link is left out and counted
// in skipped_files(): a loop (a/loop -> .), a way up (a/up -> ..), another
// class's folder, anything outside the class folder, a dangling link. A
// class folder may itself be a link (root/cat -> /data/cat), except to the
// root or above it (root/loop -> .), which is left out and counted alike.
// So each file is listed once, under one class, and Open() returns
// promptly whatever links the tree holds. Training draws RandomResizedCrop +
// flip from the sample's SampleRandom (a pure function of loader seed, epoch
// and index), so batches are the same with any number of workers and after a
// resume. A file that cannot be read or decoded fails its Read() with a Status
// naming the file; under ErrorPolicy::kSkipSample the loader skips and
// counts it.
//
// Thread-safe: immutable after Open(); Read() from any number of threads.
#ifndef PINWHEEL_LOADER_IMAGE_IMAGE_FOLDER_DATASET_H_
#define PINWHEEL_LOADER_IMAGE_IMAGE_FOLDER_DATASET_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include "loader/dataset.h"
#include "loader/image/image_transforms.h"
#include "transfer/sample_layout.h"

namespace pinwheel {

struct ImageFolderOptions : ImageTransformOptions {
  // A file larger than this fails its Read() (ResourceExhausted), bytes.
  int64_t max_file_bytes = int64_t{64} << 20;
};

class ImageFolderDataset : public Dataset {
 public:
  // Lists root/<class>/... once. Errors name the path: NotFound for a
  // missing root, InvalidArgument for a root that is not a directory, a
  // root without class folders, a class folder without a JPEG, or a
  // directory named like an image (x.jpg: surely a mistake); the options'
  // rule broken (see ImageTransformOptions).
  [[nodiscard]] static absl::StatusOr<std::shared_ptr<ImageFolderDataset>> Open(
      const std::string& root, const ImageFolderOptions& options = {});

  int64_t size() const override { return static_cast<int64_t>(files_.size()); }
  const SampleLayout& layout() const override { return layout_; }
  absl::Status Read(int64_t index, SampleView& out) const override;

  // The class names, sorted; a label is an index into this.
  const std::vector<std::string>& classes() const { return classes_; }
  // The file of sample `index` and its label. REQUIRES: 0 <= index < size().
  const std::string& path(int64_t index) const { return files_[index].path; }
  int64_t label(int64_t index) const { return files_[index].label; }
  // Files left out for their extension, and directory links left out
  // (Note [symbolic links]).
  int64_t skipped_files() const { return skipped_files_; }

 private:
  struct File {
    std::string path;
    int64_t label;
  };
  ImageFolderDataset(ImageFolderOptions options, SampleLayout layout,
                     std::vector<std::string> classes, std::vector<File> files,
                     int64_t skipped_files)
      : options_(std::move(options)),
        layout_(std::move(layout)),
        classes_(std::move(classes)),
        files_(std::move(files)),
        skipped_files_(skipped_files) {}

  ImageFolderOptions options_;
  SampleLayout layout_;
  std::vector<std::string> classes_;
  std::vector<File> files_;
  int64_t skipped_files_;
};

// Reads the whole file at `path` into `bytes` (resized to the file's size;
// its capacity is kept, so a reused buffer does not allocate). Errors name
// the path: NotFound, PermissionDenied, InvalidArgument for a directory or
// another non-regular file, ResourceExhausted over `max_bytes`, DataLoss
// for a short read. Thread-safe.
[[nodiscard]] absl::Status ReadWholeFile(const std::string& path,
                                         int64_t max_bytes,
                                         std::vector<std::byte>& bytes);

}  // namespace pinwheel

#endif  // PINWHEEL_LOADER_IMAGE_IMAGE_FOLDER_DATASET_H_
