#include "loader/record_file.h"

#include <atomic>
#include <bit>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <limits>
#include <memory>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

#include "loader/atomic_file.h"
#include "loader/internal/mapped_file.h"
#include "pinning/base/coding.h"
#include "pinning/base/status_macros.h"

namespace pinwheel {
namespace {

// Records are the fields' raw bytes; the format says little-endian.
static_assert(std::endian::native == std::endian::little,
              "record files hold little-endian data; big-endian hosts would "
              "need a byte swap in Read()");

// Offsets of the fixed part of the header (see record_file.h).
constexpr size_t kMagicOffset = 0;
constexpr size_t kVersionOffset = 8;
constexpr size_t kHeaderBytesOffset = 12;
constexpr size_t kCountOffset = 16;
constexpr size_t kRecordBytesOffset = 24;
constexpr size_t kNumFieldsOffset = 32;
constexpr size_t kFixedHeaderBytes = 36;
constexpr size_t kHeaderAlignment = 64;

// Limits that no sane layout reaches; they keep a corrupt header from
// describing absurd work (and keep every count small enough not to overflow).
constexpr uint32_t kMaxFields = 4096;
constexpr uint16_t kMaxNameBytes = 256;
constexpr uint8_t kMaxRank = 16;
constexpr uint32_t kMaxHeaderBytes = 16u << 20;          // 16 MiB
constexpr uint64_t kMaxSampleBytes = uint64_t{1} << 30;  // SampleLayout's
constexpr uint8_t kNumDTypes = static_cast<uint8_t>(DType::kFloat64) + 1;

// Words a read past the end of the header (the reader is bounded by it).
absl::Status TruncatedHeader(const Shortfall& s) {
  return absl::DataLossError(absl::StrCat(
      "truncated header: ", s.field, " at byte offset ", s.offset, " needs ",
      s.needed, " bytes but the header ends at byte ", s.size));
}

uint32_t SerializedHeaderBytes(const SampleLayout& layout) {
  uint64_t bytes = kFixedHeaderBytes;
  for (const FieldSpec& field : layout.fields()) {
    bytes += 2 + field.name.size() + 1 + 1 + 8 * field.shape.size();
  }
  return static_cast<uint32_t>((bytes + kHeaderAlignment - 1) /
                               kHeaderAlignment * kHeaderAlignment);
}

// Parses field `index` (starting at the reader's offset) into `field`.
absl::Status ParseField(LittleEndianReader& reader, uint32_t index,
                        uint64_t& sample_bytes, FieldSpec& field) {
  const size_t field_offset = reader.offset();
  const std::string where =
      absl::StrCat("field ", index, " at byte offset ", field_offset);
  uint16_t name_len = 0;
  PINWHEEL_RETURN_IF_ERROR(
      reader.Read(absl::StrCat(where, ": name length"), name_len));
  if (name_len == 0 || name_len > kMaxNameBytes) {
    return absl::DataLossError(absl::StrCat(where, ": name length ", name_len,
                                            " is outside [1, ", kMaxNameBytes,
                                            "]"));
  }
  absl::string_view name;
  PINWHEEL_RETURN_IF_ERROR(
      reader.ReadBytes(absl::StrCat(where, ": name"), name_len, name));
  field.name = std::string(name);
  const std::string named = absl::StrCat(where, " ('", field.name, "')");
  uint8_t dtype = 0;
  const size_t dtype_offset = reader.offset();
  PINWHEEL_RETURN_IF_ERROR(reader.Read(absl::StrCat(named, ": dtype"), dtype));
  if (dtype >= kNumDTypes) {
    return absl::DataLossError(
        absl::StrCat(named, ": dtype ", dtype, " at byte offset ", dtype_offset,
                     " is not a known DType (0..", kNumDTypes - 1, ")"));
  }
  field.dtype = static_cast<DType>(dtype);
  uint8_t rank = 0;
  const size_t rank_offset = reader.offset();
  PINWHEEL_RETURN_IF_ERROR(reader.Read(absl::StrCat(named, ": rank"), rank));
  if (rank > kMaxRank) {
    return absl::DataLossError(absl::StrCat(named, ": rank ", rank,
                                            " at byte offset ", rank_offset,
                                            " exceeds the maximum ", kMaxRank));
  }
  // Bytes of this field, checked against the 1 GiB sample limit as it grows
  // so that the product never overflows.
  uint64_t bytes = DTypeSize(field.dtype);
  field.shape.clear();
  field.shape.reserve(rank);
  for (uint8_t d = 0; d < rank; ++d) {
    int64_t dim = 0;
    const size_t dim_offset = reader.offset();
    PINWHEEL_RETURN_IF_ERROR(
        reader.Read(absl::StrCat(named, ": dim ", d), dim));
    if (dim < 1 || static_cast<uint64_t>(dim) > kMaxSampleBytes ||
        bytes * static_cast<uint64_t>(dim) > kMaxSampleBytes) {
      return absl::DataLossError(absl::StrCat(
          named, ": dim ", d, " = ", dim, " at byte offset ", dim_offset,
          " is < 1 or makes the field exceed ", kMaxSampleBytes, " bytes"));
    }
    bytes *= static_cast<uint64_t>(dim);
    field.shape.push_back(dim);
  }
  sample_bytes += bytes;
  if (sample_bytes > kMaxSampleBytes) {
    return absl::DataLossError(absl::StrCat(named, ": the sample exceeds ",
                                            kMaxSampleBytes, " bytes"));
  }
  field.variable_length = false;
  return absl::OkStatus();
}


// Returns the error of a failed fwrite of record `record` (reads errno).
absl::Status WriteError(const std::string& path, uint64_t record) {
  const int error = errno;
  return absl::ErrnoToStatus(
      error, absl::StrCat("cannot write record ", record, " to ", path));
}

absl::Status WithPath(const std::string& path, const absl::Status& status) {
  return absl::Status(status.code(),
                      absl::StrCat(path, ": ", status.message()));
}

}  // namespace

absl::StatusOr<RecordFileHeader> ParseRecordFileHeader(
    absl::Span<const std::byte> bytes, uint64_t file_size) {
  if (bytes.size() < kFixedHeaderBytes) {
    return absl::DataLossError(
        absl::StrCat("truncated header: ", bytes.size(),
                     " bytes, the fixed part alone needs ", kFixedHeaderBytes));
  }
  if (std::memcmp(bytes.data() + kMagicOffset, kRecordFileMagic,
                  sizeof(kRecordFileMagic)) != 0) {
    return absl::InvalidArgumentError(
        "wrong magic at byte offset 0: not a pinwheel record file (expected "
        "\"PINWHEEL\")");
  }
  LittleEndianReader fixed(bytes.first(kFixedHeaderBytes), TruncatedHeader);
  uint32_t version = 0;
  RecordFileHeader header;
  uint32_t num_fields = 0;
  PINWHEEL_RETURN_IF_ERROR(fixed.Skip("magic", sizeof(kRecordFileMagic)));
  PINWHEEL_RETURN_IF_ERROR(fixed.Read("version", version));
  if (version != kRecordFileVersion) {
    return absl::InvalidArgumentError(absl::StrCat(
        "unsupported version ", version, " at byte offset ", kVersionOffset,
        " (this build reads version ", kRecordFileVersion, ")"));
  }
  PINWHEEL_RETURN_IF_ERROR(fixed.Read("header bytes", header.header_bytes));
  PINWHEEL_RETURN_IF_ERROR(fixed.Read("count", header.count));
  PINWHEEL_RETURN_IF_ERROR(fixed.Read("record bytes", header.record_bytes));
  PINWHEEL_RETURN_IF_ERROR(fixed.Read("field count", num_fields));

  if (header.header_bytes < kFixedHeaderBytes ||
      header.header_bytes % kHeaderAlignment != 0 ||
      header.header_bytes > kMaxHeaderBytes) {
    return absl::DataLossError(absl::StrCat(
        "header bytes ", header.header_bytes, " at byte offset ",
        kHeaderBytesOffset, " is not a multiple of ", kHeaderAlignment, " in [",
        kFixedHeaderBytes, ", ", kMaxHeaderBytes, "]"));
  }
  if (header.header_bytes > file_size) {
    return absl::DataLossError(
        absl::StrCat("truncated file: the header claims ", header.header_bytes,
                     " bytes (byte offset ", kHeaderBytesOffset,
                     ") but the file has ", file_size));
  }
  if (header.header_bytes > bytes.size()) {
    return absl::DataLossError(absl::StrCat(
        "truncated header: the header claims ", header.header_bytes,
        " bytes (byte offset ", kHeaderBytesOffset, ") but only ", bytes.size(),
        " were given"));
  }
  if (num_fields == 0 || num_fields > kMaxFields) {
    return absl::DataLossError(
        absl::StrCat("field count ", num_fields, " at byte offset ",
                     kNumFieldsOffset, " is outside [1, ", kMaxFields, "]"));
  }

  // Fields must lie inside the header; the reader is bounded by it.
  LittleEndianReader reader(bytes.first(header.header_bytes),
                            TruncatedHeader);
  PINWHEEL_RETURN_IF_ERROR(reader.Skip("fixed header", kFixedHeaderBytes));
  std::vector<FieldSpec> fields(num_fields);
  uint64_t sample_bytes = 0;
  for (uint32_t i = 0; i < num_fields; ++i) {
    PINWHEEL_RETURN_IF_ERROR(ParseField(reader, i, sample_bytes, fields[i]));
  }
  for (size_t offset = reader.offset(); offset < header.header_bytes;
       ++offset) {
    if (bytes[offset] != std::byte{0}) {
      return absl::DataLossError(absl::StrCat(
          "non-zero header padding at byte offset ", offset, " (fields end at ",
          reader.offset(), ", records start at ", header.header_bytes, ")"));
    }
  }
  absl::StatusOr<SampleLayout> layout = SampleLayout::Create(std::move(fields));
  if (!layout.ok()) {
    return absl::DataLossError(
        absl::StrCat("the header's fields (byte offsets ", kFixedHeaderBytes,
                     "..", reader.offset(),
                     ") are not a valid layout: ", layout.status().message()));
  }
  header.layout = *std::move(layout);

  if (header.record_bytes != header.layout.sample_bytes()) {
    return absl::DataLossError(absl::StrCat(
        "record bytes ", header.record_bytes, " at byte offset ",
        kRecordBytesOffset, " disagrees with the layout's sample bytes ",
        header.layout.sample_bytes(), " (", header.layout.ToString(), ")"));
  }
  if (header.count == 0) {
    return absl::DataLossError(
        absl::StrCat("zero records (count at byte offset ", kCountOffset,
                     "); was the writer closed?"));
  }
  // header + count × record == file_size, without overflowing.
  const uint64_t data_bytes = file_size - header.header_bytes;
  if (header.count > data_bytes / header.record_bytes ||
      header.count * header.record_bytes != data_bytes) {
    return absl::DataLossError(absl::StrCat(
        "file size ", file_size, " disagrees with the header: ",
        header.header_bytes, " header bytes + ", header.count,
        " records (byte offset ", kCountOffset, ") × ", header.record_bytes,
        " bytes; the records hold ", data_bytes, " bytes"));
  }
  return header;
}

std::vector<std::byte> SerializeRecordFileHeader(const SampleLayout& layout,
                                                 uint64_t count) {
  const uint32_t header_bytes = SerializedHeaderBytes(layout);
  std::vector<std::byte> out;
  out.reserve(header_bytes);
  for (char c : kRecordFileMagic) out.push_back(static_cast<std::byte>(c));
  PutLittleEndian<uint32_t>(out, kRecordFileVersion);
  PutLittleEndian<uint32_t>(out, header_bytes);
  PutLittleEndian<uint64_t>(out, count);
  PutLittleEndian<uint64_t>(out, layout.sample_bytes());
  PutLittleEndian<uint32_t>(out, static_cast<uint32_t>(layout.num_fields()));
  for (const FieldSpec& field : layout.fields()) {
    PutLittleEndian<uint16_t>(out, static_cast<uint16_t>(field.name.size()));
    for (char c : field.name) out.push_back(static_cast<std::byte>(c));
    PutLittleEndian<uint8_t>(out, static_cast<uint8_t>(field.dtype));
    PutLittleEndian<uint8_t>(out, static_cast<uint8_t>(field.shape.size()));
    for (int64_t dim : field.shape) PutLittleEndian<int64_t>(out, dim);
  }
  out.resize(header_bytes, std::byte{0});
  return out;
}

// --- RecordFileWriter -------------------------------------------------------

absl::StatusOr<RecordFileWriter> RecordFileWriter::Create(
    const std::string& path, SampleLayout layout) {
  if (layout.num_fields() == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": the layout has no fields"));
  }
  if (layout.num_fields() > static_cast<int>(kMaxFields)) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": the layout has ", layout.num_fields(),
        " fields, more than a record file holds (", kMaxFields, ")"));
  }
  for (const FieldSpec& field : layout.fields()) {
    if (field.variable_length) {
      return absl::InvalidArgumentError(absl::StrCat(
          path, ": field '", field.name,
          "' is variable-length; record files hold fixed-size records"));
    }
    if (field.name.size() > kMaxNameBytes || field.shape.size() > kMaxRank) {
      return absl::InvalidArgumentError(absl::StrCat(
          path, ": field '", field.name, "' has a name longer than ",
          kMaxNameBytes, " bytes or a rank above ", kMaxRank));
    }
  }
  // Note [replace, never truncate]: the records go to a new file beside
  // `path`, renamed over it by Close(). A reader that maps the old file
  // keeps reading the old bytes (the rename leaves its inode alone);
  // truncating the mapped file in place would make its reads raise SIGBUS
  // (see Note [mapping hazard] in loader/internal/mapped_file.h).
  std::string tmp_path;
  int fd = -1;
  static std::atomic<uint64_t> next_tmp{0};
  for (int attempt = 0; fd < 0; ++attempt) {
    tmp_path = absl::StrCat(path, ".tmp-", ::getpid(), "-",
                            next_tmp.fetch_add(1, std::memory_order_relaxed));
    // 0666 less the umask, as fopen(path, "wb") would create it.
    fd = ::open(tmp_path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC,
                0666);
    if (fd < 0 && (errno != EEXIST || attempt >= 100)) {
      const int error = errno;
      return absl::ErrnoToStatus(
          error, absl::StrCat("cannot create ", path, " (its temporary file ",
                              tmp_path, ")"));
    }
  }
  std::FILE* file = ::fdopen(fd, "wb");
  if (file == nullptr) {
    const int error = errno;
    ::close(fd);
    ::unlink(tmp_path.c_str());
    return absl::ErrnoToStatus(error, absl::StrCat("cannot create ", path));
  }
  RecordFileWriter writer(path, std::move(tmp_path), std::move(layout), file);
  // Full buffering in large blocks: records are appended sequentially.
  writer.buffer_ = std::make_unique<char[]>(kWriteBufferBytes);
  std::setvbuf(file, writer.buffer_.get(), _IOFBF, kWriteBufferBytes);
  // The header with count 0: a file whose writer never closed is rejected.
  const std::vector<std::byte> header =
      SerializeRecordFileHeader(writer.layout_, 0);
  if (std::fwrite(header.data(), 1, header.size(), file) != header.size()) {
    const int error = errno;
    writer.Abandon();
    return absl::ErrnoToStatus(
        error, absl::StrCat("cannot write the header of ", path));
  }
  return writer;
}

RecordFileWriter::RecordFileWriter(std::string path, std::string tmp_path,
                                   SampleLayout layout, std::FILE* file)
    : path_(std::move(path)),
      tmp_path_(std::move(tmp_path)),
      layout_(std::move(layout)),
      file_(file) {}

RecordFileWriter::RecordFileWriter(RecordFileWriter&& other) noexcept
    : path_(std::move(other.path_)),
      tmp_path_(std::move(other.tmp_path_)),
      layout_(std::move(other.layout_)),
      file_(std::exchange(other.file_, nullptr)),
      count_(std::exchange(other.count_, 0)),
      buffer_(std::move(other.buffer_)) {}

RecordFileWriter& RecordFileWriter::operator=(
    RecordFileWriter&& other) noexcept {
  if (this != &other) {
    (void)Close();
    path_ = std::move(other.path_);
    tmp_path_ = std::move(other.tmp_path_);
    layout_ = std::move(other.layout_);
    file_ = std::exchange(other.file_, nullptr);
    count_ = std::exchange(other.count_, 0);
    buffer_ = std::move(other.buffer_);
  }
  return *this;
}

RecordFileWriter::~RecordFileWriter() { (void)Close(); }

absl::Status RecordFileWriter::Append(
    const std::vector<absl::Span<const std::byte>>& fields) {
  if (file_ == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat(path_, ": Append() on a closed record file writer"));
  }
  if (fields.size() != layout_.fields().size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        path_, ": Append() got ", fields.size(), " fields, the layout has ",
        layout_.num_fields(), " (", layout_.ToString(), ")"));
  }
  for (size_t f = 0; f < fields.size(); ++f) {
    const FieldSpec& spec = layout_.fields()[f];
    if (fields[f].size() != spec.bytes()) {
      return absl::InvalidArgumentError(absl::StrCat(
          path_, ": field ", f, " ('", spec.name, "') of record ", count_,
          " has ", fields[f].size(), " bytes, the layout wants ", spec.bytes(),
          " (", spec.ToString(), ")"));
    }
  }
  for (size_t f = 0; f < fields.size(); ++f) {
    if (std::fwrite(fields[f].data(), 1, fields[f].size(), file_) !=
        fields[f].size()) {
      return WriteError(path_, count_);
    }
  }
  ++count_;
  return absl::OkStatus();
}

absl::Status RecordFileWriter::AppendRaw(absl::Span<const std::byte> record) {
  if (file_ == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat(path_, ": AppendRaw() on a closed record file writer"));
  }
  if (record.size() != layout_.sample_bytes()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path_, ": record ", count_, " has ", record.size(),
                     " bytes, the layout wants ", layout_.sample_bytes(), " (",
                     layout_.ToString(), ")"));
  }
  if (std::fwrite(record.data(), 1, record.size(), file_) != record.size()) {
    return WriteError(path_, count_);
  }
  ++count_;
  return absl::OkStatus();
}

void RecordFileWriter::Abandon() {
  if (file_ == nullptr) return;
  std::fclose(std::exchange(file_, nullptr));
  ::unlink(tmp_path_.c_str());
  buffer_.reset();
}

absl::Status RecordFileWriter::Close() {
  if (file_ == nullptr) return absl::OkStatus();
  std::FILE* file = std::exchange(file_, nullptr);
  absl::Status status;
  // Only the count changes: rewrite its 8 bytes in place.
  std::vector<std::byte> count;
  PutLittleEndian<uint64_t>(count, count_);
  if (std::fflush(file) != 0) {
    const int error = errno;
    status = absl::ErrnoToStatus(
        error, absl::StrCat("cannot write the records of ", path_));
  } else if (std::fseek(file, static_cast<long>(kCountOffset), SEEK_SET) != 0 ||
             std::fwrite(count.data(), 1, count.size(), file) != count.size() ||
             std::fflush(file) != 0) {
    const int error = errno;
    status = absl::ErrnoToStatus(
        error, absl::StrCat("cannot write the record count into the header "
                            "of ",
                            path_));
  } else if (::fsync(::fileno(file)) != 0) {
    const int error = errno;
    status = absl::ErrnoToStatus(
        error, absl::StrCat("cannot fsync the records of ", path_));
  }
  if (std::fclose(file) != 0 && status.ok()) {
    const int error = errno;
    status = absl::ErrnoToStatus(error, absl::StrCat("cannot close ", path_));
  }
  buffer_.reset();
  if (!status.ok()) {
    ::unlink(tmp_path_.c_str());  // `path` keeps whatever it held before
    return status;
  }
  // One atomic rename over `path`, made durable (loader/atomic_file.h).
  return PublishFile(tmp_path_, path_);
}

// --- RecordFileDataset ------------------------------------------------------

absl::StatusOr<std::shared_ptr<RecordFileDataset>> RecordFileDataset::Open(
    const std::string& path) {
  PINWHEEL_ASSIGN_OR_RETURN(internal::MappedFile file,
                            internal::MappedFile::Open(path));
  absl::StatusOr<RecordFileHeader> header = ParseRecordFileHeader(
      absl::Span<const std::byte>(file.data(), file.size()), file.size());
  if (!header.ok()) return WithPath(path, header.status());
  // Note [record access pattern]: samplers shuffle, so reads are random.
  // MADV_RANDOM turns off read-ahead, which would read ~128 KiB around every
  // small record; records of that size or more keep the default read-around,
  // which then fetches a record in one I/O instead of page by page.
  constexpr uint64_t kRandomAdviceBelowBytes = 128 << 10;
  // Advice only: a failure changes nothing but read-ahead.
  if (header->record_bytes < kRandomAdviceBelowBytes) {
    ::madvise(const_cast<std::byte*>(file.data()), file.size(), MADV_RANDOM);
  }
  return std::shared_ptr<RecordFileDataset>(
      new RecordFileDataset(path, *std::move(header),
                            std::make_unique<internal::MappedFile>(
                                std::move(file))));
}

RecordFileDataset::RecordFileDataset(std::string path, RecordFileHeader header,
                                     std::unique_ptr<internal::MappedFile> file)
    : path_(std::move(path)),
      header_(std::move(header)),
      file_(std::move(file)) {
  size_t offset = 0;
  field_offsets_.reserve(header_.layout.fields().size());
  field_bytes_.reserve(header_.layout.fields().size());
  for (const FieldSpec& field : header_.layout.fields()) {
    field_offsets_.push_back(offset);
    field_bytes_.push_back(field.bytes());
    offset += field.bytes();
  }
}

RecordFileDataset::~RecordFileDataset() = default;

absl::Span<const std::byte> RecordFileDataset::record(int64_t index) const {
  return absl::Span<const std::byte>(
      file_->data() + header_.header_bytes +
          static_cast<uint64_t>(index) * header_.record_bytes,
      header_.record_bytes);
}

absl::Status RecordFileDataset::Read(int64_t index, SampleView& out) const {
  if (index < 0 || static_cast<uint64_t>(index) >= header_.count) {
    return absl::OutOfRangeError(absl::StrCat(
        path_, ": index ", index, " is outside [0, ", header_.count, ")"));
  }
  const uint64_t offset = header_.header_bytes +
                          static_cast<uint64_t>(index) * header_.record_bytes;
  const std::byte* record = file_->data() + offset;
  const int num_fields = static_cast<int>(field_bytes_.size());
  if (out.layout().num_fields() != num_fields) {
    return absl::InvalidArgumentError(
        absl::StrCat(path_, ": the sample view has ", out.layout().num_fields(),
                     " fields, the file has ", num_fields));
  }
  // A file truncated in place under the mapping: DataLoss, not SIGBUS.
  PINWHEEL_RETURN_IF_ERROR(
      file_->CheckRange(offset, header_.record_bytes, "record", index));
  for (int f = 0; f < num_fields; ++f) {
    absl::Span<std::byte> dst = out.field(f);
    if (dst.size() != field_bytes_[f]) {
      return absl::InvalidArgumentError(
          absl::StrCat(path_, ": field ", f, " of the sample view has ",
                       dst.size(), " bytes, the file's has ", field_bytes_[f]));
    }
    std::memcpy(dst.data(), record + field_offsets_[f], field_bytes_[f]);
  }
  return absl::OkStatus();
}

}  // namespace pinwheel
