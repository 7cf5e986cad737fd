// HttpStore: objects at http:// and https:// URLs, read by HTTP range GETs
// (many in flight on one libcurl multi handle and one I/O thread; retries,
// backoff and timeouts as StoreOptions says; see
// loader/storage/internal/http_transport.h). Size() is a HEAD's
// Content-Length. Any server that answers Range with 206 serves (nginx,
// Apache, Python's in the tests, a CDN); one that ignores Range (200 with
// the whole body) is still read correctly, at the cost of the bytes before
// the range.
//
// Example:
//   PINWHEEL_ASSIGN_OR_RETURN(std::unique_ptr<HttpStore> store,
//                             HttpStore::Create({}));
//   PINWHEEL_ASSIGN_OR_RETURN(int64_t size,
//                             store->Size("http://host/shard-000.tar"));
//
// Thread-safe.
#ifndef PINWHEEL_LOADER_STORAGE_HTTP_STORE_H_
#define PINWHEEL_LOADER_STORAGE_HTTP_STORE_H_

#include <cstdint>
#include <memory>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

#include "loader/storage/object_store.h"
#include "loader/storage/store_options.h"

namespace pinwheel {
namespace internal {
class HttpTransport;
struct HttpSigning;
}  // namespace internal

class HttpStore final : public ObjectStore {
 public:
  // Validates `options` (InvalidArgument naming the field) and starts the
  // I/O thread; the destructor stops it (REQUIRES: no call running).
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<HttpStore>> Create(
      const StoreOptions& options);
  ~HttpStore() override;

  // `url` must be http:// or https:// (InvalidArgument naming it else).
  absl::StatusOr<int64_t> Size(std::string_view url) override;
  absl::Status Read(absl::Span<const RangeRead> reads) override;

 private:
  HttpStore(std::unique_ptr<internal::HttpTransport> transport);
  std::unique_ptr<internal::HttpTransport> transport_;
  std::unique_ptr<const internal::HttpSigning> signing_;  // none
};

}  // namespace pinwheel

#endif  // PINWHEEL_LOADER_STORAGE_HTTP_STORE_H_
