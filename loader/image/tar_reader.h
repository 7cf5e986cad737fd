// A bounds-checked reader of tar archives (POSIX ustar, GNU long names,
// pax path records) held in memory or read from a file (TarSource). It
// walks the members' headers; the data stays where it is.
//
// Example:
//   uint64_t offset = 0;
//   for (;;) {
//     PINWHEEL_ASSIGN_OR_RETURN(std::optional<TarMember> m,
//                               ReadTarMember(bytes, offset, path));
//     if (!m.has_value()) break;  // the end of the archive
//     Use(m->name, bytes.subspan(m->data_offset, m->size));
//     offset = m->next_offset;
//   }
//
// Every fault is DataLoss naming the archive (the `archive` argument), the
// byte offset and, where known, the member: a header cut short, a bad
// header checksum, a size field that is not a number or that runs past the
// end of the archive, a long-name or pax record that does not parse.
// Nothing is read outside the span. Thread-safe (pure functions).
#ifndef PINWHEEL_LOADER_IMAGE_TAR_READER_H_
#define PINWHEEL_LOADER_IMAGE_TAR_READER_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace pinwheel {

inline constexpr uint64_t kTarBlockBytes = 512;

// One member of a tar archive.
struct TarMember {
  std::string name;            // its path: ustar prefix/name, or the long name
  char type = '0';             // the typeflag: '0' (or '\0') a regular file
  uint64_t header_offset = 0;  // of its first header (a long-name one too)
  uint64_t data_offset = 0;    // of its data
  uint64_t size = 0;           // of its data, bytes
  uint64_t next_offset = 0;    // of the next member's header

  bool is_regular_file() const { return type == '0' || type == '\0'; }
};

// Where ReadTarMember reads an archive's bytes from: bytes in memory, or a
// file read with pread (TarShardDataset: Note [mapping hazard] in
// loader/internal/mapped_file.h).
class TarSource {
 public:
  virtual ~TarSource() = default;
  // The archive's size in bytes.
  virtual uint64_t size() const = 0;
  // Reads bytes [offset, offset + out.size()) into `out`, or a Status (a
  // file truncated since size() was taken: DataLoss naming it and the
  // range). REQUIRES: the range is within [0, size()).
  [[nodiscard]] virtual absl::Status Read(uint64_t offset,
                                          absl::Span<std::byte> out) const = 0;
};

// As the span overload below, reading `tar` through its Read(): headers
// (512 bytes each) and long-name or pax records, never a member's data.
// A failed Read() is returned as it is.
[[nodiscard]] absl::StatusOr<std::optional<TarMember>> ReadTarMember(
    const TarSource& tar, uint64_t offset, absl::string_view archive);

// Returns the member whose header starts at `offset` of `tar`, or nullopt
// at the end of the archive (a zero block, or `offset` == tar.size()), or
// DataLoss (see the file comment). GNU long-name ('L') and pax ('x')
// headers are consumed and give the next member its name; pax global
// headers ('g') and long link names ('K') are skipped.
// REQUIRES: offset is tar.size() or a multiple of kTarBlockBytes
// (InvalidArgument else); a member's next_offset always is.
[[nodiscard]] absl::StatusOr<std::optional<TarMember>> ReadTarMember(
    absl::Span<const std::byte> tar, uint64_t offset,
    absl::string_view archive);

}  // namespace pinwheel

#endif  // PINWHEEL_LOADER_IMAGE_TAR_READER_H_
