#include "loader/storage/http_store.h"

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

#include "loader/storage/internal/http_transport.h"
#include "pinning/base/status_macros.h"

namespace pinwheel {
namespace {

absl::Status CheckHttpUrl(absl::string_view url) {
  if (absl::StartsWithIgnoreCase(url, "http://") ||
      absl::StartsWithIgnoreCase(url, "https://")) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "HttpStore: \"", url, "\" is not an http:// or https:// URL"));
}

}  // namespace

absl::StatusOr<std::unique_ptr<HttpStore>> HttpStore::Create(
    const StoreOptions& options) {
  PINWHEEL_ASSIGN_OR_RETURN(std::unique_ptr<internal::HttpTransport> transport,
                            internal::HttpTransport::Create(options));
  return std::unique_ptr<HttpStore>(new HttpStore(std::move(transport)));
}

HttpStore::HttpStore(std::unique_ptr<internal::HttpTransport> transport)
    : transport_(std::move(transport)),
      signing_(std::make_unique<internal::HttpSigning>()) {}

HttpStore::~HttpStore() = default;

absl::StatusOr<int64_t> HttpStore::Size(std::string_view std_url) {
  const absl::string_view url(std_url.data(), std_url.size());
  PINWHEEL_RETURN_IF_ERROR(CheckHttpUrl(url));
  return transport_->Head(std::string(url), "", *signing_);
}

absl::Status HttpStore::Read(absl::Span<const RangeRead> reads) {
  std::vector<internal::HttpRangeGet> gets;
  gets.reserve(reads.size());
  for (const RangeRead& read : reads) {
    PINWHEEL_RETURN_IF_ERROR(CheckHttpUrl(read.url));
    gets.push_back({.url = read.url,
                    .offset = read.offset,
                    .destination = read.destination});
  }
  return transport_->Get(gets, *signing_);
}

}  // namespace pinwheel
