// Reading the small text files the kernel publishes (/proc, /sys, cgroup
// limits) with plain POSIX calls. No iostreams: a Python extension module
// built with one libstdc++ and loaded beside another (torch's) crashed inside
// std::istream's number parsing on the GPU machine.
#ifndef PINWHEEL_PINNING_BASE_SMALL_FILE_H_
#define PINWHEEL_PINNING_BASE_SMALL_FILE_H_

#include <optional>
#include <string>

namespace pinwheel::internal {

// Returns the whole content of `path` (at most 1 MiB), or nullopt when it
// cannot be opened or read. Thread-safe.
std::optional<std::string> ReadSmallFile(const std::string& path);

}  // namespace pinwheel::internal

#endif  // PINWHEEL_PINNING_BASE_SMALL_FILE_H_
