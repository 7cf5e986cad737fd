// How HttpTransport judges a response and paces its retries: which
// failures are transient, the Status code of an HTTP status, the gist of an
// error body, the backoff's jitter, and the Range / Content-Range headers.
// Thread-safe (pure functions).
#ifndef PINWHEEL_LOADER_STORAGE_INTERNAL_HTTP_RESPONSE_H_
#define PINWHEEL_LOADER_STORAGE_INTERNAL_HTTP_RESPONSE_H_

#include <cstdint>
#include <curl/curl.h>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace pinwheel::internal {

// Whether a transfer that failed with `rc` may succeed when tried again
// (connection refused or reset, timeouts, a body cut short).
bool IsTransient(CURLcode rc);

// Whether HTTP `status` asks to try again (429, 500, 502, 503, 504).
bool IsTransientStatus(long status);  // NOLINT(runtime/int)

// The Status code for HTTP `status`: 404 NotFound, 401/403
// PermissionDenied, 416 OutOfRange, 400 InvalidArgument, transient ones
// Unavailable, others Unknown.
absl::StatusCode CodeOfStatus(long status);  // NOLINT(runtime/int)

// The S3 error code of an XML error body (<Code>SlowDown</Code>), or the
// body's start on one line.
std::string ErrorBodySummary(const std::string& body);

// A uniform draw in [0, 1): a pure function of its arguments.
double JitterDraw(uint64_t seed, const std::string& url, int64_t offset,
                  int attempt);

// Returns "bytes=<first>-<last>" for [offset, offset + length).
// REQUIRES: length >= 1.
std::string RangeHeaderValue(int64_t offset, int64_t length);

// Parses a Content-Range value ("bytes 0-99/1234" or "bytes */1234") and
// returns the total (1234), or -1 when absent or unknown ("*").
int64_t ContentRangeTotal(absl::string_view value);

}  // namespace pinwheel::internal

#endif  // PINWHEEL_LOADER_STORAGE_INTERNAL_HTTP_RESPONSE_H_
