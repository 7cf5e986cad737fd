// One request of HttpTransport and its attempts: what a request carries
// (HttpTransfer), how an attempt is set up on a libcurl easy handle with its
// header and body callbacks (PrepareAttempt), and what a finished attempt
// comes to: done, failed with a Status naming the request, or to be tried
// again after a backoff (JudgeAttempt). HttpTransport's engine
// (http_transport.cc) only schedules: it hands out easy handles, runs them
// on its multi handle and records outcomes.
//
// Example (on the I/O thread):
//   PrepareAttempt(*t, easy, options);
//   curl_multi_add_handle(multi, easy);
//   ... CURLMSG_DONE with `rc`, the response code and Content-Length read ...
//   AttemptVerdict verdict = JudgeAttempt(*t, rc, code, length, options);
//   if (verdict.retry) { /* again at t->retry_at */ } else { /* done */ }
#ifndef PINWHEEL_LOADER_STORAGE_INTERNAL_HTTP_TRANSPORT_ATTEMPT_H_
#define PINWHEEL_LOADER_STORAGE_INTERNAL_HTTP_TRANSPORT_ATTEMPT_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <curl/curl.h>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"

#include "loader/storage/internal/http_transport.h"
#include "loader/storage/store_options.h"

namespace pinwheel::internal {

// One Get() or Head() call: its requests count down `remaining`.
// Thread-safe: the members under `mu` are guarded by it, `failed` is atomic.
struct HttpBatch {
  const HttpSigning* signing = nullptr;
  absl::Mutex mu;
  int remaining ABSL_GUARDED_BY(mu) = 0;
  absl::Status first_error ABSL_GUARDED_BY(mu);
  // Set with first_error: requests not yet started are not started, and
  // running ones stop at their next write.
  std::atomic<bool> failed{false};
};

// One HTTP request and its attempts. Owned by the caller of Get()/Head();
// touched by the I/O thread only between Submit and its completion.
// Not thread-safe: one thread at a time, as that hand-over says.
struct HttpTransfer {
  HttpBatch* batch = nullptr;
  std::string url;
  std::string name;  // how errors name the object
  int64_t offset = 0;
  absl::Span<std::byte> destination;
  bool head = false;
  int64_t content_length = -1;  // a HEAD's result
  int attempt = 0;              // attempts started
  absl::Time retry_at;
  // The running attempt (reset by PrepareAttempt()).
  CURL* easy = nullptr;
  curl_slist* headers = nullptr;
  long status = 0;  // NOLINT(runtime/int): libcurl's type
  size_t written = 0;
  int64_t skipped = 0;  // bytes of a 200 (whole object) body before offset
  bool filled_from_whole_body = false;
  bool overflow = false;
  std::string content_range;
  std::string error_body;  // the first KiB of a non-2xx body
  char error_text[CURL_ERROR_SIZE] = {};
};

// Starts attempt `t.attempt + 1` of `t` on `easy` (fresh or reset by the
// caller): resets the attempt's state, sets the URL, timeouts, TLS, the
// callbacks that write the body into `t.destination`, the Range header and
// `t.batch->signing`'s headers and SigV4. The headers list is `t.headers`,
// for the caller to free (curl_slist_free_all) when the attempt is done.
// REQUIRES: `easy` is not in a multi handle; `t.batch->signing` set.
void PrepareAttempt(HttpTransfer& t, CURL* easy, const StoreOptions& options);

// What a finished attempt comes to.
struct AttemptVerdict {
  // Tried again at t.retry_at (set by JudgeAttempt); `status` unused.
  bool retry = false;
  // Otherwise the request's outcome: OK (a HEAD's size in
  // t.content_length), or the failure naming the request, the range, the
  // HTTP status and the attempts.
  absl::Status status;
};

// Judges the attempt of `t` that ended with libcurl's `rc`, HTTP `status`
// and `content_length` (-1 when unknown): a transient failure with attempts
// left is retried after a jittered exponential backoff (options'
// initial_backoff, max_backoff, jitter_seed, max_attempts).
// REQUIRES: the attempt's easy handle is done (its callbacks ran).
AttemptVerdict JudgeAttempt(HttpTransfer& t, CURLcode rc,
                            long status,  // NOLINT(runtime/int)
                            curl_off_t content_length,
                            const StoreOptions& options);

}  // namespace pinwheel::internal

#endif  // PINWHEEL_LOADER_STORAGE_INTERNAL_HTTP_TRANSPORT_ATTEMPT_H_
