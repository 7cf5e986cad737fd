// Record files: pinwheel's self-describing file of fixed-size records, read
// through a memory map.
//
// Format (all integers little-endian):
//   magic     8 bytes  "PINWHEEL"
//   version   u32      1
//   header    u32      total header bytes (records start here; multiple of 64)
//   count     u64      number of records
//   record    u64      bytes per record (the layout's sample_bytes)
//   fields    u32      number of fields, then per field:
//     name_len u16, name bytes, dtype u8 (DType), rank u8, dims i64 × rank
//   zero padding up to `header` bytes
//   count × record bytes: each record's fields back to back, in layout order
// The file size must be exactly header + count × record.
//
// Example:
//   PINWHEEL_ASSIGN_OR_RETURN(RecordFileWriter w,
//                             RecordFileWriter::Create("train.pwr", layout));
//   PINWHEEL_RETURN_IF_ERROR(w.Append({image_bytes, label_bytes}));
//   PINWHEEL_RETURN_IF_ERROR(w.Close());
//   PINWHEEL_ASSIGN_OR_RETURN(std::shared_ptr<RecordFileDataset> ds,
//                             RecordFileDataset::Open("train.pwr"));
#ifndef PINWHEEL_LOADER_RECORD_FILE_H_
#define PINWHEEL_LOADER_RECORD_FILE_H_

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

#include "loader/dataset.h"
#include "loader/storage/object_store.h"
#include "loader/storage/store_options.h"
#include "transfer/sample_layout.h"

namespace pinwheel {
namespace internal {
class MappedFile;
class SharedFileCopy;
}  // namespace internal

inline constexpr char kRecordFileMagic[8] = {'P', 'I', 'N', 'W',
                                             'H', 'E', 'E', 'L'};
inline constexpr uint32_t kRecordFileVersion = 1;

struct RecordFileHeader {
  SampleLayout layout;
  uint64_t count = 0;
  uint64_t record_bytes = 0;
  uint32_t header_bytes = 0;
};

// Parses a header from the first bytes of a file of `file_size` bytes.
// Returns DataLoss / InvalidArgument naming what is wrong (wrong magic,
// unsupported version, truncated header, bad field, record size that does
// not match the layout, file size that disagrees with the header, zero
// records) and the byte offset. Never reads outside `bytes`.
[[nodiscard]] absl::StatusOr<RecordFileHeader> ParseRecordFileHeader(
    absl::Span<const std::byte> bytes, uint64_t file_size);

// Returns the header bytes for `layout` and `count` records.
std::vector<std::byte> SerializeRecordFileHeader(const SampleLayout& layout,
                                                 uint64_t count);

// Writes a record file. Thread-compatible; move-only.
//
// The records go to a temporary file beside `path` (`path`.tmp-<pid>-<n>,
// same directory, so same filesystem); Close() writes the count, fsyncs,
// renames it over `path` in one atomic step and fsyncs the directory. Until
// then `path` keeps what it held: a reader that maps the old file keeps
// reading its old bytes, even after the rename (see the mapping hazard at
// RecordFileDataset: never truncate a mapped file in place).
// Only a successful Close() publishes. A failed Close(), the destructor of a
// writer that was not closed (an early return after a failed Append, an
// exception while producing records) and a move assignment over an open
// writer remove the temporary file and leave `path` as it was: an
// unfinished file never replaces a complete one.
class RecordFileWriter {
 public:
  // Creates the temporary file beside `path` (errno errors name `path`).
  // InvalidArgument for variable-length layouts, and for a `path` that
  // exists and is not a regular file (a FIFO, a device node, a directory,
  // a socket), naming its type; Close() checks again before the rename.
  // Symbolic links are followed for this check, as the readers follow them:
  // a link to a regular file is accepted, and Close() renames the new file
  // over the link itself (the link's target keeps its old contents); a
  // dangling link counts as an absent `path`.
  [[nodiscard]] static absl::StatusOr<RecordFileWriter> Create(
      const std::string& path, SampleLayout layout);

  RecordFileWriter(RecordFileWriter&& other) noexcept;
  // Abandons this writer's file if still open (see above), then takes over
  // `other`'s.
  RecordFileWriter& operator=(RecordFileWriter&& other) noexcept;
  RecordFileWriter(const RecordFileWriter&) = delete;
  RecordFileWriter& operator=(const RecordFileWriter&) = delete;
  // If still open, abandons the file: removes the temporary file and leaves
  // `path` as it was. Call Close() to publish the records.
  ~RecordFileWriter();

  // Appends one record: one span per field, each exactly the field's bytes,
  // else InvalidArgument naming the field and both sizes.
  [[nodiscard]] absl::Status Append(
      const std::vector<absl::Span<const std::byte>>& fields);
  // Appends one record given as the record's raw bytes (sample_bytes).
  [[nodiscard]] absl::Status AppendRaw(absl::Span<const std::byte> record);
  // Writes the header's count, closes the file and renames it to `path`
  // (durably: fsync of the file and of its directory). Idempotent.
  [[nodiscard]] absl::Status Close();

  uint64_t count() const { return count_; }

 private:
  static constexpr size_t kWriteBufferBytes = size_t{1} << 20;  // 1 MiB

  RecordFileWriter(std::string path, std::string tmp_path, SampleLayout layout,
                   std::FILE* file);
  // Closes and removes the temporary file; `path` is left alone.
  void Abandon();
  std::string path_;
  std::string tmp_path_;  // where the records go until Close() renames it
  SampleLayout layout_;
  std::FILE* file_ = nullptr;
  uint64_t count_ = 0;
  // The stdio buffer of file_ (kWriteBufferBytes); outlives file_.
  std::unique_ptr<char[]> buffer_;
};

// A memory-mapped record file as a Dataset. Thread-safe (immutable).
//
// Sizes: the file is mapped whole (address space, not memory: a 1 TiB file
// maps on a 64-bit host; pages are read on demand); every offset is 64-bit.
// A mapping that does not fit the address space is ResourceExhausted.
//
// The mapping hazard: never truncate or rewrite in place a file that a
// dataset maps (open with O_TRUNC, ftruncate, `>` in a shell). Replace the
// file instead (write a new one, rename() it over the old: RecordFileWriter
// does); the dataset keeps reading the old bytes. Read() reads each record
// with preadv(2) straight into the sample's fields, not out of the
// mapping: a file truncated in place, before or during the read, is
// DataLoss naming the file, the record and its byte range, never SIGBUS.
// record() still points into the mapping: touching it after such a
// truncation raises SIGBUS (Note [mapping hazard] in
// loader/internal/mapped_file.h).
class RecordFileDataset final : public Dataset {
 public:
  // Opens and validates `path`: NotFound when it does not exist;
  // InvalidArgument naming the type when it is not a regular file (a FIFO
  // does not block: it is opened with O_NONBLOCK); the header's errors (see
  // ParseRecordFileHeader) prefixed with the path.
  // A URL (http://, https://, s3://) is opened as the overload below does
  // with default StoreOptions.
  [[nodiscard]] static absl::StatusOr<std::shared_ptr<RecordFileDataset>> Open(
      const std::string& path);

  // Opens a record file at a URL (http://, https://, s3://) or a local
  // path, read through `store`, or when null through a store opened for
  // the URL's scheme with `storage` (a local path is then mapped as
  // above). Over a store: Open() asks the size and reads the header (its
  // errors prefixed with the URL); Read() reads each record with one range
  // read, straight into the sample's field when it has one field, else
  // into a per-thread buffer and out to the fields; record() is empty and
  // Gather() Unimplemented (copy the file to local disk for the gather
  // path).
  [[nodiscard]] static absl::StatusOr<std::shared_ptr<RecordFileDataset>> Open(
      const std::string& url, const StoreOptions& storage,
      std::shared_ptr<ObjectStore> store = nullptr);

  ~RecordFileDataset() override;

  int64_t size() const override { return static_cast<int64_t>(header_.count); }
  const SampleLayout& layout() const override { return header_.layout; }
  absl::Status Read(int64_t index, SampleView& out) const override;
  // The records from a copy of the file in memory (read on first use with
  // pread, shared by every loader over this dataset while one holds it;
  // never the mapping: see loader/internal/file_copy.h). ResourceExhausted
  // when the file is larger than `max_copy_bytes`.
  absl::StatusOr<GatherSource> Gather(uint64_t max_copy_bytes) const override;

  // Returns record `index`'s raw bytes (valid while the dataset lives;
  // unlike Read(), no truncation check: see the mapping hazard above);
  // empty when the file is read through a store (a URL).
  absl::Span<const std::byte> record(int64_t index) const;
  const std::string& path() const { return path_; }
  const RecordFileHeader& header() const { return header_; }
  // The store the file is read through; null for a mapped local file.
  ObjectStore* store() const { return store_.get(); }

 private:
  RecordFileDataset(std::string path, RecordFileHeader header,
                    std::unique_ptr<internal::MappedFile> file,
                    std::shared_ptr<ObjectStore> store);
  std::string path_;
  RecordFileHeader header_;
  // Exactly one of the two: the mapped local file, or the store it is read
  // through.
  std::unique_ptr<internal::MappedFile> file_;
  std::shared_ptr<ObjectStore> store_;
  std::unique_ptr<internal::SharedFileCopy> gather_copy_;  // never null
  // Per layout field: its byte offset within a record, and its bytes.
  std::vector<size_t> field_offsets_;
  std::vector<size_t> field_bytes_;
};

}  // namespace pinwheel

#endif  // PINWHEEL_LOADER_RECORD_FILE_H_
