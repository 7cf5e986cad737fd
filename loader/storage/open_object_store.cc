#include "loader/storage/open_object_store.h"

#include <memory>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

#include "loader/storage/http_store.h"
#include "loader/storage/local_file_store.h"
#include "loader/storage/s3_store.h"
#include "pinning/base/status_macros.h"

namespace pinwheel {

absl::StatusOr<UrlScheme> SchemeOf(absl::string_view url) {
  if (absl::StartsWithIgnoreCase(url, "s3://")) return UrlScheme::kS3;
  if (absl::StartsWithIgnoreCase(url, "http://") ||
      absl::StartsWithIgnoreCase(url, "https://")) {
    return UrlScheme::kHttp;
  }
  if (absl::StartsWith(url, "file://")) return UrlScheme::kLocal;
  const size_t colon = url.find("://");
  if (colon != absl::string_view::npos &&
      url.find('/') == colon + 1) {  // "<scheme>://", not a path with "://"
    return absl::InvalidArgumentError(absl::StrCat(
        "\"", url, "\": the scheme \"", url.substr(0, colon),
        "\" is not one pinwheel reads (a local path, file://, http://, "
        "https://, s3://)"));
  }
  return UrlScheme::kLocal;
}

absl::StatusOr<std::shared_ptr<ObjectStore>> OpenObjectStore(
    absl::string_view url_or_prefix, const StoreOptions& options) {
  PINWHEEL_ASSIGN_OR_RETURN(UrlScheme scheme, SchemeOf(url_or_prefix));
  switch (scheme) {
    case UrlScheme::kLocal:
      return std::make_shared<LocalFileStore>();
    case UrlScheme::kHttp: {
      PINWHEEL_ASSIGN_OR_RETURN(std::unique_ptr<HttpStore> store,
                                HttpStore::Create(options));
      return std::shared_ptr<ObjectStore>(std::move(store));
    }
    case UrlScheme::kS3: {
      PINWHEEL_ASSIGN_OR_RETURN(std::unique_ptr<S3Store> store,
                                S3Store::Create(options));
      return std::shared_ptr<ObjectStore>(std::move(store));
    }
  }
  return absl::InternalError("OpenObjectStore: unknown scheme");
}

}  // namespace pinwheel
