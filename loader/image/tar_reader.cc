#include "loader/image/tar_reader.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace pinwheel {
namespace {

// The fields of a ustar header block used here (offset, length).
constexpr size_t kNameAt = 0, kNameLength = 100;
constexpr size_t kSizeAt = 124, kSizeLength = 12;
constexpr size_t kChecksumAt = 148, kChecksumLength = 8;
constexpr size_t kTypeAt = 156;
constexpr size_t kMagicAt = 257;
constexpr size_t kPrefixAt = 345, kPrefixLength = 155;

// At most this many extension headers ('L', 'K', 'x', 'g') before a member:
// a chain of them is a corrupt (or hostile) archive.
constexpr int kMaxExtensionHeaders = 16;
// A long name or pax record larger than this is refused.
constexpr uint64_t kMaxExtensionBytes = 1 << 20;

uint8_t At(absl::Span<const std::byte> block, size_t i) {
  return static_cast<uint8_t>(block[i]);
}

// A NUL-terminated (or full-length) string field.
absl::string_view Field(absl::Span<const std::byte> block, size_t at,
                        size_t length) {
  const char* p = reinterpret_cast<const char*>(block.data() + at);
  size_t n = 0;
  while (n < length && p[n] != '\0') ++n;
  return absl::string_view(p, n);
}

// Parses a numeric field: octal digits (leading spaces, trailing spaces or
// NULs), or GNU's base-256 (high bit of the first byte set, positive only).
std::optional<uint64_t> Number(absl::Span<const std::byte> block, size_t at,
                               size_t length) {
  if ((At(block, at) & 0x80) != 0) {
    if ((At(block, at) & 0x40) != 0) return std::nullopt;  // negative
    uint64_t value = At(block, at) & 0x3f;
    for (size_t i = 1; i < length; ++i) {
      if (value > (UINT64_MAX >> 8)) return std::nullopt;
      value = (value << 8) | At(block, at + i);
    }
    return value;
  }
  size_t i = 0;
  while (i < length && At(block, at + i) == ' ') ++i;
  uint64_t value = 0;
  bool digits = false;
  for (; i < length; ++i) {
    const uint8_t c = At(block, at + i);
    if (c < '0' || c > '7') break;
    if (value > (UINT64_MAX >> 3)) return std::nullopt;
    value = value * 8 + (c - '0');
    digits = true;
  }
  for (; i < length; ++i) {
    const uint8_t c = At(block, at + i);
    if (c != ' ' && c != '\0') return std::nullopt;
  }
  if (!digits) return std::nullopt;
  return value;
}

bool IsZeroBlock(absl::Span<const std::byte> block) {
  for (std::byte b : block) {
    if (b != std::byte{0}) return false;
  }
  return true;
}

// The header's checksum: the sum of its bytes with the checksum field read
// as spaces, unsigned (POSIX) or, as some old tars wrote it, signed.
bool ChecksumMatches(absl::Span<const std::byte> block, uint64_t stored) {
  int64_t unsigned_sum = 0;
  int64_t signed_sum = 0;
  for (size_t i = 0; i < kTarBlockBytes; ++i) {
    const bool in_field = i >= kChecksumAt && i < kChecksumAt + kChecksumLength;
    const uint8_t b = in_field ? ' ' : At(block, i);
    unsigned_sum += b;
    signed_sum += static_cast<int8_t>(b);
  }
  return static_cast<int64_t>(stored) == unsigned_sum ||
         static_cast<int64_t>(stored) == signed_sum;
}

// Returns the "path" value of pax extended header records ("%d path=...\n"
// each), or nullopt when there is none; DataLoss text in *error when a
// record does not parse.
std::optional<std::string> PaxPath(absl::string_view records,
                                   std::string* error) {
  std::optional<std::string> path;
  while (!records.empty()) {
    const size_t space = records.find(' ');
    uint64_t length = 0;
    if (space == absl::string_view::npos ||
        !absl::SimpleAtoi(records.substr(0, space), &length) ||
        length <= space + 1 || length > records.size() ||
        records[length - 1] != '\n') {
      *error = "a pax record does not parse";
      return std::nullopt;
    }
    const absl::string_view record =
        records.substr(space + 1, length - space - 2);
    const size_t equals = record.find('=');
    if (equals == absl::string_view::npos) {
      *error = "a pax record has no '='";
      return std::nullopt;
    }
    if (record.substr(0, equals) == "path") {
      path = std::string(record.substr(equals + 1));
    }
    records.remove_prefix(length);
  }
  return path;
}

// The span overload's source: bytes in memory.
class SpanSource : public TarSource {
 public:
  explicit SpanSource(absl::Span<const std::byte> bytes) : bytes_(bytes) {}
  uint64_t size() const override { return bytes_.size(); }
  absl::Status Read(uint64_t offset, absl::Span<std::byte> out) const override {
    std::memcpy(out.data(), bytes_.data() + offset, out.size());
    return absl::OkStatus();
  }

 private:
  absl::Span<const std::byte> bytes_;
};

}  // namespace

absl::StatusOr<std::optional<TarMember>> ReadTarMember(
    absl::Span<const std::byte> tar, uint64_t offset,
    absl::string_view archive) {
  return ReadTarMember(SpanSource(tar), offset, archive);
}

absl::StatusOr<std::optional<TarMember>> ReadTarMember(
    const TarSource& tar, uint64_t offset, absl::string_view archive) {
  const uint64_t tar_size = tar.size();
  if (offset == tar_size) {
    return std::nullopt;  // ends without end-of-archive blocks: accepted
  }
  if (offset % kTarBlockBytes != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("tar ", archive, ": offset ", offset,
                     " is not a multiple of ", kTarBlockBytes));
  }
  const uint64_t first_header = offset;
  std::optional<std::string> long_name;
  std::byte header[kTarBlockBytes];
  const absl::Span<const std::byte> block(header, kTarBlockBytes);
  for (int extensions = 0;; ++extensions) {
    if (offset > tar_size || tar_size - offset < kTarBlockBytes) {
      return absl::DataLossError(
          absl::StrCat("tar ", archive, ": the header at offset ", offset,
                       " is cut short (the archive has ", tar_size, " bytes)"));
    }
    if (absl::Status s = tar.Read(offset, absl::MakeSpan(header)); !s.ok()) {
      return s;
    }
    if (IsZeroBlock(block)) {
      if (offset != first_header) {
        return absl::DataLossError(absl::StrCat(
            "tar ", archive, ": an extension header at offset ", first_header,
            " is followed by the end of the archive, not a member"));
      }
      return std::nullopt;
    }
    const absl::string_view raw_name = Field(block, kNameAt, kNameLength);
    const std::optional<uint64_t> checksum =
        Number(block, kChecksumAt, kChecksumLength);
    if (!checksum.has_value() || !ChecksumMatches(block, *checksum)) {
      return absl::DataLossError(absl::StrCat(
          "tar ", archive, ": bad header checksum at offset ", offset,
          " (member \"", raw_name, "\"): not a tar archive, or corrupt"));
    }
    const std::optional<uint64_t> size = Number(block, kSizeAt, kSizeLength);
    if (!size.has_value()) {
      return absl::DataLossError(absl::StrCat(
          "tar ", archive, ": member \"", raw_name, "\" at offset ", offset,
          ": the size field is not a number"));
    }
    const uint64_t data_offset = offset + kTarBlockBytes;
    if (*size > tar_size - data_offset) {
      return absl::DataLossError(absl::StrCat(
          "tar ", archive, ": member \"", raw_name, "\" at offset ", offset,
          " claims ", *size, " bytes, past the end of the archive (",
          tar_size - data_offset, " bytes left)"));
    }
    const uint64_t padded =
        (*size + kTarBlockBytes - 1) / kTarBlockBytes * kTarBlockBytes;
    // The data may end without its padding only at the very end.
    const uint64_t next = std::min<uint64_t>(data_offset + padded, tar_size);
    const char type = static_cast<char>(At(block, kTypeAt));
    if (type == 'L' || type == 'K' || type == 'x' || type == 'g') {
      if (extensions >= kMaxExtensionHeaders) {
        return absl::DataLossError(absl::StrCat(
            "tar ", archive, ": more than ", kMaxExtensionHeaders,
            " extension headers in a row at offset ", first_header));
      }
      if (*size > kMaxExtensionBytes) {
        return absl::DataLossError(absl::StrCat(
            "tar ", archive, ": the extension header at offset ", offset,
            " holds ", *size, " bytes, over ", kMaxExtensionBytes));
      }
      std::string data(static_cast<size_t>(*size), '\0');
      if (absl::Status s =
              tar.Read(data_offset,
                       absl::MakeSpan(reinterpret_cast<std::byte*>(data.data()),
                                      data.size()));
          !s.ok()) {
        return s;
      }
      if (type == 'L') {
        long_name = data.substr(0, data.find('\0'));
      } else if (type == 'x') {
        std::string error;
        std::optional<std::string> path = PaxPath(data, &error);
        if (!error.empty()) {
          return absl::DataLossError(absl::StrCat("tar ", archive,
                                                  ": the pax header at offset ",
                                                  offset, ": ", error));
        }
        if (path.has_value()) long_name = std::move(path);
      }
      offset = next;
      continue;
    }
    TarMember member;
    if (long_name.has_value()) {
      member.name = *std::move(long_name);
    } else {
      const bool ustar = std::memcmp(block.data() + kMagicAt, "ustar", 5) == 0;
      const absl::string_view prefix =
          ustar ? Field(block, kPrefixAt, kPrefixLength) : absl::string_view();
      member.name = prefix.empty() ? std::string(raw_name)
                                   : absl::StrCat(prefix, "/", raw_name);
    }
    member.type = type;
    member.header_offset = first_header;
    member.data_offset = data_offset;
    member.size = *size;
    member.next_offset = next;
    return member;
  }
}

}  // namespace pinwheel
