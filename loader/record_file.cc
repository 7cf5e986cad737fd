#include "loader/record_file.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <memory>
#include <sys/mman.h>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

#include "loader/internal/file_copy.h"
#include "loader/internal/mapped_file.h"
#include "loader/internal/record_format.h"
#include "loader/storage/local_file_store.h"
#include "loader/storage/open_object_store.h"
#include "pinning/base/coding.h"
#include "pinning/base/status_macros.h"

namespace pinwheel {
namespace {

using internal::record_format::kCountOffset;
using internal::record_format::kFixedHeaderBytes;
using internal::record_format::kHeaderAlignment;
using internal::record_format::kHeaderBytesOffset;
using internal::record_format::kMagicOffset;
using internal::record_format::kMaxFields;
using internal::record_format::kMaxHeaderBytes;
using internal::record_format::kMaxNameBytes;
using internal::record_format::kMaxRank;
using internal::record_format::kMaxSampleBytes;
using internal::record_format::kNumDTypes;
using internal::record_format::kNumFieldsOffset;
using internal::record_format::kRecordBytesOffset;
using internal::record_format::kVersionOffset;

// Records are the fields' raw bytes; the format says little-endian.
static_assert(std::endian::native == std::endian::little,
              "record files hold little-endian data; big-endian hosts would "
              "need a byte swap in Read()");

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
  LittleEndianReader reader(bytes.first(header.header_bytes), TruncatedHeader);
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

absl::StatusOr<std::shared_ptr<RecordFileDataset>> RecordFileDataset::Open(
    const std::string& url, const StoreOptions& storage,
    std::shared_ptr<ObjectStore> store) {
  if (store == nullptr) {
    PINWHEEL_ASSIGN_OR_RETURN(UrlScheme scheme, SchemeOf(url));
    if (scheme == UrlScheme::kLocal) {
      return Open(std::string(LocalPathOf(url)));
    }
    absl::StatusOr<std::shared_ptr<ObjectStore>> opened =
        OpenObjectStore(url, storage);
    if (!opened.ok()) return WithPath(url, opened.status());
    store = *std::move(opened);
  }
  absl::StatusOr<int64_t> size = store->Size(url);
  if (!size.ok()) return size.status();  // names the URL
  // The header: its fixed part says how long it is; at most kMaxHeaderBytes.
  std::vector<std::byte> bytes(static_cast<size_t>(
      std::min<int64_t>(*size, std::min<int64_t>(kMaxHeaderBytes, 64 << 10))));
  for (;;) {
    const RangeRead read = {url, 0, absl::MakeSpan(bytes)};
    PINWHEEL_RETURN_IF_ERROR(store->Read({&read, 1}));
    if (bytes.size() < kFixedHeaderBytes) break;
    uint32_t header_bytes = 0;
    std::memcpy(&header_bytes, bytes.data() + kHeaderBytesOffset,
                sizeof(header_bytes));
    if (header_bytes <= bytes.size() || header_bytes > kMaxHeaderBytes ||
        header_bytes > static_cast<uint64_t>(*size)) {
      break;  // whole, or a fault ParseRecordFileHeader names
    }
    bytes.resize(header_bytes);
  }
  absl::StatusOr<RecordFileHeader> header =
      ParseRecordFileHeader(bytes, static_cast<uint64_t>(*size));
  if (!header.ok()) return WithPath(url, header.status());
  return std::shared_ptr<RecordFileDataset>(new RecordFileDataset(
      url, *std::move(header), nullptr, std::move(store)));
}

absl::StatusOr<std::shared_ptr<RecordFileDataset>> RecordFileDataset::Open(
    const std::string& path) {
  if (absl::StatusOr<UrlScheme> scheme = SchemeOf(path);
      !scheme.ok() || *scheme != UrlScheme::kLocal) {
    return Open(path, StoreOptions{});
  }
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
  return std::shared_ptr<RecordFileDataset>(new RecordFileDataset(
      path, *std::move(header),
      std::make_unique<internal::MappedFile>(std::move(file)), nullptr));
}

RecordFileDataset::RecordFileDataset(std::string path, RecordFileHeader header,
                                     std::unique_ptr<internal::MappedFile> file,
                                     std::shared_ptr<ObjectStore> store)
    : path_(std::move(path)),
      header_(std::move(header)),
      file_(std::move(file)),
      store_(std::move(store)),
      gather_copy_(std::make_unique<internal::SharedFileCopy>()) {
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
  if (file_ == nullptr) return {};
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
  const int num_fields = static_cast<int>(field_bytes_.size());
  if (out.layout().num_fields() != num_fields) {
    return absl::InvalidArgumentError(
        absl::StrCat(path_, ": the sample view has ", out.layout().num_fields(),
                     " fields, the file has ", num_fields));
  }
  // Each field straight into its place in the slot, in one preadv: a file
  // truncated in place is DataLoss, not SIGBUS (Note [mapping hazard]).
  thread_local std::vector<absl::Span<std::byte>> parts;
  parts.clear();
  for (int f = 0; f < num_fields; ++f) {
    absl::Span<std::byte> dst = out.field(f);
    if (dst.size() != field_bytes_[f]) {
      return absl::InvalidArgumentError(
          absl::StrCat(path_, ": field ", f, " of the sample view has ",
                       dst.size(), " bytes, the file's has ", field_bytes_[f]));
    }
    parts.push_back(dst);
  }
  if (store_ != nullptr) {
    // One range read per record: into the field itself, or through this
    // thread's buffer when the record has several fields.
    absl::Status status;
    if (parts.size() == 1) {
      const RangeRead read = {path_, static_cast<int64_t>(offset), parts[0]};
      status = store_->Read({&read, 1});
    } else {
      thread_local std::vector<std::byte> record;
      record.resize(static_cast<size_t>(header_.record_bytes));
      const RangeRead read = {path_, static_cast<int64_t>(offset),
                              absl::MakeSpan(record)};
      status = store_->Read({&read, 1});
      size_t at = 0;
      for (const absl::Span<std::byte>& part : parts) {
        if (!status.ok()) break;
        std::memcpy(part.data(), record.data() + at, part.size());
        at += part.size();
      }
    }
    if (status.ok()) return status;
    return absl::Status(status.code(), absl::StrCat(path_, ": record ", index,
                                                    ": ", status.message()));
  }
  return file_->ReadInto(offset, parts, "record", index);
}

absl::StatusOr<GatherSource> RecordFileDataset::Gather(
    uint64_t max_copy_bytes) const {
  if (file_ == nullptr) {
    return absl::UnimplementedError(absl::StrCat(
        path_,
        ": a record file at a URL is read with Read(), not gathered "
        "(copy it to a local disk for the gather path)"));
  }
  const uint64_t bytes =
      header_.header_bytes + header_.count * header_.record_bytes;
  PINWHEEL_ASSIGN_OR_RETURN(std::shared_ptr<const internal::FileCopy> copy,
                            gather_copy_->Get(*file_, bytes, max_copy_bytes));
  GatherSource source;
  source.regions = {copy->bytes()};
  source.owner = copy;
  source.owns_pages = true;  // a FileCopy is page-aligned whole pages
  source.fields.reserve(field_bytes_.size());
  for (size_t f = 0; f < field_bytes_.size(); ++f) {
    source.fields.push_back({.region = 0,
                             .offset = header_.header_bytes + field_offsets_[f],
                             .stride = header_.record_bytes,
                             .bytes = field_bytes_[f]});
  }
  return source;
}

}  // namespace pinwheel
