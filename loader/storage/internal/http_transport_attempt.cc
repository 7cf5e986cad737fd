#include "loader/storage/internal/http_transport_attempt.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <curl/curl.h>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

#include "loader/storage/internal/http_response.h"

namespace pinwheel::internal {
namespace {

constexpr size_t kErrorBodyBytes = 1024;

size_t OnHeader(char* data, size_t size, size_t count, void* user) {
  auto* t = static_cast<HttpTransfer*>(user);
  const size_t bytes = size * count;
  const absl::string_view line(data, bytes);
  if (absl::StartsWith(line, "HTTP/")) {  // a new response (redirect, 100)
    t->content_range.clear();
    t->status = 0;
  } else if (absl::StartsWithIgnoreCase(line, "content-range:")) {
    t->content_range = std::string(absl::StripAsciiWhitespace(line.substr(14)));
  }
  return bytes;
}

// See Note [straight into the destination] in http_transport.h.
size_t OnBody(char* data, size_t size, size_t count, void* user) {
  auto* t = static_cast<HttpTransfer*>(user);
  size_t left = size * count;
  const size_t bytes = left;
  if (t->batch->failed.load(std::memory_order_relaxed)) return 0;  // abort
  if (t->status == 0)
    curl_easy_getinfo(t->easy, CURLINFO_RESPONSE_CODE, &t->status);
  if (t->status != 200 && t->status != 206) {
    const size_t keep =
        std::min(left, kErrorBodyBytes -
                           std::min(kErrorBodyBytes, t->error_body.size()));
    t->error_body.append(data, keep);
    return bytes;
  }
  if (t->status == 200 && t->skipped < t->offset) {
    // The server ignored the Range header and sends the whole object.
    const auto skip = static_cast<size_t>(
        std::min<int64_t>(static_cast<int64_t>(left), t->offset - t->skipped));
    t->skipped += static_cast<int64_t>(skip);
    data += skip;
    left -= skip;
  }
  const size_t room = t->destination.size() - t->written;
  if (left > room) {
    if (t->status == 206) {
      t->overflow = true;
      return 0;
    }
    std::memcpy(t->destination.data() + t->written, data, room);
    t->written += room;
    t->filled_from_whole_body = true;
    return 0;  // ours is complete; the rest of the object is not wanted
  }
  std::memcpy(t->destination.data() + t->written, data, left);
  t->written += left;
  return bytes;
}

}  // namespace

void PrepareAttempt(HttpTransfer& t, CURL* easy, const StoreOptions& options) {
  ++t.attempt;
  t.easy = easy;
  t.status = 0;
  t.written = 0;
  t.skipped = 0;
  t.filled_from_whole_body = false;
  t.overflow = false;
  t.content_range.clear();
  t.error_body.clear();
  t.error_text[0] = '\0';
  curl_easy_setopt(easy, CURLOPT_URL, t.url.c_str());
  curl_easy_setopt(easy, CURLOPT_PRIVATE, &t);
  curl_easy_setopt(easy, CURLOPT_ERRORBUFFER, t.error_text);
  curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(easy, CURLOPT_HTTP_VERSION, CURL_HTTP_VERSION_1_1);
  curl_easy_setopt(easy, CURLOPT_FOLLOWLOCATION, 1L);
  curl_easy_setopt(easy, CURLOPT_MAXREDIRS, 5L);
  curl_easy_setopt(easy, CURLOPT_TCP_KEEPALIVE, 1L);
  curl_easy_setopt(easy, CURLOPT_CONNECTTIMEOUT_MS,
                   static_cast<long>(  // NOLINT(runtime/int)
                       absl::ToInt64Milliseconds(options.connect_timeout)));
  curl_easy_setopt(easy, CURLOPT_TIMEOUT_MS,
                   static_cast<long>(  // NOLINT(runtime/int)
                       absl::ToInt64Milliseconds(options.request_timeout)));
  curl_easy_setopt(easy, CURLOPT_BUFFERSIZE,
                   static_cast<long>(  // NOLINT(runtime/int)
                       options.receive_buffer_bytes));
  if (!options.verify_tls) {
    curl_easy_setopt(easy, CURLOPT_SSL_VERIFYPEER, 0L);
    curl_easy_setopt(easy, CURLOPT_SSL_VERIFYHOST, 0L);
  }
  curl_easy_setopt(easy, CURLOPT_HEADERFUNCTION, OnHeader);
  curl_easy_setopt(easy, CURLOPT_HEADERDATA, &t);
  curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, OnBody);
  curl_easy_setopt(easy, CURLOPT_WRITEDATA, &t);
  const HttpSigning& signing = *t.batch->signing;
  curl_slist* headers = nullptr;
  if (t.head) {
    curl_easy_setopt(easy, CURLOPT_NOBODY, 1L);
  } else {
    headers = curl_slist_append(
        headers,
        absl::StrCat("Range: ",
                     RangeHeaderValue(
                         t.offset, static_cast<int64_t>(t.destination.size())))
            .c_str());
  }
  for (const std::string& header : signing.headers) {
    headers = curl_slist_append(headers, header.c_str());
  }
  if (!signing.aws_sigv4.empty()) {
    curl_easy_setopt(easy, CURLOPT_AWS_SIGV4, signing.aws_sigv4.c_str());
    curl_easy_setopt(easy, CURLOPT_USERNAME, signing.username.c_str());
    curl_easy_setopt(easy, CURLOPT_PASSWORD, signing.password.c_str());
  }
  t.headers = headers;
  curl_easy_setopt(easy, CURLOPT_HTTPHEADER, headers);
}

AttemptVerdict JudgeAttempt(HttpTransfer& t, CURLcode rc,
                            long status,  // NOLINT(runtime/int)
                            curl_off_t content_length,
                            const StoreOptions& options) {
  const int64_t want = static_cast<int64_t>(t.destination.size());
  std::string what;
  absl::StatusCode code = absl::StatusCode::kUnavailable;
  bool transient = false;
  if (rc != CURLE_OK && !t.filled_from_whole_body) {
    if (t.overflow) {
      what = "the server sent more bytes than the range asked for";
      code = absl::StatusCode::kDataLoss;
    } else {
      what = absl::StrCat("libcurl: ", t.error_text[0] != '\0'
                                           ? t.error_text
                                           : curl_easy_strerror(rc));
      transient = IsTransient(rc);
      if (rc == CURLE_OPERATION_TIMEDOUT) {
        code = absl::StatusCode::kDeadlineExceeded;
      }
    }
  } else if (t.head) {
    if (status >= 200 && status < 300 && content_length >= 0) {
      t.content_length = content_length;
      return {.status = absl::OkStatus()};
    }
    if (status >= 200 && status < 300) {
      what = "the response has no Content-Length";
      code = absl::StatusCode::kUnknown;
    } else {
      what = "the HEAD failed";
      code = CodeOfStatus(status);
      transient = IsTransientStatus(status);
    }
  } else if (status == 200 || status == 206) {
    if (static_cast<int64_t>(t.written) == want) {
      return {.status = absl::OkStatus()};
    }
    const int64_t total =
        status == 206 ? ContentRangeTotal(t.content_range) : content_length;
    if (total >= 0 && t.offset + want > total) {
      return {.status = absl::OutOfRangeError(absl::StrCat(
                  "GET ", t.name, " bytes [", t.offset, ", ", t.offset + want,
                  "): the range reaches past the object's end (the object has ",
                  total, " bytes) (HTTP ", status, ")"))};
    }
    what = absl::StrCat("short body: ", t.written, " of ", want, " bytes");
    transient = true;
  } else if (status == 416) {
    const int64_t total = ContentRangeTotal(t.content_range);
    return {.status = absl::OutOfRangeError(absl::StrCat(
                "GET ", t.name, " bytes [", t.offset, ", ", t.offset + want,
                "): the range reaches past the object's end (the object has ",
                total >= 0 ? absl::StrCat(total) : "an unknown number of",
                " bytes) (HTTP 416)"))};
  } else {
    what = "the server refused";
    code = CodeOfStatus(status);
    transient = IsTransientStatus(status);
  }
  if (!t.error_body.empty()) {
    absl::StrAppend(&what, ": ", ErrorBodySummary(t.error_body));
  }
  if (transient && t.attempt < options.max_attempts) {
    const double backoff_ms =
        std::min(absl::ToDoubleMilliseconds(options.initial_backoff) *
                     std::ldexp(1.0, t.attempt - 1),
                 absl::ToDoubleMilliseconds(options.max_backoff));
    const double draw =
        JitterDraw(options.jitter_seed, t.url, t.offset, t.attempt);
    t.retry_at =
        absl::Now() + absl::Milliseconds(backoff_ms * (0.5 + 0.5 * draw));
    return {.retry = true};
  }
  std::string message = t.head
                            ? absl::StrCat("HEAD ", t.name)
                            : absl::StrCat("GET ", t.name, " bytes [", t.offset,
                                           ", ", t.offset + want, ")");
  if (t.name != t.url) absl::StrAppend(&message, " (", t.url, ")");
  absl::StrAppend(&message, ": ", what);
  if (status != 0) absl::StrAppend(&message, " (HTTP ", status, ")");
  absl::StrAppend(&message, " after ", t.attempt,
                  t.attempt == 1 ? " attempt" : " attempts");
  if (transient) {
    absl::StrAppend(&message, " (max_attempts = ", options.max_attempts, ")");
  }
  return {.status = absl::Status(code, message)};
}

}  // namespace pinwheel::internal
