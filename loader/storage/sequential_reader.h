// SequentialReader: one object read front to back through an ObjectStore in
// large chunks, with the next chunks read ahead while the caller works on
// the current one. For streams that walk an object in order with small
// reads (a tar shard's headers and members): a few multi-MiB range GETs
// per shard instead of one request per member.
//
// Example:
//   SequentialReader reader(store, "s3://b/shard-000.tar", size, {});
//   std::byte header[512];
//   PINWHEEL_RETURN_IF_ERROR(reader.Read(0, header));
//
// Random access works too: a read outside the chunks held drops them and
// starts again at its offset (a resume, a skip). Memory: at most
// (2 + read_ahead_chunks) × chunk_bytes, reused.
//
// Prefetch() starts the first chunks without a Read() (the next object of
// a stream, read before the current one ends).
//
// Note [looking back]
// The chunk before the one being read stays until the reader is wholly past
// the next one too. A tar stream reads the headers of a sample's members
// and the next sample's first header before it goes back for the image's
// bytes; when the image crossed a chunk boundary, dropping the chunk it
// starts in would restart the reads there, at an unaligned offset, and
// fetch the next chunks again (about one restart a chunk: twice the bytes
// over the network, measured through the cache's counters).
//
// Thread-compatible: one thread at a time calls Read(); the chunk reads run
// on threads of their own, and the destructor waits for them.
#ifndef PINWHEEL_LOADER_STORAGE_SEQUENTIAL_READER_H_
#define PINWHEEL_LOADER_STORAGE_SEQUENTIAL_READER_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"

#include "loader/storage/object_store.h"

namespace pinwheel {

struct SequentialReadOptions {
  // Bytes per range read, >= 4096.
  int64_t chunk_bytes = int64_t{8} << 20;
  // Chunks read ahead of the one being read, >= 0.
  int read_ahead_chunks = 1;
};

class SequentialReader {
 public:
  // Reads `url` (of `size` bytes) through `store`. Nothing is read yet.
  // REQUIRES: options valid (ValidateSequentialReadOptions).
  SequentialReader(std::shared_ptr<ObjectStore> store, std::string url,
                   int64_t size, const SequentialReadOptions& options);
  ~SequentialReader();
  SequentialReader(const SequentialReader&) = delete;
  SequentialReader& operator=(const SequentialReader&) = delete;

  // Fills `out` with bytes [offset, offset + out.size()); OutOfRange naming
  // the URL and size when that reaches past `size`; a chunk's failure as
  // the store gave it (naming URL, range, attempts).
  [[nodiscard]] absl::Status Read(int64_t offset, absl::Span<std::byte> out);

  // Starts reading the chunks at `offset` (1 + read_ahead_chunks of them)
  // and returns without waiting, so that a Read() there finds its bytes on
  // the way: a stream opens the reader of its next object before it needs
  // it (Note [the next shard's first chunk] in loader/image/tar_shards.cc).
  // Nothing when chunks are held already or `offset` is at the end.
  // REQUIRES: 0 <= offset <= size().
  void Prefetch(int64_t offset);

  // Whether every chunk up to the object's end has been started: nothing
  // more will be read ahead, so the reader of the next object may begin.
  bool IssuedToEnd() const;

  int64_t size() const { return size_; }
  const std::string& url() const { return url_; }

 private:
  struct Chunk {
    int64_t offset = 0;
    std::vector<std::byte> bytes;
    std::future<absl::Status> done;
    bool waited = false;
    absl::Status status;
  };
  // Starts reading the chunk at `offset` (< size_).
  void Issue(int64_t offset);
  // Waits for every chunk in flight and drops them all.
  void DropAll();
  // Tops the chunks at or after `offset` up to 1 + read_ahead.
  void ReadAhead(int64_t offset);
  // The chunk holding byte `offset`, or null.
  Chunk* Holding(int64_t offset);
  static int64_t End(const Chunk& chunk);

  const std::shared_ptr<ObjectStore> store_;
  const std::string url_;
  const int64_t size_;
  const SequentialReadOptions options_;
  std::deque<Chunk> chunks_;                    // in offset order, contiguous
  std::vector<std::vector<std::byte>> spares_;  // buffers to reuse
};

// InvalidArgument naming the field, or OK.
absl::Status ValidateSequentialReadOptions(
    const SequentialReadOptions& options);

}  // namespace pinwheel

#endif  // PINWHEEL_LOADER_STORAGE_SEQUENTIAL_READER_H_
