// Read-only memory maps of whole files, for the file-backed datasets.
//
// Note [mapping hazard]: a MAP_SHARED mapping shows the file's current
// bytes. When anyone truncates the mapped file in place (open with O_TRUNC,
// ftruncate, a writer that rewrites the same path without a rename), the
// pages past the new end are gone and touching them raises SIGBUS, which
// kills the process. Replacing the file by rename() is safe: the mapping
// keeps the old inode alive, and the reader keeps seeing the old bytes.
// pinwheel's own RecordFileWriter writes a temporary file and renames it.
// So the datasets' Read() never copies out of the mapping: it reads with
// pread(2) into the sample (MappedFile::ReadInto), where a file truncated
// in place, before or during the read, is a short read that becomes
// DataLoss naming the file and the record or window, never SIGBUS.
// (Catching SIGBUS would need a signal handler, which a library must not
// install.) The mapping remains for what only points into the file (the
// header at Open, RecordFileDataset::record()), which keeps the hazard:
// replace files by rename, never truncate a file that a reader maps.
// Cost: pread replaced the fstat that checked the size before the copy, so
// one system call per sample either way; the copy now happens in the
// kernel. Measured on the shared 2-core development box (one thread, page
// cache warm, load average ~9, so noisy; best of 4 runs, old -> new): a W2
// sample (1024 u16 tokens widened to i64) 1385 -> 2884 ns, a u16[1025]
// window 788 -> 2030 ns, a 76-byte record 440 -> 1431 ns, a 64 KiB record
// 5732 -> 11688 ns; medians were closer (W2 3288 -> 3155 ns). W2 on the GPU
// machine is to be re-measured.
#ifndef PINWHEEL_LOADER_INTERNAL_MAPPED_FILE_H_
#define PINWHEEL_LOADER_INTERNAL_MAPPED_FILE_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

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

  // As Open(), but maps nothing: data() is null and size() the size when
  // opened. For files read only with ReadInto(), which a truncation in
  // place cannot turn into SIGBUS (a tar shard: TarShardDataset).
  [[nodiscard]] static absl::StatusOr<MappedFile> OpenUnmapped(
      const std::string& path);

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

  // Reads the file's bytes from `offset` on into `parts`, one after the
  // other, with pread(2)/preadv(2) on the descriptor, not through the
  // mapping: a file truncated in place (before or while reading) gives
  // DataLoss naming the path, `what` and `index` (say "record", 5), the
  // range and the bytes it got, never SIGBUS (Note [mapping hazard]). One
  // system call for up to IOV_MAX parts (EINTR and partial reads resumed);
  // allocates only on failure. Thread-safe.
  [[nodiscard]] absl::Status ReadInto(
      uint64_t offset, absl::Span<const absl::Span<std::byte>> parts,
      const char* what, int64_t index) const;

 private:
  MappedFile(std::string path, int fd, const std::byte* data, size_t size)
      : path_(std::move(path)), fd_(fd), data_(data), size_(size) {}
  static absl::StatusOr<MappedFile> OpenFile(const std::string& path, bool map);
  void Reset();

  std::string path_;
  int fd_ = -1;
  const std::byte* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace pinwheel::internal

#endif  // PINWHEEL_LOADER_INTERNAL_MAPPED_FILE_H_
