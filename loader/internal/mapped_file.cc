#include "loader/internal/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace pinwheel::internal {

absl::Status MapFile(const std::string& path, const std::byte*& map,
                     size_t& map_bytes) {
  map = nullptr;
  map_bytes = 0;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int error = errno;
    return absl::ErrnoToStatus(error, absl::StrCat("cannot open ", path));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int error = errno;
    ::close(fd);
    return absl::ErrnoToStatus(error, absl::StrCat("cannot stat ", path));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": not a regular file"));
  }
  map_bytes = static_cast<size_t>(st.st_size);
  if (map_bytes == 0) {
    ::close(fd);
    return absl::OkStatus();
  }
  void* addr = ::mmap(nullptr, map_bytes, PROT_READ, MAP_SHARED, fd, 0);
  const int error = errno;
  ::close(fd);  // The mapping keeps the file alive.
  if (addr == MAP_FAILED) {
    map_bytes = 0;
    return absl::ErrnoToStatus(
        error, absl::StrCat("cannot mmap ", path, " (", st.st_size, " bytes)"));
  }
  map = static_cast<const std::byte*>(addr);
  return absl::OkStatus();
}

}  // namespace pinwheel::internal
