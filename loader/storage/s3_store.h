// S3Store: objects at s3://bucket/key URLs, read by signed HTTP range GETs
// over the same transport as HttpStore (loader/storage/internal/
// http_transport.h). Works with AWS S3 and S3-compatible stores (MinIO,
// Ceph RGW, moto, R2, GCS's XML API) through a custom endpoint.
//
// Addressing: virtual-hosted (https://bucket.s3.<region>.amazonaws.com/key)
// or path-style (https://<endpoint>/bucket/key), see S3AddressingStyle.
// Signing: AWS Signature V4 by libcurl (CURLOPT_AWS_SIGV4) with the
// credentials of loader/storage/internal/aws_config.h; without any, requests
// go unsigned (public buckets). Credentials are read once, at Create().
//
// Example:
//   // AWS_ENDPOINT_URL=http://127.0.0.1:9000 AWS_ACCESS_KEY_ID=... ...
//   PINWHEEL_ASSIGN_OR_RETURN(std::unique_ptr<S3Store> s3,
//   S3Store::Create({})); PINWHEEL_ASSIGN_OR_RETURN(int64_t size,
//   s3->Size("s3://b/shard-000.tar"));
//
// Thread-safe.
#ifndef PINWHEEL_LOADER_STORAGE_S3_STORE_H_
#define PINWHEEL_LOADER_STORAGE_S3_STORE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

#include "loader/storage/object_store.h"
#include "loader/storage/store_options.h"

namespace pinwheel {
namespace internal {
class HttpTransport;
struct HttpSigning;
}  // namespace internal

// Where an S3 store's requests go, resolved from StoreOptions and the
// environment.
struct S3Endpoint {
  std::string scheme;  // "https" or "http"
  std::string host;    // "s3.us-east-1.amazonaws.com", "127.0.0.1:9000"
  std::string region;
  bool virtual_hosted = true;
};

// Returns the endpoint that `options` and the environment give
// (InvalidArgument naming a malformed endpoint URL).
[[nodiscard]] absl::StatusOr<S3Endpoint> ResolveS3Endpoint(
    const StoreOptions& options);

// Returns the HTTP(S) URL of `s3_url` ("s3://bucket/key") at `endpoint`,
// the key percent-encoded; InvalidArgument naming the URL when it has no
// bucket or no key.
[[nodiscard]] absl::StatusOr<std::string> S3HttpUrl(const S3Endpoint& endpoint,
                                                    absl::string_view s3_url);

class S3Store final : public ObjectStore {
 public:
  // Validates `options`, resolves the endpoint and region and reads the
  // credentials (errors name the variable or file).
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<S3Store>> Create(
      const StoreOptions& options);
  ~S3Store() override;

  absl::StatusOr<int64_t> Size(std::string_view url) override;
  absl::Status Read(absl::Span<const RangeRead> reads) override;

  const S3Endpoint& endpoint() const { return endpoint_; }
  // Where the credentials came from ("the environment", a profile, none).
  const std::string& credentials_source() const { return credentials_source_; }

 private:
  S3Store(std::unique_ptr<internal::HttpTransport> transport,
          S3Endpoint endpoint, std::unique_ptr<internal::HttpSigning> signing,
          std::string credentials_source);
  std::unique_ptr<internal::HttpTransport> transport_;
  S3Endpoint endpoint_;
  std::unique_ptr<const internal::HttpSigning> signing_;
  std::string credentials_source_;
};

}  // namespace pinwheel

#endif  // PINWHEEL_LOADER_STORAGE_S3_STORE_H_
