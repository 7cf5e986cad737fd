// CheckJpegFraming: a cheap host-side check that a byte string is framed as
// one JPEG image (start-of-image marker, well-formed marker segments up to
// the first scan, an end-of-image marker after it). The GPU decoder runs it
// on every sample before handing the sample to nvJPEG, because nvJPEG's
// hardware backend decodes a truncated stream without an error (the missing
// rows come out as garbage); a check here turns that into a Status naming
// what is wrong, as libjpeg-turbo's "premature end of data" would.
//
// It is no validator: the entropy-coded data is not decoded. It costs one
// memchr-style scan for the end marker after the first scan header.
//
// Example:
//   absl::Status framed = CheckJpegFraming(bytes);
//   if (!framed.ok()) return framed;  // "JPEG data ends at byte 812 ..."
//
// Thread-safe: a pure function.
#ifndef PINWHEEL_TRANSFER_JPEG_JPEG_FRAMING_H_
#define PINWHEEL_TRANSFER_JPEG_JPEG_FRAMING_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/types/span.h"

namespace pinwheel::internal {

// Returns OK when `jpeg` starts with the SOI marker (FF D8), its marker
// segments before the first start-of-scan (FF DA) are complete, and an EOI
// marker (FF D9) follows that scan header somewhere; else InvalidArgument
// saying which rule failed and at which byte offset. Segments before the
// first scan are walked by their lengths, so an embedded EXIF thumbnail's
// own end marker does not count.
absl::Status CheckJpegFraming(absl::Span<const uint8_t> jpeg);

}  // namespace pinwheel::internal

#endif  // PINWHEEL_TRANSFER_JPEG_JPEG_FRAMING_H_
