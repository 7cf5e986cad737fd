#include "loader/internal/file_copy.h"

#include <cerrno>
#include <new>
#include <unistd.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

#include "pinning/base/mutex.h"

namespace pinwheel::internal {
namespace {

constexpr size_t kPageBytes = 4096;

}  // namespace

absl::StatusOr<std::shared_ptr<const FileCopy>> FileCopy::Read(
    const MappedFile& file, uint64_t bytes, uint64_t max_bytes) {
  if (bytes > max_bytes) {
    return absl::ResourceExhaustedError(
        absl::StrCat(file.path(), ": the gather path would copy the file's ",
                     bytes, " bytes into memory it registers, more than the ",
                     max_bytes, " bytes the memory budget leaves"));
  }
  if (bytes > SIZE_MAX - kPageBytes) {
    return absl::ResourceExhaustedError(
        absl::StrCat(file.path(), ": ", bytes, " bytes do not fit in memory"));
  }
  const size_t rounded = (bytes + kPageBytes - 1) / kPageBytes * kPageBytes;
  auto* data = static_cast<std::byte*>(
      ::operator new(rounded == 0 ? kPageBytes : rounded,
                     std::align_val_t(kPageBytes), std::nothrow));
  if (data == nullptr) {
    return absl::ResourceExhaustedError(absl::StrCat(
        file.path(), ": could not allocate ", bytes, " bytes for its copy"));
  }
  std::shared_ptr<const FileCopy> copy(new FileCopy(data, bytes));
  uint64_t done = 0;
  while (done < bytes) {
    const size_t chunk =
        static_cast<size_t>(std::min<uint64_t>(bytes - done, 1 << 30));
    const ssize_t n =
        ::pread(file.fd(), data + done, chunk, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      return absl::ErrnoToStatus(
          errno, absl::StrCat(file.path(), ": pread at byte ", done));
    }
    if (n == 0) {
      return absl::DataLossError(absl::StrCat(
          file.path(), ": the file ends at byte ", done, " but ", bytes,
          " bytes were expected (truncated in place while open?)"));
    }
    done += static_cast<uint64_t>(n);
  }
  return copy;
}

FileCopy::~FileCopy() {
  ::operator delete(data_, std::align_val_t(kPageBytes));
}

absl::StatusOr<std::shared_ptr<const FileCopy>> SharedFileCopy::Get(
    const MappedFile& file, uint64_t bytes, uint64_t max_bytes) {
  MutexLock lock(&mu_);
  if (std::shared_ptr<const FileCopy> held = copy_.lock()) return held;
  absl::StatusOr<std::shared_ptr<const FileCopy>> copy =
      FileCopy::Read(file, bytes, max_bytes);
  if (copy.ok()) copy_ = *copy;
  return copy;
}

}  // namespace pinwheel::internal
