#include "loader/storage/local_file_store.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

#include "loader/internal/mapped_file.h"

namespace pinwheel {

absl::string_view LocalPathOf(absl::string_view url) {
  if (absl::StartsWith(url, "file://")) url.remove_prefix(7);
  return url;
}

absl::StatusOr<int64_t> LocalFileStore::Size(std::string_view std_url) {
  const absl::string_view url(std_url.data(), std_url.size());
  absl::StatusOr<internal::MappedFile> file =
      internal::MappedFile::OpenUnmapped(std::string(LocalPathOf(url)));
  if (!file.ok()) return file.status();
  return static_cast<int64_t>(file->size());
}

absl::Status LocalFileStore::Read(absl::Span<const RangeRead> reads) {
  std::optional<internal::MappedFile> file;  // unmapped: pread only
  for (const RangeRead& read : reads) {
    const std::string path(LocalPathOf(read.url));
    if (!file.has_value() || file->path() != path) {
      absl::StatusOr<internal::MappedFile> opened =
          internal::MappedFile::OpenUnmapped(path);
      if (!opened.ok()) return opened.status();
      file = *std::move(opened);
    }
    const auto size = static_cast<int64_t>(file->size());
    const auto length = static_cast<int64_t>(read.destination.size());
    if (read.offset < 0 || read.offset > size || length > size - read.offset) {
      return absl::OutOfRangeError(absl::StrCat(
          path, ": bytes [", read.offset, ", ", read.offset + length,
          ") reach past the file's end (it has ", size, " bytes)"));
    }
    if (length == 0) continue;
    const absl::Span<std::byte> parts[] = {read.destination};
    if (absl::Status s = file->ReadInto(static_cast<uint64_t>(read.offset),
                                        parts, "bytes at offset", read.offset);
        !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

}  // namespace pinwheel
