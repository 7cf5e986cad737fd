// Read-only memory maps of whole files, for the file-backed datasets.
//
// Note [mapping hazard]: a MAP_SHARED mapping shows the file's current
// bytes. When anyone truncates the mapped file in place (open with O_TRUNC,
// ftruncate, a writer that rewrites the same path without a rename), the
// pages past the new end are gone and touching them raises SIGBUS, which
// kills the process. Replacing the file by rename() is safe: the mapping
// keeps the old inode alive, and the reader keeps seeing the old bytes.
// pinwheel's own RecordFileWriter writes a temporary file and renames it.
// MappedFile::CheckRange() turns a truncation that happened before a read
// into DataLoss (one fstat per call); a truncation racing with the copy
// itself cannot be caught without a SIGBUS handler, which a library must not
// install: never truncate a file that a reader maps.
#ifndef PINWHEEL_LOADER_INTERNAL_MAPPED_FILE_H_
#define PINWHEEL_LOADER_INTERNAL_MAPPED_FILE_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace pinwheel::internal {

// Returns the file type of `mode` in words ("regular file", "FIFO", ...).
std::string FileTypeName(unsigned mode);

// A whole file mapped read-only, and its open descriptor. Thread-safe
// (immutable after Open). Move-only; the destructor unmaps and closes.
class MappedFile {
 public:
  // Opens `path` without blocking (O_NONBLOCK: a FIFO or a device never
  // hangs the caller), checks with fstat on the opened descriptor that it is
  // a regular file (InvalidArgument naming the path and its type
  // otherwise), and maps it. NotFound / PermissionDenied / ... name the path
  // and the errno message; ResourceExhausted when the mapping does not fit
  // the address space (naming the size and RLIMIT_AS). An empty file gives
  // data() == nullptr and size() == 0.
  [[nodiscard]] static absl::StatusOr<MappedFile> Open(const std::string& path);

  MappedFile() = default;
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  const std::byte* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }
  // The open descriptor of the mapped file (-1 when none), for reading the
  // same file by pread (see FileCopy).
  int fd() const { return fd_; }

  // OK when bytes [offset, offset + length) are still in the file; DataLoss
  // naming the path, `what` and `index` (say "record", 5), the range and the
  // file's size now when the file was truncated under the mapping (see
  // Note [mapping hazard]). One fstat; allocates only on failure.
  [[nodiscard]] absl::Status CheckRange(uint64_t offset, uint64_t length,
                                        const char* what, int64_t index) const;

 private:
  MappedFile(std::string path, int fd, const std::byte* data, size_t size)
      : path_(std::move(path)), fd_(fd), data_(data), size_(size) {}
  void Reset();

  std::string path_;
  int fd_ = -1;
  const std::byte* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace pinwheel::internal

#endif  // PINWHEEL_LOADER_INTERNAL_MAPPED_FILE_H_
