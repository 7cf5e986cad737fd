// The on-disk form of one cached block: a small header naming what it
// holds, then the block's bytes.
//
// Format (little-endian), in a file named BlockFileName(url, block):
//   0  char[8] magic "PWCBLOCK"
//   8  u32     version (1)
//  12  u32     url bytes (U)
//  16  i64     object size (bytes of the whole object when cached)
//  24  i64     block index
//  32  i64     payload bytes (P)
//  40  u32     CRC-32C of the payload
//  44  u32     CRC-32C of bytes 0..43 and the url
//  48  url (U bytes), then the payload (P bytes); the file is exactly
//      48 + U + P bytes.
// Files are published whole with WriteFileAtomically (loader/atomic_file.h),
// so a kill leaves either the whole file or a temporary one beside it.
#ifndef PINWHEEL_LOADER_STORAGE_CACHE_INTERNAL_BLOCK_FILE_H_
#define PINWHEEL_LOADER_STORAGE_CACHE_INTERNAL_BLOCK_FILE_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace pinwheel::internal {

inline constexpr int64_t kBlockFileHeaderBytes = 48;
inline constexpr absl::string_view kBlockFileSuffix = ".blk";

// Returns "<16 hex digits of a stable hash of url>-<block>.blk".
std::string BlockFileName(absl::string_view url, int64_t block);

// Returns the header and url of a block file holding `payload`.
std::string EncodeBlockFileHead(absl::string_view url, int64_t object_size,
                                int64_t block, absl::string_view payload);

// What a valid block file holds.
struct BlockFileInfo {
  std::string url;
  int64_t object_size = 0;
  int64_t block = 0;
  int64_t payload_bytes = 0;
  int64_t payload_offset = 0;  // in the file
};

// Why a file in a cache directory was not taken.
enum class BlockFileFault { kTorn, kForeign };

// Reads and checks the file `path` (whose directory entry is `name`):
// DataLoss for a torn file (short, wrong length, payload checksum), and
// InvalidArgument for a foreign one (magic, version, header checksum, a
// name that is not BlockFileName(url, block)); both name the file.
[[nodiscard]] absl::StatusOr<BlockFileInfo> ReadBlockFile(
    const std::string& path, absl::string_view name);

}  // namespace pinwheel::internal

#endif  // PINWHEEL_LOADER_STORAGE_CACHE_INTERNAL_BLOCK_FILE_H_
