#include "pinning/base/small_file.h"

#include <cerrno>
#include <fcntl.h>
#include <unistd.h>

namespace pinwheel::internal {

std::optional<std::string> ReadSmallFile(const std::string& path) {
  constexpr size_t kMaxBytes = size_t{1} << 20;
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return std::nullopt;
  std::string text;
  char buffer[4096];
  while (text.size() < kMaxBytes) {
    const ssize_t n = read(fd, buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      close(fd);
      return std::nullopt;
    }
    if (n == 0) break;
    text.append(buffer, static_cast<size_t>(n));
  }
  close(fd);
  return text;
}

}  // namespace pinwheel::internal
