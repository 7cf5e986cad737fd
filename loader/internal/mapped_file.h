// Read-only memory maps of whole files, for the file-backed datasets.
#ifndef PINWHEEL_LOADER_INTERNAL_MAPPED_FILE_H_
#define PINWHEEL_LOADER_INTERNAL_MAPPED_FILE_H_

#include <cstddef>
#include <string>

#include "absl/status/status.h"

namespace pinwheel::internal {

// Maps the whole file `path` read-only (MAP_SHARED). NotFound /
// PermissionDenied / ... naming the path and the errno message;
// InvalidArgument for a path that is not a regular file. On success `map` is
// nullptr for an empty file; otherwise the caller munmap()s it.
absl::Status MapFile(const std::string& path, const std::byte*& map,
                     size_t& map_bytes);

}  // namespace pinwheel::internal

#endif  // PINWHEEL_LOADER_INTERNAL_MAPPED_FILE_H_
