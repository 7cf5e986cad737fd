#include "loader/atomic_file.h"

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <fcntl.h>
#include <string>
#include <unistd.h>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

#include "pinning/base/status_macros.h"

namespace pinwheel {
namespace {

// The status of the failed call that set errno, naming what it was doing.
absl::Status Failed(absl::string_view what) {
  return absl::ErrnoToStatus(errno, what);
}

}  // namespace

absl::Status PublishFile(const std::string& tmp, const std::string& path) {
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    absl::Status status =
        Failed(absl::StrCat("cannot rename ", tmp, " to ", path));
    ::unlink(tmp.c_str());  // `path` keeps whatever it held before
    return status;
  }
  const std::string::size_type slash = path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? std::string(".")
                          : slash == 0               ? std::string("/")
                                                     : path.substr(0, slash);
  const int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd < 0 || ::fsync(dir_fd) != 0) {
    absl::Status status = Failed(absl::StrCat(
        path, " is written but its directory ", dir, " could not be synced"));
    if (dir_fd >= 0) ::close(dir_fd);
    return status;
  }
  ::close(dir_fd);
  return absl::OkStatus();
}

namespace internal {

absl::StatusOr<TemporaryFile> CreateTemporaryFileBeside(const std::string& path,
                                                        mode_t mode) {
  static std::atomic<uint64_t> next{0};
  for (int attempt = 0;; ++attempt) {
    std::string tmp =
        absl::StrCat(path, ".tmp-", ::getpid(), "-",
                     next.fetch_add(1, std::memory_order_relaxed));
    // O_EXCL: a new file, never one that exists (with O_CREAT it also fails
    // on any symbolic link, dangling or not); O_NOFOLLOW says so twice.
    const int fd =
        ::open(tmp.c_str(),
               O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
    if (fd >= 0) return TemporaryFile{fd, std::move(tmp)};
    if (errno != EEXIST || attempt >= 100) {
      return Failed(absl::StrCat("cannot create ", path,
                                 " (its temporary file ", tmp, ")"));
    }
  }
}

}  // namespace internal

absl::Status WriteFileAtomically(const std::string& path,
                                 absl::string_view bytes) {
  PINWHEEL_ASSIGN_OR_RETURN(internal::TemporaryFile file,
                            internal::CreateTemporaryFileBeside(path, 0644));
  const std::string& tmp = file.path;
  // Every failure below removes the temporary file; `path` is untouched.
  const auto fail = [&](absl::string_view what) {
    absl::Status status = Failed(absl::StrCat(what, " ", tmp));
    if (file.fd >= 0) ::close(file.fd);
    ::unlink(tmp.c_str());
    return status;
  };
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n =
        ::write(file.fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return fail("cannot write");
    done += static_cast<size_t>(n);
  }
  if (::fsync(file.fd) != 0) return fail("cannot fsync");
  if (::close(std::exchange(file.fd, -1)) != 0) return fail("cannot close");
  PINWHEEL_RETURN_IF_ERROR(PublishFile(tmp, path));
  // The fixed-name temporary file of earlier versions, left by a writer
  // killed mid-way: removed (unlink() never follows a link), never written.
  ::unlink((path + ".tmp").c_str());
  return absl::OkStatus();
}

}  // namespace pinwheel
