// LocalFileStore: objects that are local files, named by their path (or a
// file:// URL). Read() opens each file once per call and reads with
// pread(2), never through a memory map: a file truncated in place while it
// is read is DataLoss naming the file and the byte range, never SIGBUS
// (Note [mapping hazard] in loader/internal/mapped_file.h). Replace files
// by rename.
//
// Example:
//   LocalFileStore store;
//   PINWHEEL_ASSIGN_OR_RETURN(int64_t size, store.Size("/data/shard-000.tar"));
//
// Thread-safe (holds no state).
#ifndef PINWHEEL_LOADER_STORAGE_LOCAL_FILE_STORE_H_
#define PINWHEEL_LOADER_STORAGE_LOCAL_FILE_STORE_H_

#include <cstdint>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

#include "loader/storage/object_store.h"

namespace pinwheel {

class LocalFileStore final : public ObjectStore {
 public:
  // NotFound / PermissionDenied naming the path; InvalidArgument naming its
  // type when it is not a regular file.
  absl::StatusOr<int64_t> Size(std::string_view url) override;
  // Reads in the calling thread, file by file.
  absl::Status Read(absl::Span<const RangeRead> reads) override;
};

// Returns `url` without a leading "file://" (a local path as it is).
absl::string_view LocalPathOf(absl::string_view url);

}  // namespace pinwheel

#endif  // PINWHEEL_LOADER_STORAGE_LOCAL_FILE_STORE_H_
