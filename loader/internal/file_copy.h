// FileCopy: a file's bytes read into host memory the loader owns, for the
// gather path (loader/gather_source.h). The gather registers host memory
// with the GPU, and a registered file mapping would fault the GPU (and
// poison the process's CUDA context) when the file is truncated or
// rewritten under it (Note [mapping hazard] in mapped_file.h): a copy
// cannot change under the GPU.
//
// Example (in a file-backed dataset):
//   absl::StatusOr<std::shared_ptr<const FileCopy>> copy =
//       gather_copy_->Get(*file_, file_->size(), max_copy_bytes);
#ifndef PINWHEEL_LOADER_INTERNAL_FILE_COPY_H_
#define PINWHEEL_LOADER_INTERNAL_FILE_COPY_H_

#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"

#include "loader/internal/mapped_file.h"

namespace pinwheel::internal {

// The first bytes of one file, in page-aligned memory it owns. Immutable;
// thread-safe.
class FileCopy {
 public:
  // Reads `bytes` bytes of `file` from offset 0 with pread on its own
  // descriptor (the same file the mapping shows, even after a rename over
  // its path). ResourceExhausted naming both sizes when `bytes` exceeds
  // `max_bytes`, before anything is allocated or read; DataLoss naming the
  // path and the sizes when the file now holds fewer bytes (truncated in
  // place); the errno message when a read fails.
  [[nodiscard]] static absl::StatusOr<std::shared_ptr<const FileCopy>> Read(
      const MappedFile& file, uint64_t bytes, uint64_t max_bytes);

  FileCopy(const FileCopy&) = delete;
  FileCopy& operator=(const FileCopy&) = delete;
  ~FileCopy();

  absl::Span<const std::byte> bytes() const { return {data_, size_}; }

 private:
  FileCopy(std::byte* data, size_t size) : data_(data), size_(size) {}
  std::byte* data_;
  size_t size_;
};

// One dataset's FileCopy, made on first use and shared by every caller
// while any of them holds it (then freed, and read again on the next Get).
// Thread-safe.
class SharedFileCopy {
 public:
  // Returns the copy of `file`'s first `bytes` bytes, reading it when no
  // caller holds one; FileCopy::Read()'s errors otherwise. The file is read
  // under the lock (a second caller waits for the copy rather than making
  // its own); no CUDA call is made here.
  [[nodiscard]] absl::StatusOr<std::shared_ptr<const FileCopy>> Get(
      const MappedFile& file, uint64_t bytes, uint64_t max_bytes)
      ABSL_LOCKS_EXCLUDED(mu_);

 private:
  absl::Mutex mu_;
  std::weak_ptr<const FileCopy> copy_ ABSL_GUARDED_BY(mu_);
};

}  // namespace pinwheel::internal

#endif  // PINWHEEL_LOADER_INTERNAL_FILE_COPY_H_
