// Replacing a file so that a crash or a kill leaves the old or the new
// contents whole, never a mix: write a temporary file beside it, fsync it,
// rename() it over the old one (one atomic step), then fsync the directory
// so that the rename itself survives a power loss. RecordFileWriter
// publishes its files this way; WriteFileAtomically() does it for a buffer
// you hold, such as a model and its LoaderCheckpoint::ToBytes().
//
// Example:
//   PINWHEEL_ASSIGN_OR_RETURN(LoaderCheckpoint position, loader.Checkpoint());
//   PINWHEEL_RETURN_IF_ERROR(
//       WriteFileAtomically("ckpt/loader.bin", position.ToBytes()));
#ifndef PINWHEEL_LOADER_ATOMIC_FILE_H_
#define PINWHEEL_LOADER_ATOMIC_FILE_H_

#include <string>
#include <sys/types.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace pinwheel {

// Renames `tmp` (written and fsync'ed by the caller, on the same filesystem)
// over `path`, then fsyncs the directory of `path`. A failed rename removes
// `tmp` and leaves `path` as it was; a failed directory sync is reported
// naming both (`path` then holds the new contents). Errors are errno
// statuses naming the paths.
[[nodiscard]] absl::Status PublishFile(const std::string& tmp,
                                       const std::string& path);

// Writes `bytes` to a new temporary file beside `path`
// (`path`.tmp-<pid>-<n>, created exclusively: O_CREAT|O_EXCL|O_NOFOLLOW, so
// never through a symbolic or hard link left at that name), fsyncs and
// closes it, then PublishFile()s it over `path`. On any failure the
// temporary file is removed and `path` keeps what it held; errors name the
// file and the call that failed. A writer killed mid-way leaves its
// temporary file behind (never reused; remove it at will); a stale
// `path`.tmp left by an earlier version is unlinked after a successful
// write, never opened. Thread-safe: two writers of the same path at once
// each publish a whole file, the last rename wins.
[[nodiscard]] absl::Status WriteFileAtomically(const std::string& path,
                                               absl::string_view bytes);

namespace internal {

// A temporary file created for writing: its descriptor and its name.
struct TemporaryFile {
  int fd = -1;
  std::string path;
};

// Creates a new file `path`.tmp-<pid>-<n> (a process-wide counter) with
// O_CREAT|O_EXCL|O_NOFOLLOW|O_CLOEXEC and `mode` less the umask, trying
// further names while one exists. Errors are errno statuses naming `path`
// and the temporary file. Used by WriteFileAtomically and RecordFileWriter.
[[nodiscard]] absl::StatusOr<TemporaryFile> CreateTemporaryFileBeside(
    const std::string& path, mode_t mode);

}  // namespace internal

}  // namespace pinwheel

#endif  // PINWHEEL_LOADER_ATOMIC_FILE_H_
