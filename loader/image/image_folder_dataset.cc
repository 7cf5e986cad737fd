#include "loader/image/image_folder_dataset.h"

#include <algorithm>
#include <cerrno>
#include <fcntl.h>
#include <filesystem>
#include <memory>
#include <set>
#include <string>
#include <sys/stat.h>
#include <system_error>
#include <tuple>
#include <unistd.h>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

#include "loader/image/compressed_image.h"
#include "loader/image/image_transforms.h"

namespace pinwheel {
namespace {

namespace fs = std::filesystem;

bool HasImageExtension(const fs::path& path) {
  const std::string ext = absl::AsciiStrToLower(path.extension().string());
  return ext == ".jpg" || ext == ".jpeg";
}

// Closes a descriptor when it goes out of scope.
struct Descriptor {
  explicit Descriptor(int fd) : fd(fd) {}
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;
  ~Descriptor() {
    if (fd >= 0) close(fd);
  }
  int fd;
};

// A directory's identity, whatever path reaches it.
struct DirectoryId {
  dev_t device;
  ino_t inode;
  friend bool operator<(const DirectoryId& a, const DirectoryId& b) {
    return std::tie(a.device, a.inode) < std::tie(b.device, b.inode);
  }
};

absl::StatusOr<DirectoryId> IdOf(const fs::path& dir) {
  struct stat st;
  if (stat(dir.c_str(), &st) != 0) {
    const int error = errno;
    return absl::ErrnoToStatus(
        error, absl::StrCat("ImageFolderDataset: stat of ", dir.string()));
  }
  return DirectoryId{st.st_dev, st.st_ino};
}

// Whether `path` (canonical) is `root` (canonical) or inside it.
bool IsWithin(const fs::path& path, const fs::path& root) {
  auto p = path.begin();
  for (auto r = root.begin(); r != root.end(); ++r, ++p) {
    if (p == path.end() || *p != *r) return false;
  }
  return true;
}

// One class folder's walk (see Note [symbolic links] in
// image_folder_dataset.h).
class ClassWalk {
 public:
  ClassWalk(fs::path class_dir, int64_t& skipped)
      : class_dir_(std::move(class_dir)), skipped_(skipped) {}

  // Returns the class's JPEGs, sorted, or an error naming the path.
  absl::StatusOr<std::vector<std::string>> Run() {
    std::error_code ec;
    const fs::path real = fs::canonical(class_dir_, ec);
    if (ec) {
      return absl::UnknownError(absl::StrCat("ImageFolderDataset: resolving ",
                                             class_dir_.string(), ": ",
                                             ec.message()));
    }
    real_root_ = real;
    absl::StatusOr<DirectoryId> id = IdOf(class_dir_);
    if (!id.ok()) return id.status();
    visited_.insert(*id);
    // Real directories first, then the linked ones not reached already, so
    // a directory reached both ways is listed under its own path.
    if (absl::Status s = List(class_dir_); !s.ok()) return s;
    for (size_t i = 0; i < links_.size(); ++i) {
      const fs::path link = links_[i];  // List() may append to links_
      const fs::path target = fs::canonical(link, ec);
      if (ec || !IsWithin(target, real_root_)) {
        ++skipped_;  // a dangling link, or one out of its class folder
        continue;
      }
      absl::StatusOr<DirectoryId> target_id = IdOf(link);
      if (!target_id.ok()) return target_id.status();
      if (!visited_.insert(*target_id).second) {
        ++skipped_;  // a loop (a/loop -> .) or a second way to one folder
        continue;
      }
      if (absl::Status s = List(link); !s.ok()) return s;
    }
    std::sort(files_.begin(), files_.end());  // path order: by component
    std::vector<std::string> out;
    out.reserve(files_.size());
    for (const fs::path& f : files_) out.push_back(f.string());
    return out;
  }

 private:
  // Lists `dir`: JPEGs into files_, real subdirectories recursively, links
  // to directories into links_ for later.
  absl::Status List(const fs::path& dir) {
    std::error_code ec;
    std::vector<fs::path> entries;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end;
         it.increment(ec)) {
      entries.push_back(it->path());
    }
    if (ec) {
      return absl::UnknownError(absl::StrCat("ImageFolderDataset: listing ",
                                             dir.string(), ": ", ec.message()));
    }
    std::sort(entries.begin(), entries.end());
    for (const fs::path& entry : entries) {
      const bool is_dir = fs::is_directory(entry, ec);  // follows links
      if (is_dir && HasImageExtension(entry)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "ImageFolderDataset: ", entry.string(),
            " is a directory named like an image file; rename or remove it"));
      }
      if (is_dir && fs::is_symlink(entry, ec)) {
        links_.push_back(entry);
      } else if (is_dir) {
        absl::StatusOr<DirectoryId> id = IdOf(entry);
        if (!id.ok()) return id.status();
        if (!visited_.insert(*id).second) continue;  // a bind mount's loop
        if (absl::Status s = List(entry); !s.ok()) return s;
      } else if (HasImageExtension(entry)) {
        files_.push_back(entry);
      } else {
        ++skipped_;
      }
    }
    return absl::OkStatus();
  }

  const fs::path class_dir_;
  int64_t& skipped_;
  fs::path real_root_;
  std::set<DirectoryId> visited_;
  std::vector<fs::path> links_;
  std::vector<fs::path> files_;
};

}  // namespace

absl::Status ReadWholeFile(const std::string& path, int64_t max_bytes,
                           std::vector<std::byte>& bytes) {
  Descriptor file(open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (file.fd < 0) {
    const int error = errno;
    return absl::ErrnoToStatus(error, absl::StrCat("opening ", path));
  }
  struct stat st;
  if (fstat(file.fd, &st) != 0) {
    const int error = errno;
    return absl::ErrnoToStatus(error, absl::StrCat("fstat of ", path));
  }
  if (S_ISDIR(st.st_mode)) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, " is a directory, not an image file"));
  }
  if (!S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, " is not a regular file"));
  }
  if (st.st_size > max_bytes) {
    return absl::ResourceExhaustedError(
        absl::StrCat(path, " has ", st.st_size, " bytes, over the limit of ",
                     max_bytes, " (max_file_bytes)"));
  }
  bytes.resize(static_cast<size_t>(st.st_size));
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = pread(file.fd, bytes.data() + done, bytes.size() - done,
                            static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int error = errno;
      return absl::ErrnoToStatus(error, absl::StrCat("reading ", path));
    }
    if (n == 0) {
      return absl::DataLossError(absl::StrCat(path, ": the file ended at byte ",
                                              done, " of ", bytes.size(),
                                              " (truncated while reading)"));
    }
    done += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<ImageFolderDataset>> ImageFolderDataset::Open(
    const std::string& root, const ImageFolderOptions& options) {
  if (absl::Status s = ValidateImageTransformOptions(options); !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("ImageFolderDataset ", root, ": ", s.message()));
  }
  if (options.max_file_bytes < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ImageFolderDataset ", root,
        ": max_file_bytes = ", options.max_file_bytes, " must be >= 1"));
  }
  std::error_code ec;
  const fs::file_status root_status = fs::status(root, ec);
  if (!fs::exists(root_status)) {
    return absl::NotFoundError(
        absl::StrCat("ImageFolderDataset: the root ", root, " does not exist",
                     ec && ec != std::errc::no_such_file_or_directory
                         ? absl::StrCat(" (", ec.message(), ")")
                         : ""));
  }
  if (!fs::is_directory(root_status)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ImageFolderDataset: the root ", root, " is not a directory"));
  }
  const fs::path real_root = fs::canonical(root, ec);
  if (ec) {
    return absl::UnknownError(absl::StrCat("ImageFolderDataset: resolving ",
                                           root, ": ", ec.message()));
  }
  std::vector<std::string> classes;
  int64_t skipped = 0;
  for (fs::directory_iterator it(root, ec), end; !ec && it != end;
       it.increment(ec)) {
    std::error_code link_ec;
    if (!fs::is_directory(it->path(), link_ec)) continue;
    if (fs::is_symlink(it->path(), link_ec)) {
      // A link to the root or above it (root/loop -> .) is no class: its
      // walk would list every class under one (Note [symbolic links]).
      const fs::path target = fs::canonical(it->path(), link_ec);
      if (link_ec || IsWithin(real_root, target)) {
        ++skipped;
        continue;
      }
    }
    classes.push_back(it->path().filename().string());
  }
  if (ec) {
    return absl::UnknownError(
        absl::StrCat("ImageFolderDataset: listing ", root, ": ", ec.message()));
  }
  if (classes.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ImageFolderDataset: ", root,
        " has no class folders (expected root/<class>/<image>.jpg)"));
  }
  std::sort(classes.begin(), classes.end());
  std::vector<File> files;
  for (size_t label = 0; label < classes.size(); ++label) {
    const fs::path dir = fs::path(root) / classes[label];
    absl::StatusOr<std::vector<std::string>> listed =
        ClassWalk(dir, skipped).Run();
    if (!listed.ok()) return listed.status();
    std::vector<std::string> paths = *std::move(listed);
    if (paths.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("ImageFolderDataset: the class folder ", dir.string(),
                       " holds no .jpg or .jpeg file"));
    }
    for (std::string& p : paths) {
      files.push_back(File{std::move(p), static_cast<int64_t>(label)});
    }
  }
  absl::StatusOr<SampleLayout> layout =
      options.delivery == ImageDelivery::kJpeg
          ? CompressedImageLayout(options.max_jpeg_bytes)
          : SampleLayout::Create(
                {{.name = "image",
                  .dtype = DType::kUInt8,
                  .shape = {options.size, options.size, 3}},
                 {.name = "label", .dtype = DType::kInt64, .shape = {}}});
  if (!layout.ok()) return layout.status();
  return std::shared_ptr<ImageFolderDataset>(
      new ImageFolderDataset(options, *std::move(layout), std::move(classes),
                             std::move(files), skipped));
}

absl::Status ImageFolderDataset::Read(int64_t index, SampleView& out) const {
  const File& file = files_[index];
  // The file's bytes, in a buffer each thread keeps (no allocation once it
  // has held the largest file).
  thread_local std::vector<std::byte> bytes;
  if (absl::Status s = ReadWholeFile(file.path, options_.max_file_bytes, bytes);
      !s.ok()) {
    return s;
  }
  if (options_.delivery == ImageDelivery::kJpeg) {
    return WriteCompressedImage(bytes, file.path, options_, out.random(),
                                file.label, out);
  }
  if (absl::Status s = DecodeTransformedImage(
          bytes, file.path, options_, out.random(), out.field_as<uint8_t>(0));
      !s.ok()) {
    return s;
  }
  out.field_as<int64_t>(1)[0] = file.label;
  return absl::OkStatus();
}

}  // namespace pinwheel
