#include "loader/atomic_file.h"

#include <cerrno>
#include <cstdio>
#include <fcntl.h>
#include <string>
#include <unistd.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

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

absl::Status WriteFileAtomically(const std::string& path,
                                 absl::string_view bytes) {
  const std::string tmp = path + ".tmp";
  const int fd =
      ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Failed(absl::StrCat("cannot create ", tmp));
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      absl::Status status = Failed(absl::StrCat("cannot write ", tmp));
      ::close(fd);
      return status;
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0) {
    absl::Status status = Failed(absl::StrCat("cannot fsync ", tmp));
    ::close(fd);
    return status;
  }
  if (::close(fd) != 0) return Failed(absl::StrCat("cannot close ", tmp));
  return PublishFile(tmp, path);
}

}  // namespace pinwheel
