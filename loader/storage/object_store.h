// ObjectStore: the bytes of named objects (local files, HTTP(S) URLs, S3
// objects), read by byte range into memory the caller owns (a pinned slot,
// a cache block). The datasets that read shards and record files
// (loader/image/tar_shards.h, loader/record_file.h) read through it, so the
// same dataset works on "/data/shard-000.tar",
// "https://host/data/shard-000.tar" and "s3://bucket/data/shard-000.tar".
// A cache (loader/storage/cache/) is an ObjectStore over another one.
//
// Example:
//   PINWHEEL_ASSIGN_OR_RETURN(std::shared_ptr<ObjectStore> store,
//                             OpenObjectStore("s3://bucket/train/", {}));
//   std::vector<std::byte> header(512);
//   PINWHEEL_RETURN_IF_ERROR(store->Read(
//       {{.url = "s3://bucket/train/shard-000.tar", .offset = 0,
//         .destination = absl::MakeSpan(header)}}));
#ifndef PINWHEEL_LOADER_STORAGE_OBJECT_STORE_H_
#define PINWHEEL_LOADER_STORAGE_OBJECT_STORE_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace pinwheel {

// One byte range of one object, to be read into `destination`
// (destination.size() bytes from `offset`).
struct RangeRead {
  std::string url;
  int64_t offset = 0;
  absl::Span<std::byte> destination;
};

// Interface. Thread-safe: every method may be called from many threads at
// once.
class ObjectStore {
 public:
  virtual ~ObjectStore() = default;

  // Returns the size in bytes of the object at `url`, or NotFound naming
  // it, or the error that prevented asking (naming the URL).
  virtual absl::StatusOr<int64_t> Size(std::string_view url) = 0;

  // Reads every range of `reads`, concurrently where the store can, and
  // returns when all of them have finished: OK when every destination was
  // filled, otherwise the first failure, naming the URL, the byte range,
  // the attempts made and, for HTTP, the status code. A range that reaches
  // past the object's end is OutOfRange naming the object's size. On
  // failure the destinations' contents are unspecified.
  virtual absl::Status Read(absl::Span<const RangeRead> reads) = 0;
};

}  // namespace pinwheel

#endif  // PINWHEEL_LOADER_STORAGE_OBJECT_STORE_H_
