#include "transfer/jpeg/jpeg_framing.h"

#include <cstddef>

#include "absl/strings/str_cat.h"

namespace pinwheel::internal {
namespace {

constexpr uint8_t kMarker = 0xFF;
constexpr uint8_t kSoi = 0xD8;
constexpr uint8_t kEoi = 0xD9;
constexpr uint8_t kSos = 0xDA;
constexpr uint8_t kTem = 0x01;
constexpr uint8_t kRst0 = 0xD0;
constexpr uint8_t kRst7 = 0xD7;

// Returns whether an FF D9 pair starts at or after `from`.
// Searched from the end: the marker is normally in the last two bytes, so
// a whole file is not read byte by byte on the transfer thread (a forward
// scan cost about 0.1 ms an image of 100 KB).
bool HasEndMarkerFrom(absl::Span<const uint8_t> jpeg, size_t from) {
  for (size_t i = jpeg.size(); i >= from + 2; --i) {
    if (jpeg[i - 2] == kMarker && jpeg[i - 1] == kEoi) return true;
  }
  return false;
}

}  // namespace

absl::Status CheckJpegFraming(absl::Span<const uint8_t> jpeg) {
  if (jpeg.size() < 4 || jpeg[0] != kMarker || jpeg[1] != kSoi) {
    return absl::InvalidArgumentError(absl::StrCat(
        "not a JPEG: ", jpeg.size(),
        " bytes that do not start with the start-of-image marker FF D8"));
  }
  const auto truncated = [&] {
    return absl::InvalidArgumentError(
        absl::StrCat("JPEG data ends at byte ", jpeg.size(),
                     " before its first scan (truncated)"));
  };
  size_t pos = 2;
  while (true) {
    if (pos >= jpeg.size()) return truncated();
    if (jpeg[pos] != kMarker) {
      return absl::InvalidArgumentError(
          absl::StrCat("corrupt JPEG: byte ", pos, " is 0x",
                       absl::Hex(jpeg[pos], absl::kZeroPad2),
                       " where a marker (FF xx) must start"));
    }
    while (pos < jpeg.size() && jpeg[pos] == kMarker) ++pos;  // fill bytes
    if (pos >= jpeg.size()) return truncated();
    const uint8_t marker = jpeg[pos++];
    if (marker == kEoi) {
      return absl::InvalidArgumentError(
          absl::StrCat("corrupt JPEG: end-of-image marker at byte ", pos - 2,
                       " before any scan"));
    }
    if (marker == kTem || (marker >= kRst0 && marker <= kRst7)) continue;
    if (pos + 2 > jpeg.size()) return truncated();
    const size_t length = (size_t{jpeg[pos]} << 8) | jpeg[pos + 1];
    if (length < 2 || pos + length > jpeg.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("JPEG data ends at byte ", jpeg.size(),
                       " inside the segment of marker FF ",
                       absl::Hex(marker, absl::kZeroPad2), " at byte ", pos - 2,
                       " (length ", length, "; truncated or corrupt)"));
    }
    pos += length;
    if (marker == kSos) {
      if (HasEndMarkerFrom(jpeg, pos)) return absl::OkStatus();
      return absl::InvalidArgumentError(absl::StrCat(
          "JPEG data ends at byte ", jpeg.size(),
          " without the end-of-image marker FF D9 after its scan (truncated)"));
    }
  }
}

}  // namespace pinwheel::internal
