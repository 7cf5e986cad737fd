#include "loader/internal/mapped_file.h"

#include <cerrno>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace pinwheel::internal {

std::string FileTypeName(unsigned mode) {
  switch (mode & S_IFMT) {
    case S_IFREG:
      return "a regular file";
    case S_IFDIR:
      return "a directory";
    case S_IFIFO:
      return "a FIFO (named pipe)";
    case S_IFCHR:
      return "a character device";
    case S_IFBLK:
      return "a block device";
    case S_IFSOCK:
      return "a socket";
    case S_IFLNK:
      return "a symbolic link";
    default:
      return absl::StrCat("a file of unknown type (mode ", mode & S_IFMT, ")");
  }
}

absl::StatusOr<MappedFile> MappedFile::Open(const std::string& path) {
  return OpenFile(path, /*map=*/true);
}

absl::StatusOr<MappedFile> MappedFile::OpenUnmapped(const std::string& path) {
  return OpenFile(path, /*map=*/false);
}

absl::StatusOr<MappedFile> MappedFile::OpenFile(const std::string& path,
                                                bool map) {
  // O_NONBLOCK: opening a FIFO for reading blocks until a writer opens it,
  // and some devices block too; the type is checked on the opened
  // descriptor (no stat-then-open race). O_NONBLOCK has no effect on a
  // regular file's reads, and the descriptor is only fstat'ed and mapped.
  const int fd =
      ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
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
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": is ", FileTypeName(st.st_mode), ", not a regular file"));
  }
  const size_t bytes = static_cast<size_t>(st.st_size);
  if (bytes == 0 || !map) return MappedFile(path, fd, nullptr, bytes);
  void* addr = ::mmap(nullptr, bytes, PROT_READ, MAP_SHARED, fd, 0);
  if (addr == MAP_FAILED) {
    const int error = errno;
    ::close(fd);
    std::string limit;
    struct rlimit as {};
    if (::getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY) {
      limit = absl::StrCat("; the address-space limit (RLIMIT_AS) is ",
                           as.rlim_cur, " bytes");
    }
    const std::string message =
        absl::StrCat("cannot mmap ", path, " (", bytes, " bytes)", limit);
    if (error == ENOMEM) {
      return absl::ResourceExhaustedError(
          absl::StrCat(message,
                       ": the mapping does not fit the address "
                       "space"));
    }
    return absl::ErrnoToStatus(error, message);
  }
  return MappedFile(path, fd, static_cast<const std::byte*>(addr), bytes);
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : path_(std::move(other.path_)),
      fd_(std::exchange(other.fd_, -1)),
      data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    Reset();
    path_ = std::move(other.path_);
    fd_ = std::exchange(other.fd_, -1);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

MappedFile::~MappedFile() { Reset(); }

void MappedFile::Reset() {
  if (data_ != nullptr) ::munmap(const_cast<std::byte*>(data_), size_);
  if (fd_ >= 0) ::close(fd_);
  data_ = nullptr;
  size_ = 0;
  fd_ = -1;
}

absl::Status MappedFile::CheckRange(uint64_t offset, uint64_t length,
                                    const char* what, int64_t index) const {
  struct stat st {};
  if (::fstat(fd_, &st) != 0) {
    const int error = errno;
    return absl::ErrnoToStatus(
        error, absl::StrCat("cannot stat ", path_, " before reading ", what,
                            " ", index));
  }
  const uint64_t now = static_cast<uint64_t>(st.st_size);
  if (offset > now || length > now - offset) {
    return absl::DataLossError(absl::StrCat(
        path_, ": ", what, " ", index, " needs bytes [", offset, ", ",
        offset + length, ") but the file now has ", now, " bytes (it had ",
        size_,
        " when opened): it was truncated or rewritten in place under the "
        "reader; replace such files by writing a new one and renaming it "
        "over the old"));
  }
  return absl::OkStatus();
}

absl::Status MappedFile::ReadInto(uint64_t offset,
                                  absl::Span<const absl::Span<std::byte>> parts,
                                  const char* what, int64_t index) const {
  uint64_t length = 0;
  for (const absl::Span<std::byte>& part : parts) length += part.size();
  // The parts not yet read in full, as iovecs, 64 at a time (records have
  // up to 4096 fields; IOV_MAX is 1024 on Linux).
  constexpr size_t kMaxIov = 64;
  struct iovec iov[kMaxIov];
  size_t next_part = 0;     // first part not yet in iov
  size_t done_in_part = 0;  // bytes of parts[next_part] already read
  uint64_t got = 0;
  while (got < length) {
    size_t count = 0;
    size_t p = next_part;
    size_t skip = done_in_part;
    for (; p < parts.size() && count < kMaxIov; ++p, skip = 0) {
      if (parts[p].size() == skip) continue;
      iov[count].iov_base = parts[p].data() + skip;
      iov[count].iov_len = parts[p].size() - skip;
      ++count;
    }
    const ssize_t n = ::preadv(fd_, iov, static_cast<int>(count),
                               static_cast<off_t>(offset + got));
    if (n < 0) {
      const int error = errno;
      if (error == EINTR) continue;
      return absl::ErrnoToStatus(
          error,
          absl::StrCat("cannot read ", path_, ": ", what, " ", index,
                       " (bytes [", offset, ", ", offset + length, "))"));
    }
    if (n == 0) {  // the end of the file, before the range's
      struct stat st {};
      const uint64_t now = ::fstat(fd_, &st) == 0
                               ? static_cast<uint64_t>(st.st_size)
                               : offset + got;
      return absl::DataLossError(absl::StrCat(
          path_, ": ", what, " ", index, " needs bytes [", offset, ", ",
          offset + length, ") but the file now has ", now, " bytes (it had ",
          size_,
          " when opened): it was truncated or rewritten in place under the "
          "reader; replace such files by writing a new one and renaming it "
          "over the old"));
    }
    got += static_cast<uint64_t>(n);
    // Advance over what was read.
    uint64_t left = static_cast<uint64_t>(n);
    while (left > 0 && next_part < parts.size()) {
      const uint64_t rest = parts[next_part].size() - done_in_part;
      if (left < rest) {
        done_in_part += static_cast<size_t>(left);
        left = 0;
      } else {
        left -= rest;
        ++next_part;
        done_in_part = 0;
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace pinwheel::internal
