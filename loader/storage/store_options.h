// StoreOptions: how an ObjectStore (loader/storage/object_store.h) reaches
// its objects: requests in flight, retries, timeouts, and for s3:// the
// endpoint, region and credentials profile. OpenObjectStore() picks the
// backend by the URL's scheme and validates these once.
//
// Example:
//   StoreOptions options;
//   options.max_in_flight = 32;
//   options.s3_endpoint = "http://127.0.0.1:9000";  // MinIO, moto, Ceph
//   PINWHEEL_ASSIGN_OR_RETURN(std::shared_ptr<ObjectStore> store,
//                             OpenObjectStore("s3://bucket/train/", options));
#ifndef PINWHEEL_LOADER_STORAGE_STORE_OPTIONS_H_
#define PINWHEEL_LOADER_STORAGE_STORE_OPTIONS_H_

#include <cstdint>
#include <string>

#include "absl/time/time.h"

namespace pinwheel {

// How an s3:// URL becomes an HTTP one.
enum class S3AddressingStyle {
  // Virtual-hosted for AWS's own endpoints, path-style for a custom
  // endpoint (what S3-compatible stores serve without DNS set up).
  kAuto,
  // https://<bucket>.<endpoint host>/<key>
  kVirtualHosted,
  // https://<endpoint host>/<bucket>/<key>
  kPath,
};

struct StoreOptions {
  // Parameters that affect performance (HTTP and S3).

  // Requests in flight at once per store (one connection each), >= 1,
  // shared evenly by the I/O threads.
  int max_in_flight = 64;
  // I/O threads per store, each driving its own libcurl multi handle,
  // >= 1 (at most max_in_flight start); a Read() call goes to one of them
  // in turn. One
  // thread moved about 1 GB/s of 8 MiB ranges to 14 tar streams on a
  // 2 x H200 host (2026-11-27, nginx on the loopback: W4 with GPU decode
  // from HTTP at 10,384 img/s with 1 thread, 13,214 with 4, 14,343 from
  // the local disk), so the default is 4; idle threads cost nothing.
  int io_threads = 4;
  // A range larger than this is read as several requests of at most this
  // many bytes, in flight together, bytes >= 4096.
  int64_t max_request_bytes = int64_t{8} << 20;
  // libcurl's receive buffer per transfer, bytes in [16 KiB, 10 MiB]:
  // larger buffers mean fewer callbacks per byte.
  int64_t receive_buffer_bytes = int64_t{512} << 10;

  // Retries: a request that fails with HTTP 429, 500, 502, 503 or 504, a
  // connection refused, reset or timed out, or a body cut short is tried
  // again after a backoff of initial_backoff × 2^(attempt - 1), capped at
  // max_backoff, with jitter (a uniform draw in [backoff / 2, backoff]).

  // Attempts per request, the first included, >= 1.
  int max_attempts = 6;
  // > 0.
  absl::Duration initial_backoff = absl::Milliseconds(50);
  // >= initial_backoff.
  absl::Duration max_backoff = absl::Seconds(5);
  // The jitter's random draws are a pure function of this seed and the
  // request (URL, offset, attempt): runs repeat.
  uint64_t jitter_seed = 0;

  // Timeouts, per attempt (a timed-out attempt is retried).

  // Connecting (TCP and TLS), > 0.
  absl::Duration connect_timeout = absl::Seconds(10);
  // The whole request, headers and body, > 0.
  absl::Duration request_timeout = absl::Seconds(120);

  // Verify the server's TLS certificate and host name (https://).
  bool verify_tls = true;

  // S3 (s3://bucket/key). Empty strings take the standard environment.

  // The endpoint, "http(s)://host[:port]": default AWS_ENDPOINT_URL_S3, else
  // AWS_ENDPOINT_URL, else https://s3.<region>.amazonaws.com.
  std::string s3_endpoint;
  // Default AWS_REGION, else AWS_DEFAULT_REGION, else the profile's region
  // in ~/.aws/config, else us-east-1.
  std::string s3_region;
  // The credentials profile of ~/.aws/credentials and ~/.aws/config
  // (AWS_SHARED_CREDENTIALS_FILE, AWS_CONFIG_FILE): default AWS_PROFILE,
  // else "default". AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY /
  // AWS_SESSION_TOKEN in the environment come first.
  std::string s3_profile;
  S3AddressingStyle s3_addressing = S3AddressingStyle::kAuto;
};

}  // namespace pinwheel

#endif  // PINWHEEL_LOADER_STORAGE_STORE_OPTIONS_H_
