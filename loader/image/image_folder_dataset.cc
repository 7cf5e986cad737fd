#include "loader/image/image_folder_dataset.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <memory>
#include <string>
#include <sys/stat.h>
#include <system_error>
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

absl::Status ErrnoStatus(int error, const std::string& what) {
  const std::string message = absl::StrCat(what, ": ", std::strerror(error));
  switch (error) {
    case ENOENT:
    case ENOTDIR:
      return absl::NotFoundError(message);
    case EACCES:
    case EPERM:
      return absl::PermissionDeniedError(message);
    case EISDIR:
      return absl::InvalidArgumentError(message);
    default:
      return absl::UnknownError(message);
  }
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

// Adds the JPEGs under `dir` (recursively, sorted) to `files`; counts the
// other files in `skipped`.
absl::Status ListClass(const fs::path& dir, std::vector<std::string>& files,
                       int64_t& skipped) {
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
    const bool is_dir = fs::is_directory(entry, ec);
    if (is_dir && HasImageExtension(entry)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "ImageFolderDataset: ", entry.string(),
          " is a directory named like an image file; rename or remove it"));
    }
    if (is_dir) {
      if (absl::Status s = ListClass(entry, files, skipped); !s.ok()) {
        return s;
      }
    } else if (HasImageExtension(entry)) {
      files.push_back(entry.string());
    } else {
      ++skipped;
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ReadWholeFile(const std::string& path, int64_t max_bytes,
                           std::vector<std::byte>& bytes) {
  Descriptor file(open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (file.fd < 0) return ErrnoStatus(errno, absl::StrCat("opening ", path));
  struct stat st;
  if (fstat(file.fd, &st) != 0) {
    return ErrnoStatus(errno, absl::StrCat("fstat of ", path));
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
    if (n < 0) return ErrnoStatus(errno, absl::StrCat("reading ", path));
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
  std::vector<std::string> classes;
  for (fs::directory_iterator it(root, ec), end; !ec && it != end;
       it.increment(ec)) {
    if (fs::is_directory(it->path())) {
      classes.push_back(it->path().filename().string());
    }
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
  int64_t skipped = 0;
  for (size_t label = 0; label < classes.size(); ++label) {
    const fs::path dir = fs::path(root) / classes[label];
    std::vector<std::string> paths;
    if (absl::Status s = ListClass(dir, paths, skipped); !s.ok()) {
      return s;
    }
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
