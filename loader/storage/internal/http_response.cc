#include "loader/storage/internal/http_response.h"

#include <cstdint>
#include <curl/curl.h>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace pinwheel::internal {

bool IsTransient(CURLcode rc) {
  switch (rc) {
    case CURLE_COULDNT_CONNECT:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
    case CURLE_PARTIAL_FILE:
    case CURLE_GOT_NOTHING:
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
      return true;
    default:
      return false;
  }
}

bool IsTransientStatus(long status) {  // NOLINT(runtime/int)
  return status == 429 || status == 500 || status == 502 || status == 503 ||
         status == 504;
}

absl::StatusCode CodeOfStatus(long status) {  // NOLINT(runtime/int)
  switch (status) {
    case 404:
      return absl::StatusCode::kNotFound;
    case 401:
    case 403:
      return absl::StatusCode::kPermissionDenied;
    case 416:
      return absl::StatusCode::kOutOfRange;
    case 400:
      return absl::StatusCode::kInvalidArgument;
    default:
      return IsTransientStatus(status) ? absl::StatusCode::kUnavailable
                                       : absl::StatusCode::kUnknown;
  }
}

std::string ErrorBodySummary(const std::string& body) {
  const size_t open = body.find("<Code>");
  if (open != std::string::npos) {
    const size_t close = body.find("</Code>", open);
    if (close != std::string::npos) {
      return body.substr(open + 6, close - open - 6);
    }
  }
  std::string text(absl::StripAsciiWhitespace(body.substr(0, 160)));
  for (char& c : text) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return text;
}

// FNV-1a, then splitmix64's finaliser.
double JitterDraw(uint64_t seed, const std::string& url, int64_t offset,
                  int attempt) {
  uint64_t h = 1469598103934665603ull ^ seed;
  for (unsigned char c : url) h = (h ^ c) * 1099511628211ull;
  h ^= static_cast<uint64_t>(offset) * 0x9e3779b97f4a7c15ull;
  h ^= static_cast<uint64_t>(attempt) << 56;
  h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ull;
  h = (h ^ (h >> 27)) * 0x94d049bb133111ebull;
  h ^= h >> 31;
  return static_cast<double>(h >> 11) * 0x1.0p-53;
}

std::string RangeHeaderValue(int64_t offset, int64_t length) {
  return absl::StrCat("bytes=", offset, "-", offset + length - 1);
}

int64_t ContentRangeTotal(absl::string_view value) {
  const size_t slash = value.rfind('/');
  if (slash == absl::string_view::npos) return -1;
  int64_t total = -1;
  if (!absl::SimpleAtoi(value.substr(slash + 1), &total)) return -1;
  return total;
}

}  // namespace pinwheel::internal
