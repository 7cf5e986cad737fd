#include "loader/storage/s3_store.h"

#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

#include "loader/storage/internal/aws_config.h"
#include "loader/storage/internal/http_transport.h"
#include "pinning/base/status_macros.h"

namespace pinwheel {
namespace {

// SHA-256 of the empty payload: a GET's x-amz-content-sha256, the same value
// libcurl's SigV4 uses as the payload hash, so the header and the signature
// agree whether or not this libcurl adds the header itself.
constexpr char kEmptyPayloadSha256[] =
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

std::string Env(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr ? std::string() : std::string(value);
}

// Percent-encodes all but unreserved characters and '/' (S3's canonical
// URI for keys).
std::string EncodeKey(absl::string_view key) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(key.size());
  for (unsigned char c : key) {
    if (absl::ascii_isalnum(c) || c == '-' || c == '_' || c == '.' ||
        c == '~' || c == '/') {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  return out;
}

}  // namespace

absl::StatusOr<S3Endpoint> ResolveS3Endpoint(const StoreOptions& options) {
  S3Endpoint endpoint;
  endpoint.region = options.s3_region.empty()
                        ? internal::LoadAwsRegion(options.s3_profile)
                        : options.s3_region;
  std::string url = options.s3_endpoint;
  const char* from = "StoreOptions::s3_endpoint";
  if (url.empty()) {
    url = Env("AWS_ENDPOINT_URL_S3");
    from = "AWS_ENDPOINT_URL_S3";
  }
  if (url.empty()) {
    url = Env("AWS_ENDPOINT_URL");
    from = "AWS_ENDPOINT_URL";
  }
  const bool custom = !url.empty();
  if (!custom) {
    endpoint.scheme = "https";
    endpoint.host = absl::StrCat("s3.", endpoint.region, ".amazonaws.com");
  } else {
    const size_t colon = url.find("://");
    const std::string scheme =
        colon == std::string::npos
            ? ""
            : absl::AsciiStrToLower(url.substr(0, colon));
    std::string host = colon == std::string::npos ? "" : url.substr(colon + 3);
    while (!host.empty() && host.back() == '/') host.pop_back();
    if ((scheme != "http" && scheme != "https") || host.empty() ||
        host.find('/') != std::string::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("S3: the endpoint \"", url, "\" (from ", from,
                       ") is not \"http(s)://host[:port]\""));
    }
    endpoint.scheme = scheme;
    endpoint.host = host;
  }
  switch (options.s3_addressing) {
    case S3AddressingStyle::kAuto:
      endpoint.virtual_hosted = !custom;
      break;
    case S3AddressingStyle::kVirtualHosted:
      endpoint.virtual_hosted = true;
      break;
    case S3AddressingStyle::kPath:
      endpoint.virtual_hosted = false;
      break;
  }
  return endpoint;
}

absl::StatusOr<std::string> S3HttpUrl(const S3Endpoint& endpoint,
                                      absl::string_view s3_url) {
  if (!absl::StartsWithIgnoreCase(s3_url, "s3://")) {
    return absl::InvalidArgumentError(
        absl::StrCat("S3: \"", s3_url, "\" is not an s3:// URL"));
  }
  const absl::string_view rest = s3_url.substr(5);
  const size_t slash = rest.find('/');
  if (slash == 0 || slash == absl::string_view::npos ||
      slash + 1 == rest.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("S3: \"", s3_url,
                     "\" is not s3://<bucket>/<key> (a bucket and a key)"));
  }
  const absl::string_view bucket = rest.substr(0, slash);
  const std::string key = EncodeKey(rest.substr(slash + 1));
  // A bucket with dots cannot be a TLS host name's label: path-style then.
  if (endpoint.virtual_hosted &&
      !(endpoint.scheme == "https" && absl::StrContains(bucket, '.'))) {
    return absl::StrCat(endpoint.scheme, "://", bucket, ".", endpoint.host, "/",
                        key);
  }
  return absl::StrCat(endpoint.scheme, "://", endpoint.host, "/", bucket, "/",
                      key);
}

absl::StatusOr<std::unique_ptr<S3Store>> S3Store::Create(
    const StoreOptions& options) {
  PINWHEEL_ASSIGN_OR_RETURN(S3Endpoint endpoint, ResolveS3Endpoint(options));
  PINWHEEL_ASSIGN_OR_RETURN(internal::AwsCredentials credentials,
                            internal::LoadAwsCredentials(options.s3_profile));
  PINWHEEL_ASSIGN_OR_RETURN(std::unique_ptr<internal::HttpTransport> transport,
                            internal::HttpTransport::Create(options));
  auto signing = std::make_unique<internal::HttpSigning>();
  if (!credentials.access_key_id.empty()) {
    signing->aws_sigv4 = absl::StrCat("aws:amz:", endpoint.region, ":s3");
    signing->username = credentials.access_key_id;
    signing->password = credentials.secret_access_key;
    signing->headers.push_back(
        absl::StrCat("x-amz-content-sha256: ", kEmptyPayloadSha256));
    if (!credentials.session_token.empty()) {
      signing->headers.push_back(
          absl::StrCat("x-amz-security-token: ", credentials.session_token));
    }
  }
  return std::unique_ptr<S3Store>(
      new S3Store(std::move(transport), std::move(endpoint), std::move(signing),
                  std::move(credentials.source)));
}

S3Store::S3Store(std::unique_ptr<internal::HttpTransport> transport,
                 S3Endpoint endpoint,
                 std::unique_ptr<internal::HttpSigning> signing,
                 std::string credentials_source)
    : transport_(std::move(transport)),
      endpoint_(std::move(endpoint)),
      signing_(std::move(signing)),
      credentials_source_(std::move(credentials_source)) {}

S3Store::~S3Store() = default;

absl::StatusOr<int64_t> S3Store::Size(std::string_view std_url) {
  const absl::string_view url(std_url.data(), std_url.size());
  PINWHEEL_ASSIGN_OR_RETURN(std::string http_url, S3HttpUrl(endpoint_, url));
  return transport_->Head(http_url, std::string(url), *signing_);
}

absl::Status S3Store::Read(absl::Span<const RangeRead> reads) {
  std::vector<internal::HttpRangeGet> gets;
  gets.reserve(reads.size());
  for (const RangeRead& read : reads) {
    PINWHEEL_ASSIGN_OR_RETURN(std::string http_url,
                              S3HttpUrl(endpoint_, read.url));
    gets.push_back({.url = std::move(http_url),
                    .name = read.url,
                    .offset = read.offset,
                    .destination = read.destination});
  }
  return transport_->Get(gets, *signing_);
}

}  // namespace pinwheel
