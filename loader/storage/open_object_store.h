// OpenObjectStore: the ObjectStore for a URL's scheme.
//   "/path", "relative/path", "file:///path"  LocalFileStore
//   "http://...", "https://..."                HttpStore
//   "s3://bucket/..."                          S3Store
//
// Example:
//   PINWHEEL_ASSIGN_OR_RETURN(std::shared_ptr<ObjectStore> store,
//       OpenObjectStore("s3://bucket/train/", {}));
#ifndef PINWHEEL_LOADER_STORAGE_OPEN_OBJECT_STORE_H_
#define PINWHEEL_LOADER_STORAGE_OPEN_OBJECT_STORE_H_

#include <memory>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

#include "loader/storage/object_store.h"
#include "loader/storage/store_options.h"

namespace pinwheel {

enum class UrlScheme { kLocal, kHttp, kS3 };

// Returns the scheme of `url`: kLocal for a path or file://, kHttp for
// http(s)://, kS3 for s3://; InvalidArgument naming the URL for any other
// "<scheme>://".
[[nodiscard]] absl::StatusOr<UrlScheme> SchemeOf(absl::string_view url);

// Returns a new store for `url_or_prefix`'s scheme (see above), or the
// options' or the scheme's error. Each store has its own connections and
// (HTTP, S3) its own I/O thread: share one store between datasets.
[[nodiscard]] absl::StatusOr<std::shared_ptr<ObjectStore>> OpenObjectStore(
    absl::string_view url_or_prefix, const StoreOptions& options = {});

}  // namespace pinwheel

#endif  // PINWHEEL_LOADER_STORAGE_OPEN_OBJECT_STORE_H_
