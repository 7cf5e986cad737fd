// HttpTransport: range GETs and HEADs over libcurl's multi interface, many
// in flight on one multi handle driven by one I/O thread (or several, each
// with its own handle: StoreOptions::io_threads), with retries,
// backoff and timeouts (StoreOptions). HttpStore and S3Store are thin
// layers over it (the URL, the headers, the signing). This file's engine
// schedules; one request's attempts (their libcurl setup, callbacks and
// the verdict on each: done, failed or retried) are
// http_transport_attempt.h's.
//
// Note [straight into the destination]: a GET's write callback copies each
// piece libcurl received into the caller's destination span at its place
// (no intermediate buffer). The callback runs on the I/O thread; the
// caller's thread waits on the batch's mutex, whose release by the I/O
// thread after the last write makes every write visible to it.
//
// Thread-safe: Get() and Head() may be called from many threads at once;
// each blocks its caller until its requests are finished.
#ifndef PINWHEEL_LOADER_STORAGE_INTERNAL_HTTP_TRANSPORT_H_
#define PINWHEEL_LOADER_STORAGE_INTERNAL_HTTP_TRANSPORT_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

#include "loader/storage/store_options.h"

namespace pinwheel::internal {

// How requests to one service are authenticated, shared by its requests.
struct HttpSigning {
  // libcurl's CURLOPT_AWS_SIGV4 parameter ("aws:amz:<region>:s3"), or
  // empty for no signing.
  std::string aws_sigv4;
  // The access key id and secret for SigV4.
  std::string username;
  std::string password;
  // Extra request headers ("Name: value").
  std::vector<std::string> headers;
};

// One range GET: `destination.size()` bytes of `url` from `offset`.
struct HttpRangeGet {
  std::string url;  // the HTTP(S) URL requested
  // How errors name the object (the s3:// URL for S3), empty = url.
  std::string name;
  int64_t offset = 0;
  absl::Span<std::byte> destination;
};

class HttpTransport {
 public:
  // Validates `options` (InvalidArgument naming the field) and starts the
  // I/O thread.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<HttpTransport>> Create(
      const StoreOptions& options);
  // Stops the I/O thread. REQUIRES: no Get() or Head() running.
  ~HttpTransport();
  HttpTransport(const HttpTransport&) = delete;
  HttpTransport& operator=(const HttpTransport&) = delete;

  // Runs every GET of `gets` (each split into requests of at most
  // max_request_bytes), retrying as the options say; returns when all have
  // finished: OK, or the first failure naming the URL, the byte range, the
  // attempts and the HTTP status. After a failure, requests not yet
  // started are not started. `signing` must outlive the call.
  [[nodiscard]] absl::Status Get(absl::Span<const HttpRangeGet> gets,
                                 const HttpSigning& signing);

  // Returns the object's size from a HEAD's Content-Length, or NotFound
  // (404), PermissionDenied (401, 403) or the failure, naming `name` (or
  // the URL).
  [[nodiscard]] absl::StatusOr<int64_t> Head(const std::string& url,
                                             const std::string& name,
                                             const HttpSigning& signing);

  class Engine;  // the I/O thread and the multi handle (http_transport.cc)

 private:
  HttpTransport(std::vector<std::unique_ptr<Engine>> engines,
                int64_t max_request_bytes);
  // The engine for the next call (round robin).
  Engine& NextEngine();
  std::vector<std::unique_ptr<Engine>> engines_;
  std::atomic<size_t> next_engine_{0};
  const int64_t max_request_bytes_;
};

}  // namespace pinwheel::internal

#endif  // PINWHEEL_LOADER_STORAGE_INTERNAL_HTTP_TRANSPORT_H_
