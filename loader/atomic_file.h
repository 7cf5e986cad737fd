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

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace pinwheel {

// Renames `tmp` (written and fsync'ed by the caller, on the same filesystem)
// over `path`, then fsyncs the directory of `path`. A failed rename removes
// `tmp` and leaves `path` as it was; a failed directory sync is reported
// naming both (`path` then holds the new contents). Errors are errno
// statuses naming the paths.
[[nodiscard]] absl::Status PublishFile(const std::string& tmp,
                                       const std::string& path);

// Writes `bytes` to `path`.tmp (created, or truncated: a stale one left by a
// killed writer is overwritten), fsyncs and closes it, then PublishFile()s it
// over `path`. Errors name the file and the call that failed. Thread-safe
// for distinct paths; two writers of the same path at once share its .tmp
// and must be serialised by the caller.
[[nodiscard]] absl::Status WriteFileAtomically(const std::string& path,
                                               absl::string_view bytes);

}  // namespace pinwheel

#endif  // PINWHEEL_LOADER_ATOMIC_FILE_H_
